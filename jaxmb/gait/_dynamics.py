"""The leg's inverse dynamics inside the compiled pipeline: the floating-base chain
thigh, shank, foot (a template whose parameters each trial replaces), the ground
reaction force as a wrench on the foot, and the moments, reactions, angles and powers
of :data:`OUTPUTS` over trials and samples."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .._math import sincos
from ..datasets import SEGMENTS
from ..dynamics import joint_loads, joint_moments
from ..model import tree
from ..dynamics import joint_reactions
from ._result import OUTPUTS



#: the kernel of the pipeline's inverse dynamics: "matrix" materialises the
#: recursion's rows, where the unrolled one recomputes it for each of the 9 rows
#: (moments and reactions) and for each consumer of a row (the timings:
#: docs/performance.md, "The gait pipeline's kernel").
_KERNEL = "matrix"


@functools.lru_cache(maxsize=None)
def _template(x64: bool):
    """The leg's topology, with the parameters of the dtype of the calls that use it
    (one template per dtype: ``analyze(dtype=...)`` runs in a scoped
    ``jax.enable_x64``, so ``x64`` is the scope's; a template built in the other
    would be cast, with Model.astype's warning for float32 at float64)."""
    # concrete arrays even when first called inside a trace (the result is cached)
    with jax.ensure_compile_time_eval():
        return tree([-1, 0, 1], [0.4, 0.4, 0.2], [0.2, 0.2, 0.0], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1],
                    base="floating", coordinates="absolute", names=SEGMENTS)  # fmt: skip


# atan(u) = u + u^3 R(u^2) for |u| <= tan(pi/8): R a degree-10 polynomial, the
# least-squares Chebyshev fit of (atan(sqrt s) - sqrt s) / s^1.5 on [0, tan^2(pi/8)]
# at 200 nodes in 40-digit arithmetic (mpmath); max error 6e-17 (1 ulp) on a dense grid.
_ATAN_R = (-0.3333333333333333, 0.19999999999994503, -0.1428571428462948, 0.11111111017650721,
           -0.09090904780145262, 0.07692189199720122, -0.06664606843541106, 0.05859034395152528,
           -0.05090270018828818, 0.0393743836090828, -0.019354465993819753)  # fmt: skip


_TAN_PI8 = 0.41421356237309503


def _atan2(y, x):
    """``arctan2(y, x)`` as one vectorisable expression (XLA:CPU's own arctan2 cost
    about as much as the rest of the pipeline's angle step).

    With a = min(|x|, |y|) / max(|x|, |y|) in [0, 1]: atan(a) = pi/4 + atan(u) with
    u = (a - 1) / (a + 1) when a > tan(pi/8), else u = a, and |u| <= tan(pi/8); then
    pi/2 - . when |y| > |x|, pi - . when x < 0, and the sign of y. Float64: within a
    few ulp of NumPy's (tests)."""
    ax, ay = jnp.abs(x), jnp.abs(y)
    lo, hi = jnp.minimum(ax, ay), jnp.maximum(ax, ay)
    big = lo > _TAN_PI8 * hi
    num = jnp.where(big, lo - hi, lo)
    den = jnp.where(big, lo + hi, hi)
    u = num / jnp.where(den == 0, 1, den)
    v = u * u
    p = jnp.asarray(_ATAN_R[-1], u.dtype)
    for c in _ATAN_R[-2::-1]:
        p = p * v + c
    r = u + u * v * p + jnp.where(big, jnp.pi / 4, 0)
    r = jnp.where(ay > ax, jnp.pi / 2 - r, r)
    r = jnp.where(jnp.signbit(x), jnp.pi - r, r)
    return jnp.where(jnp.signbit(y), -r, r)


def _foot_loads(L, d, q, frc, mz):
    """:func:`jaxmb.point_load` of the ground reaction force on the foot, over any
    leading batch shape: (..., 3, 3) loads, the thigh and shank rows zero.

    The same wrench (F, Mz + (p - c) x F at the foot's centre of mass c), written over
    the batch with the engine's sincos (`jaxmb._math.sincos`): ``vmap`` of ``point_load`` evaluates
    the pose with XLA's sine and cosine and writes a scatter per sample, which cost
    more than the inverse dynamics here. L, d: (..., 3) lengths and centre-of-mass
    distances; q (..., 5) hip x, y and the absolute segment angles; frc (..., 4)
    Fx, Fy, COPx, COPy; mz (...,) or None."""
    c, s = sincos(q[..., 2:])
    # c_foot = hip + L_thigh u_thigh + L_shank u_shank + d_foot u_foot
    cx = q[..., 0] + L[..., 0] * c[..., 0] + L[..., 1] * c[..., 1] + d[..., 2] * c[..., 2]
    cy = q[..., 1] + L[..., 0] * s[..., 0] + L[..., 1] * s[..., 1] + d[..., 2] * s[..., 2]
    fx, fy = frc[..., 0], frc[..., 1]
    m = (frc[..., 2] - cx) * fy - (frc[..., 3] - cy) * fx
    if mz is not None:
        m = m + mz
    zero = jnp.zeros_like(fx)
    return jnp.stack([zero, zero, zero, zero, zero, zero, fx, fy, m], -1).reshape(fx.shape + (3, 3))


def _dynamics(params, q, qd, qdd, frc, mz, pelvis, pelvis_rate, *, terms: bool, outputs: tuple = OUTPUTS):
    """One jitted computation over trials (B) and samples (T): moments, reactions,
    angles, powers, those of ``outputs`` (:data:`OUTPUTS`) only. params: (L, d, m, I)
    (B, 3) each and gravity (); mz, pelvis and pelvis_rate (B, T) or None."""
    L, d, m, I, g = params
    template = _template(L.dtype == jnp.float64)

    def model_of(L, d, m, I, g):
        com = jnp.stack([d, jnp.zeros_like(d)], -1)
        return template.replace(length=L, com=com, mass=m, inertia=I, gravity=g)

    loads = _foot_loads(L[:, None], d[:, None], q, frc, mz)  # (B, T, 3, 3)

    want = set(outputs)
    need_tau = terms or bool(want & {"moments", "powers", "base_residual"})
    need_lam = terms or bool(want & {"reactions", "reactions_segment", "base_residual"})

    def solve(model, q, qd, qdd, ld, use_loads=True):
        if not use_loads:
            ld = jnp.zeros_like(ld)
        # the moment T and the force F that each segment's parent exerts at its joint
        # (world frame), those that the outputs need: both from one pass of
        # joint_loads (the matrix kernel materialises its rows, see _KERNEL), or one
        # of joint_moments and joint_reactions
        call = lambda f: jax.vmap(lambda a, b, c, e: f(model, a, b, c, e, kernel=_KERNEL))(q, qd, qdd, ld)  # noqa: E731
        if need_tau and need_lam:
            _, F, T = call(joint_loads)
            return T, F
        return (call(joint_moments) if need_tau else None), (call(joint_reactions) if need_lam else None)

    def trial(L, d, m, I, q, qd, qdd, ld):
        model = model_of(L, d, m, I, g)
        tau, lam = solve(model, q, qd, qdd, ld)
        out = {"moments": tau, "reactions": lam}
        if terms:
            zero = jnp.zeros_like(q)
            still = model_of(L, d, m, I, jnp.zeros_like(g))
            grav = solve(model, q, zero, zero, ld, use_loads=False)
            grf = solve(still, q, zero, zero, ld)
            lin = solve(model_of(L, d, m, jnp.zeros_like(I), jnp.zeros_like(g)), q, qd, qdd, ld, use_loads=False)
            inertial = solve(still, q, qd, qdd, ld, use_loads=False)
            rot = (inertial[0] - lin[0], inertial[1] - lin[1])
            out["terms"] = {"gravity": grav, "ground_reaction": grf, "linear_inertia": lin, "rotational_inertia": rot}
        return out

    out = jax.vmap(trial)(L, d, m, I, q, qd, qdd, loads)
    tau, lam = out.pop("moments"), out.pop("reactions")
    if terms or "moments" in want:
        out["moments"] = tau
    if terms or "reactions" in want:
        out["reactions"] = lam
    if "base_residual" in want:
        out["base_residual"] = jnp.concatenate([lam[..., 0, :], tau[..., :1]], -1)
    if not want & {"angles", "velocities", "powers", "reactions_segment"}:
        return out
    theta, omega = q[..., 2:], qd[..., 2:]
    # relative angles: hip from the pelvis's downward axis (theta_thigh + pi/2), knee, ankle
    hip = theta[..., :1] + jnp.pi / 2
    hip_rate = omega[..., :1]
    if pelvis is not None:
        hip, hip_rate = hip - pelvis[..., None], hip_rate - pelvis_rate[..., None]
    rel = jnp.concatenate([hip, theta[..., 1:] - theta[..., :-1]], -1)
    rel = rel - 2 * jnp.pi * jnp.round(rel[:, :1] / (2 * jnp.pi))  # first sample in (-pi, pi]
    rel_rate = jnp.concatenate([hip_rate, omega[..., 1:] - omega[..., :-1]], -1)
    if "angles" in want:
        out["angles"] = rel
    if "velocities" in want:
        out["velocities"] = rel_rate
    if "powers" in want:
        out["powers"] = tau * rel_rate
    if "reactions_segment" in want:
        c, s = sincos(theta)
        axial = c * lam[..., 0] + s * lam[..., 1]
        shear = -s * lam[..., 0] + c * lam[..., 1]
        out["reactions_segment"] = jnp.stack([axial, shear], -1)
    return out
