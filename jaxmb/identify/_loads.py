"""Known external loads of a fit: forces measured at points on the segments."""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import numpy as np

from ..dynamics import point_load
from ..model import Model
from ._data import _as_float_array, _check_finite


class PointForce(NamedTuple):
    """A measured force at a point on a segment, for :func:`fit`: e.g. the ground
    reaction force at the centre of pressure, as a force plate gives it.

    :func:`fit` builds its wrenches at the centres of mass of the model it fits
    (:meth:`loads`), so that the force stays where it was measured whatever model
    starts the fit. An array of wrenches at the centres of mass belongs to the model
    it was built for: given with another starting model it moved the force (by the
    difference of the centres of mass), and the fit "converged" to a thigh inertia
    of -100 % and a shank inertia of +325 %.

    Attributes:
      segment: index or name of the segment the force acts on.
      point: (2,) or (..., 2) world position of the point of application, m, per
        sample of the movement (e.g. the centre of pressure).
      force: (2,) or (..., 2) world-frame force (Fx, Fy), N.
      moment: free moment Mz, N m: a number or (...) per sample (default 0).
    """

    segment: Union[int, str]
    point: Any
    force: Any
    moment: Any = 0.0

    def loads(self, model: Model, q) -> np.ndarray:
        """(..., segments, 3) world-frame wrenches (N, N m) at the centres of mass of
        ``model`` in the poses ``q`` (..., dof): :func:`jaxmb.point_load`."""
        return np.asarray(point_load(model, q, self.segment, self.point, self.force, self.moment))

    def select(self, index) -> "PointForce":
        """The samples ``index`` (an int, slice or index array over the leading axis)."""
        take = lambda x: x if np.ndim(x) == 0 else np.asarray(x)[index]  # noqa: E731
        return PointForce(self.segment, take(self.point), take(self.force), take(self.moment))


def _fit_loads(model: Model, q, loads, lead: tuple):
    """``fit``'s known loads as (..., segments, 3) wrenches at the centres of mass of
    ``model`` (the starting model), from a :class:`PointForce` (or a list of them), a
    function of the model, or an array of pure moments; None stays None.

    Built once: the joint moments and reactions of a force at a given point depend on
    the pose and the lengths, which the fit keeps, not on the masses, centres of mass
    and inertias it changes, so the same regressor term serves every model it visits.
    A wrench array with forces is refused: it holds the centres of mass of the model
    it was made for, which fit cannot check."""
    if loads is None:
        return None
    n = model.segments
    name = "loads"
    if isinstance(loads, PointForce) or (isinstance(loads, (list, tuple)) and loads
                                         and all(isinstance(f, PointForce) for f in loads)):  # fmt: skip
        forces = [loads] if isinstance(loads, PointForce) else list(loads)
        built = sum(f.loads(model, q) for f in forces)
    elif callable(loads):
        name = "loads(model)"
        built = loads(model)
    else:
        built = _as_float_array(loads, "loads")
        if built.shape[-2:] == (n, 3) and np.any(built[..., :2] != 0):
            raise ValueError(
                "loads as an array of wrenches at the centres of mass belong to the model they were made for (a "
                "force at another model's centre of mass is a force at another point, and the fit converges to "
                "wrong parameters without an error); give fit the force and its point: "
                "loads=jaxmb.identify.PointForce(segment, point, force) (e.g. the ground reaction at the centre of "
                "pressure), or a function of the model, loads=lambda m: ..., which fit calls with the model it fits "
                "(an array of pure moments, Fx = Fy = 0, is accepted)")  # fmt: skip
    built = _as_float_array(built, name)
    if built.shape[-2:] != (n, 3):
        raise ValueError(f"{name} must have shape ({n}, 3) or (..., {n}, 3), got {built.shape}")
    try:
        np.broadcast_shapes(built.shape[:-2], lead)
    except ValueError:
        raise ValueError(f"{name}'s samples {built.shape[:-2]} do not broadcast with those of q {lead}") from None
    _check_finite(built, name)
    return built
