"""The batched engine behind every public dynamics function (private).

One algorithm a module, layered bottom-up:

- :mod:`.layout`: the static options of an evaluation (:class:`Spec`, its
  :class:`Tuning`), the kernel and chunk plan, the chunked driver;
- :mod:`.rnea` (recursive Newton-Euler, unrolled or in matrix form), :mod:`.crba`
  (composite-body mass matrix), :mod:`.aba` (articulated-body forward dynamics),
  :mod:`.solve` (per-sample LDL^T and Cholesky over the batch axis);
- :mod:`.adjoint`: the hand-derived parameter adjoint (reverse mode with respect to
  the model, one fused pass over the batch);
- :mod:`.evaluate`: one evaluation over any leading batch shape (batch last, the
  layout the kernels vectorise over);
- :mod:`.rules`: the ``custom_vjp(custom_jvp(custom_vmap(kernel)))`` operator of
  each quantity and the entry points :func:`run` (compiled, cached) and :func:`call`
  (inside a jitted caller);
- :mod:`.integrate`: the classical Runge-Kutta stages shared by the integrators.

:func:`jaxmb.inverse_dynamics` and friends take one sample ``(dof,)`` or any leading
batch shape ``(..., dof)`` and call :func:`run`; ``jax.vmap`` of a single-sample call
reaches the same kernel through the ``custom_vmap`` rule, nested vmaps included.
Inside, the batch goes to the last, contiguous axis (``q`` of shape ``(dof, B)``), so
that each scalar operation of a recursion is one contiguous vector operation over the
batch; sine and cosine come from one expression (:func:`jaxmb._math.sincos`); no
per-sample matrix is formed in the inverse dynamics. Why each choice was made, with
its measurements: ``docs/performance.md``.
"""

from .integrate import RK4_STAGES, rk4_scan, rk4_unrolled
from .layout import ABA_FUSED_MAX, FD_SOLVERS, GRADIENTS, KINDS, METHODS, TUNING, Spec, Tuning
from .rules import call, forward_mode_hint, run

__all__ = [
    "ABA_FUSED_MAX",
    "FD_SOLVERS",
    "GRADIENTS",
    "KINDS",
    "METHODS",
    "RK4_STAGES",
    "TUNING",
    "Spec",
    "Tuning",
    "call",
    "forward_mode_hint",
    "rk4_scan",
    "rk4_unrolled",
    "run",
]
