"""Segment parameters from measured forces: regressor, identifiability, fit, uncertainty.

Planar dynamics is linear in the *barycentric* parameters of each segment i,

    pi_i = (m_i, m_i c_i,along, m_i c_i,across, J_i),    J_i = I_i + m_i |c_i|^2,

where c_i is the centre of mass in the segment frame from the proximal joint and J_i
the moment of inertia about the proximal joint (I_i about the centre of mass). For
every quantity the engine computes (generalized forces, joint moments, joint
reactions), with pi = (pi_1, ..., pi_n) flattened to ``(4 n,)``:

    y = Y(q, qd, qdd) pi + y0(q, loads).

Y is exact: it is the forward-mode Jacobian (``jax.jacfwd``) of the engine's own
batched kernels with respect to pi, with the loads left out (the engine is linear
and homogeneous in pi without them; the Jacobian of a linear map is the map). y0 is
the part of the known external loads: the engine run on the model with zero masses
and inertias. Loads are given as :func:`jaxmb.point_load` builds them (wrenches at
the centres of mass of the model passed in); they stand for forces at points fixed
on the segments, so y0 does not change with pi.

Identifiability (:func:`base_parameters`, :func:`identifiability`): only the
combinations of pi spanned by the columns of the stacked regressor can be estimated.
For a planar chain of n segments with a fixed base, revolute joints and gravity in
the plane, moments identify 3 n combinations (3 n - 2 without gravity): for each
segment the grouped parameters

    J_i + a_i^2 M_i,   m_i c_i,along + a_i M_i,   m_i c_i,across,

with M_i the total mass distal to segment i and a_i the distance of the next joint
(the segment length in a chain); no mass is identifiable. Joint reaction forces
make every mass identifiable, and so all 4 n parameters, as long as the root's mass
is seen: through gravity or the acceleration of a moving base (a fixed base in a
horizontal plane leaves m_1 out: 4 n - 1).

Fitting (:func:`fit`): (1) linear least squares on the base parameters; (2) a
physically consistent fit of the physical parameters (mass and inertia through
logarithms, so they stay positive; centre of mass free) by Levenberg-Marquardt,
jit-compiled, with optional priors (:func:`table_prior`) and a Huber loss; standard
errors from the Gauss-Newton Hessian. Uncertainty: :func:`sensitivity` (the
Jacobian of the joint loads with respect to every segment parameter, ``jax.jacfwd``
through the batched engine) and :func:`monte_carlo` (parameter draws into bands of
joint moments or reactions, all draws and frames in one call).

Parameter names: ``m[seg]`` (kg), ``mx[seg]`` and ``my[seg]`` (m c along and across
the axis, kg m), ``J[seg]`` (kg m^2 about the proximal joint); physical parameters
``mass``, ``com_along``, ``com_across`` (m) and ``inertia`` (kg m^2 about the centre
of mass), in that order per segment.

Layout: ``_parameters`` (physical <-> barycentric, consistency, the fit's log
coordinates), ``_regressor``, ``_base`` (base parameters), ``_prior``, ``_loads``,
``_data`` (the measured data kinds as regressor rows), ``_solver``
(Levenberg-Marquardt), ``_fit`` (the stages of :func:`fit`), ``_result``,
``_uncertainty`` (covariance, Monte Carlo), ``_running`` (the bundled trial).
"""

import importlib
import warnings

from ._base import BaseParameters, base_parameters, identifiability
from ._fit import fit
from ._loads import PointForce
from ._parameters import (PARAMETERS, PHYSICAL, QUANTITIES, Consistency, consistency, from_parameters, from_physical,
                          parameter_names, to_parameters, to_physical)  # fmt: skip
from ._prior import Prior, table_prior
from ._regressor import regressor, sensitivity
from ._result import BaseFit, FitResult
from ._running import running_trial
from ._solver import Solver
from ._uncertainty import Bands, monte_carlo

__all__ = [
    "PARAMETERS",
    "PHYSICAL",
    "QUANTITIES",
    "parameter_names",
    "to_parameters",
    "from_parameters",
    "to_physical",
    "from_physical",
    "consistency",
    "Consistency",
    "regressor",
    "base_parameters",
    "identifiability",
    "BaseParameters",
    "fit",
    "Solver",
    "PointForce",
    "FitResult",
    "BaseFit",
    "Prior",
    "table_prior",
    "sensitivity",
    "monte_carlo",
    "Bands",
    "running_trial",
]

# demo code of the running-leg recovery, moved out of the library to the module of
# the ``jaxmb identify`` command; reachable here, deprecated, for one release
_MOVED = {"perturbed", "recover_running", "recovery_figure", "bands_figure"}
_DEMO = "jaxmb.cli.identify_running"


def __getattr__(name):
    if name in _MOVED:
        warnings.warn(f"jaxmb.identify.{name} is deprecated (demo code, not library): use {_DEMO}.{name}, the "
                      "demo of the `jaxmb identify` command", DeprecationWarning, stacklevel=2)  # fmt: skip
        # imported by name when asked for: the command's module sits above the library
        return getattr(importlib.import_module(_DEMO), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
