"""The bundled running trial as identification data."""

from __future__ import annotations

import numpy as np

from ..datasets import running_leg
from ..dynamics import point_load
from ..model import Model
from ._loads import PointForce


def running_trial():
    """The van den Bogert running trial as identification data (:func:`jaxmb.datasets.running_leg`).

    The leg is a floating-base chain (thigh, shank, foot; base at the hip, absolute
    segment angles) with the simulation's parameters and gravity 9.80665; angles and
    hip position are differentiated with :func:`jaxmb.signal.derivative` (central
    second differences, all 6001 frames); the ground reaction force acts at the
    centre of pressure on the foot.

    Returns:
      dict: model (the true model), q, qd, qdd (T, 5), ground (the
      :class:`PointForce` of the ground reaction on the foot at the centre of
      pressure: what :func:`fit` takes as ``loads``, for any starting model), loads
      (T, 3, 3) (the same as wrenches at the centres of mass of the true model only:
      for :func:`regressor` and :func:`monte_carlo` of ``model``; fit refuses them),
      loads_for (a function: the wrenches for another model), moments (T, 3) N m,
      moment_weights (T,) (1 from heel strike on, where the true moments are given;
      0 before), force_magnitudes (T, 3) N, data (the :class:`jaxmb.gait.RunningData`).
    """
    leg = running_leg()
    model, q, qd, qdd, cop, d = (leg[k] for k in ("model", "q", "qd", "qdd", "cop", "data"))

    def loads_for(m: Model) -> np.ndarray:
        # the ground reaction force at the centre of pressure, as wrenches at the
        # centres of mass of m (a load array belongs to the model it was built for)
        return np.asarray(point_load(m, q, "foot", cop, d.force))  # batched over the frames

    w = np.zeros(len(q))
    w[d.heel_strike:] = 1.0
    return dict(model=model, q=q, qd=qd, qdd=qdd, ground=PointForce("foot", cop, d.force), loads=loads_for(model),
                loads_for=loads_for, moments=d.moments, moment_weights=w, force_magnitudes=d.force_magnitudes,
                data=d)  # fmt: skip
