"""The solver settings of :func:`jaxmb.optimal.optimize`, as small option values.

``optimize(..., solver=LBFGS(max_iter=300))`` or ``solver=Adam(learning_rate=0.05)``:
each method carries its own settings (an L-BFGS memory means nothing to Adam), and the
everyday call, which keeps the defaults, names none of them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

__all__ = ["LBFGS", "Adam"]


def _check_int(name, value, low):
    """value as an int; ValueError unless an int (not a bool) >= low."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _check_tol(name, v) -> float:
    """v as a float; ValueError unless a finite real number >= 0."""
    if isinstance(v, (bool, np.bool_)) or not (isinstance(v, (int, float, np.floating)) and math.isfinite(v)
                                               and v >= 0):  # fmt: skip
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return float(v)


def _check_flag(name, v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {v!r}")
    return bool(v)


@dataclasses.dataclass(frozen=True)
class LBFGS:
    """L-BFGS (Optax) with its zoom line search (strong Wolfe conditions): the default solver.

    Attributes:
      max_iter: most iterations (>= 1; 1000: two-link reaches take tens of
        iterations, arms of more than two links up to several hundred).
      gtol: stop when the largest entry of the gradient of the normalised cost (the
        cost divided by its initial value) with respect to the coefficients is below
        gtol (status 0).
      ftol: stop when an iteration lowers the normalised cost by less than ftol
        relative (status 1).
      memory: pairs of steps and gradient changes kept.
      linesearch_steps: most steps of the zoom line search per iteration.
      precondition: (built-in costs) iterate on coefficients rescaled by the
        leading-order Hessian of the cost (the mass matrix for the torque costs, the
        hand's Jacobian for the hand jerk, along the minimum-jerk path; its
        eigenvalues floored at 3e-3 of the largest, for the self-motions of a
        redundant arm): the same minimum in fewer iterations. False: the plain
        coefficients.

    Example:
      >>> jaxmb.optimize(arm, x0, x1, 0.5, target="hand", solver=LBFGS(gtol=1e-9))  # doctest: +SKIP
    """

    max_iter: int = 1000
    gtol: float = 1e-7
    ftol: float = 1e-13
    memory: int = 20
    linesearch_steps: int = 30
    precondition: bool = True

    def __post_init__(self):
        object.__setattr__(self, "max_iter", _check_int("max_iter", self.max_iter, 1))
        object.__setattr__(self, "gtol", _check_tol("gtol", self.gtol))
        object.__setattr__(self, "ftol", _check_tol("ftol", self.ftol))
        object.__setattr__(self, "memory", _check_int("memory", self.memory, 1))
        object.__setattr__(self, "linesearch_steps", _check_int("linesearch_steps", self.linesearch_steps, 1))
        object.__setattr__(self, "precondition", _check_flag("precondition", self.precondition))


@dataclasses.dataclass(frozen=True)
class Adam:
    """Adam (Optax) with a fixed step size.

    Attributes:
      learning_rate: the step size, in the preconditioned coefficients of the
        normalised cost with the built-in costs (see ``precondition``), where the
        default 0.1 converges on the two-link reaches; with a cost function (plain
        coefficients) the step that works depends on the cost's scale.
      max_iter: most iterations (>= 1).
      gtol: stop when the largest entry of the gradient of the normalised cost is
        below gtol (status 0).
      precondition: as :attr:`LBFGS.precondition`.

    Example:
      >>> jaxmb.optimize(arm, x0, x1, 0.5, target="hand", solver=Adam(max_iter=3000))  # doctest: +SKIP
    """

    learning_rate: float = 0.1
    max_iter: int = 1000
    gtol: float = 1e-7
    precondition: bool = True

    def __post_init__(self):
        object.__setattr__(self, "learning_rate", _check_tol("learning_rate", self.learning_rate))
        object.__setattr__(self, "max_iter", _check_int("max_iter", self.max_iter, 1))
        object.__setattr__(self, "gtol", _check_tol("gtol", self.gtol))
        object.__setattr__(self, "precondition", _check_flag("precondition", self.precondition))


#: optimize's keywords of solver settings before the option values (deprecated)
_OLD = ("method", "maxiter", "gtol", "ftol", "memory", "learning_rate", "linesearch_steps", "precondition")


def _solver_from(solver, old: dict):
    """The solver option value: ``solver`` (default LBFGS()), or one built from the
    deprecated keywords ``old`` (method, maxiter, ...) with a DeprecationWarning; a
    keyword optimize does not know is a TypeError, as Python raises it."""
    unknown = sorted(set(old) - set(_OLD))
    if unknown:
        raise TypeError(f"optimize() got an unexpected keyword argument {unknown[0]!r}")
    if old:
        if solver is not None:
            raise ValueError(f"give the solver settings either as solver=LBFGS(...)/Adam(...) or as the deprecated "
                             f"keywords {sorted(old)}, not both")  # fmt: skip
        method = old.pop("method", "lbfgs")
        if method not in ("lbfgs", "adam"):
            raise ValueError(f"method must be 'lbfgs' or 'adam', got {method!r}")
        if "maxiter" in old:
            old["max_iter"] = old.pop("maxiter")
        cls = LBFGS if method == "lbfgs" else Adam
        fields = {f.name for f in dataclasses.fields(cls)}
        new = f"solver={cls.__name__}({', '.join(f'{k}=...' for k in sorted(old) if k in fields)})"
        warnings.warn(f"optimize's solver keywords ({', '.join(sorted(old) or ['method'])}) are deprecated: give "
                      f"{new} (jaxmb.optimal.{cls.__name__})", DeprecationWarning, stacklevel=3)
        return cls(**{k: v for k, v in old.items() if k in fields})  # Adam ignores ftol, memory, linesearch_steps
    if solver is None:
        return LBFGS()
    if not isinstance(solver, (LBFGS, Adam)):
        raise ValueError(f"solver must be jaxmb.optimal.LBFGS(...) or jaxmb.optimal.Adam(...), got {solver!r}")
    return solver
