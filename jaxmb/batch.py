"""Deprecated: ``jaxmb.batch`` was the engine's internal module.

Its kernels now live in the private package ``jaxmb._engine``; the public functions
(:func:`jaxmb.inverse_dynamics`, :func:`jaxmb.forward_dynamics`, ...) are the way to
call them. ``jaxmb.batch.sincos`` and ``SINCOS_LIMIT`` are in ``jaxmb._math``. This
module warns once, on import, and forwards every attribute for one release.
"""

from __future__ import annotations

import warnings

from . import _engine
from ._engine import adjoint as _adjoint
from ._engine import aba as _aba
from ._engine import crba as _crba
from ._engine import evaluate as _evaluate
from ._engine import layout as _layout
from ._engine import rnea as _rnea
from ._engine import rules as _rules
from ._engine import solve as _solve
from ._math import SINCOS_LIMIT, sincos

__all__ = ["sincos", "SINCOS_LIMIT"]

warnings.warn(
    "jaxmb.batch is deprecated and will be removed: call the public functions (jaxmb.inverse_dynamics, "
    "jaxmb.forward_dynamics, ...); sincos is jaxmb._math.sincos",
    DeprecationWarning,
    stacklevel=2,
)

_MODULES = (_engine, _layout, _rnea, _crba, _aba, _solve, _adjoint, _evaluate, _rules)


def __getattr__(name: str):
    for mod in _MODULES:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(f"module 'jaxmb.batch' has no attribute {name!r}")
