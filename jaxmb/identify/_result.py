"""What :func:`jaxmb.identify.fit` returns, and its report."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..model import Model
from ._base import BaseParameters
from ._parameters import PHYSICAL, to_physical


@dataclasses.dataclass(frozen=True)
class BaseFit:
    """Linear least squares on the base parameters.

    Attributes:
      parameters: the :class:`BaseParameters` of the data.
      values: (rank,) estimates of the combinations.
      stderr: (rank,) their standard errors: (A^T W A)^-1 with each data kind's rows
        weighed by its noise, ``sigma`` where given, else its own residual variance.
    """

    parameters: BaseParameters
    values: np.ndarray
    stderr: np.ndarray


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Result of :func:`fit`.

    Attributes:
      model: the fitted model (physically consistent).
      initial: the starting model.
      parameters: (4 n,) fitted barycentric parameters.
      stderr: (4 n,) their standard errors (0 for fixed parameters; inf for those
        that depend on a fitted coordinate the data and the prior leave
        undetermined, the others finite).
      physical: (n, 4) fitted mass, com along, com across, inertia.
      stderr_physical: (n, 4) standard errors of those (never NaN: inf for an
        undetermined one, e.g. a mass or an inertia pushed to its floor, where its
        log coordinate no longer changes the data).
      covariance: (4 n, 4 n) covariance of ``parameters`` (inf in the rows and
        columns of the undetermined ones).
      residuals: dict "moments" (..., n) N m and/or "reactions" (..., n) N (of the
        magnitudes) or (..., n, 2) (of the vectors): model minus measurement, at the
        fitted parameters.
      rms: dict of the weighted RMS residual of each data kind, sqrt(sum w^2 r^2 /
        sum w^2) with the weights w of :func:`fit` (which multiply the residuals), so
        a value of weight 0 does not count and 0/1 weights give the plain RMS of the
        values used.
      converged: True when the Levenberg-Marquardt iterations met a tolerance and no
        free mass or inertia is stuck at its floor with the cost still falling as it
        grows (where the gradient in the log coordinates has underflowed: ``status``
        names them; such a parameter is first restarted from its starting value).
      status: how the iterations ended, in words.
      iterations: Levenberg-Marquardt iterations (both stages of a robust fit).
      cost: final value of the objective (half the sum of squared scaled residuals,
        prior included).
      free: (n, 4) bool, the fitted physical parameters.
      base: :class:`BaseFit` of the linear step (None when no linear data).
      names: (4 n,) parameter names.
      noise: dict of each data kind's noise level that the standard errors assume
        (N m for "moments", N for "reactions"): the ``sigma`` given, or the
        estimate from the residuals, sqrt(sum w^2 r^2 / (values - fitted
        parameters)) with the weights of :func:`fit` (values of weight 0 excluded;
        with ``loss="huber"``, of Huber's pseudo-residuals sign(r) sqrt(2 rho(r)),
        which shrink the outliers: below ``rms`` on data with spikes).
    """

    model: Model
    initial: Model
    parameters: np.ndarray
    stderr: np.ndarray
    physical: np.ndarray
    stderr_physical: np.ndarray
    covariance: np.ndarray
    residuals: dict
    rms: dict
    converged: bool
    status: str
    iterations: int
    cost: float
    free: np.ndarray
    base: BaseFit | None
    names: tuple
    noise: dict = dataclasses.field(default_factory=dict)
    _z: np.ndarray = dataclasses.field(repr=False, default=None)
    _cov_z: np.ndarray = dataclasses.field(repr=False, default=None)

    def report(self, true: Model | None = None) -> str:
        """A table of the fit: every physical parameter (start, fit +- stderr, and the
        error against ``true`` when given), the residuals and the base parameters."""
        m0 = np.asarray(to_physical(self.initial))
        tr = None if true is None else np.asarray(to_physical(true))
        head = f"{'parameter':22s}{'start':>12s}{'fit':>12s}{'stderr':>11s}"
        if tr is not None:
            head += f"{'true':>12s}{'error':>11s}"
        lines = [f"consistent fit: {'converged' if self.converged else 'NOT converged'} ({self.status}), "
                 f"{self.iterations} iterations", head]  # fmt: skip
        L = np.asarray(self.model.length)
        for i, s in enumerate(self.model.names):
            for j, p in enumerate(PHYSICAL):
                nm = f"{p}[{s}]"
                fixed = "" if self.free[i, j] else " (fixed)"
                row = f"{nm + fixed:22s}{m0[i, j]:12.5g}{self.physical[i, j]:12.5g}{self.stderr_physical[i, j]:11.2g}"
                if tr is not None:
                    err = self.physical[i, j] - tr[i, j]
                    # a column of its own whatever the size (133018.14 % ran into the true value)
                    if j in (1, 2):  # centre of mass: error as a fraction of the length
                        row += f"{tr[i, j]:12.5g} {_percent(100 * err / L[i])}%L"
                    else:
                        row += f"{tr[i, j]:12.5g} {_percent(100 * err / tr[i, j])}%"
                lines.append(row)
        if tr is not None:
            lines.append("error: fit - true, in % of the true value; for the centre of mass in % of the segment's "
                         "length (%L)")
        lines.append("RMS residuals: " + ", ".join(f"{k} {v:.4g} {'N m' if k == 'moments' else 'N'}"
                                                   for k, v in self.rms.items()))  # fmt: skip
        if self.base is not None:
            lines.append("linear least squares on the base parameters (" + self.base.parameters.report().split("\n")[0]
                         + "):")  # fmt: skip
            for c, v, e in zip(self.base.parameters.combinations, self.base.values, self.base.stderr):
                lines.append(f"  {c} = {v:.6g} +- {e:.2g}")
            if self.base.parameters.unidentifiable:
                lines.append("  not identifiable from these linear data: " + "; ".join(self.base.parameters.unidentifiable))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _percent(v: float) -> str:
    """A percentage in 9 characters: fixed point, or exponent notation from 1e5."""
    return f"{v:9.2f}" if abs(v) < 1e5 else f"{v:9.2e}"



UNEXPLAINED = 0.5


def _warn_unexplained(rms: dict, data: dict, no_loads: bool) -> None:
    """UserWarning, per data kind, when the fitted model leaves more than
    :data:`UNEXPLAINED` of the measured data's RMS unexplained: a fit of the running
    leg without its ground reaction "converged" to a 42 kg thigh with its centre of
    mass outside the segment, and only ``rms`` hinted at it. ``data``: kind ->
    (measured, weights)."""
    for k, (meas, w) in data.items():
        meas = np.asarray(meas)
        wk = np.broadcast_to((w if meas.ndim == np.ndim(w) else np.asarray(w)[..., None]) ** 2, meas.shape)
        size = float(np.sqrt(np.sum(wk * meas * meas) / max(np.sum(wk), 1e-300)))
        if size > 0 and rms[k] > UNEXPLAINED * size:
            hint = ("no loads were given: if forces act on the body (a ground reaction), pass them as loads= "
                    "(identify.PointForce)" if no_loads else
                    "check that the loads, the motion and the measured data belong to the same trial")
            warnings.warn(f"fit: the fitted model leaves {rms[k]:.4g} RMS of the measured {k} unexplained, "
                          f"{100 * rms[k] / size:.0f} % of their own RMS ({size:.4g}): its parameters explain "
                          f"little of the data; {hint}", UserWarning, stacklevel=3)  # fmt: skip
