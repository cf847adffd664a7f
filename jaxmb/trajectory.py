"""Deprecated: the planned movements and inverse kinematics live in :mod:`jaxmb.optimal`.

``jaxmb.trajectory.X`` still gives ``jaxmb.optimal.X`` for one release, with a
DeprecationWarning naming the new place ("trajectory" names what
:func:`jaxmb.simulate` integrates; a planned or optimised time course is a movement).
"""

import warnings

from . import optimal as _optimal

_MOVED = ("minimum_jerk", "two_link_ik", "time_derivatives", "hand_position", "workspace", "inverse_kinematics",
          "IKResult")

#: the names the top level jaxmb re-exports as well
_TOP = ("hand_position", "workspace", "inverse_kinematics", "IKResult")

__all__ = list(_MOVED)


def __getattr__(name):
    if name in _MOVED:
        also = f" (or jaxmb.{name})" if name in _TOP else ""
        warnings.warn(f"jaxmb.trajectory.{name} is deprecated: use jaxmb.optimal.{name}{also}", DeprecationWarning,
                      stacklevel=2)
        return getattr(_optimal, name)
    raise AttributeError(f"module 'jaxmb.trajectory' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
