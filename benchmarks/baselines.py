"""The baselines that jaxmb's batched dynamics are timed against, all in float64.

- :func:`numpy_rnea`: the notebooks' way, the segment-by-segment Newton-Euler of the
  gait notebook's ``invdyn2d`` (Fp = m a - Fd - m g, Mp = I alpha - Md - (rd - rcm) x
  Fd - (rp - rcm) x Fp), vectorised over the samples with NumPy, generalised to trees.
- :func:`sympy_chain`: the equations of motion of a planar chain derived with SymPy
  (Lagrange), ``lambdify``-ed to NumPy: tau = M(q) qdd + C(q, qd) + G(q).
- :class:`MujocoBaseline`: the same model in MuJoCo; ``mj_inverse`` / ``mj_forward``
  called in a Python loop over the samples.
- :class:`PinocchioBaseline`: the same model in Pinocchio (revolute-Z joints, prismatic
  X and Y for a floating base); ``pin.rnea`` / ``pin.aba`` in a loop and the batched,
  multithreaded ``pin.rneaInParallel`` / ``pin.abaInParallel`` over a ModelPool.

MuJoCo and Pinocchio use relative joint angles: inputs of a model in absolute
coordinates are converted before timing (theta = A q_relative, a constant linear map),
and their generalized forces are compared after converting back.
"""

from __future__ import annotations

import numpy as np

from jaxmb.model import ancestor_matrix

__all__ = [
    "numpy_rnea",
    "sympy_chain",
    "MujocoBaseline",
    "PinocchioBaseline",
    "MjxBaseline",
    "mujoco_rollout_model",
    "to_relative",
    "optional",
    "from_relative",
    "forces_to_model",
    "forces_to_relative",
]


def _params(model):
    return dict(
        com=np.asarray(model.com, float),
        mass=np.asarray(model.mass, float),
        inertia=np.asarray(model.inertia, float),
        attach=np.asarray(model.joint_attach, float),
        origin=np.asarray(model.origin, float),
        g=float(model.gravity),
    )


def to_relative(model, x):
    """q, qd or qdd (B, dof) of ``model`` in relative angles (MuJoCo's, Pinocchio's)."""
    x = np.asarray(x, float)
    if model.coordinates == "relative":
        return x
    nb = model.nbase
    A = ancestor_matrix(model.parent)  # theta = A q_rel
    return np.concatenate([x[:, :nb], np.linalg.solve(A, x[:, nb:].T).T], axis=1)


def from_relative(model, x_rel):
    """q, qd or qdd (B, dof) in relative angles to ``model``'s coordinates."""
    x_rel = np.asarray(x_rel, float)
    if model.coordinates == "relative":
        return x_rel
    nb = model.nbase
    A = ancestor_matrix(model.parent)
    return np.concatenate([x_rel[:, :nb], (A @ x_rel[:, nb:].T).T], axis=1)


def forces_to_relative(model, Q):
    """Generalized forces (B, dof) of ``model`` in relative angles: Q_rel = A^T Q."""
    Q = np.asarray(Q, float)
    if model.coordinates == "relative":
        return Q
    nb = model.nbase
    A = ancestor_matrix(model.parent)
    return np.concatenate([Q[:, :nb], (A.T @ Q[:, nb:].T).T], axis=1)


def forces_to_model(model, Q_rel):
    """Generalized forces (B, dof) in relative angles to ``model``'s: Q = A^-T Q_rel."""
    Q_rel = np.asarray(Q_rel, float)
    if model.coordinates == "relative":
        return Q_rel
    nb = model.nbase
    A = ancestor_matrix(model.parent)
    return np.concatenate([Q_rel[:, :nb], np.linalg.solve(A.T, Q_rel[:, nb:].T).T], axis=1)


# --------------------------------------------------------------------- NumPy


def numpy_rnea(model, q, qd, qdd):
    """Inverse dynamics and joint forces by the gait notebook's recursion, in NumPy.

    Args:
      model: a jaxmb model (its parameters are read once, as floats).
      q, qd, qdd: (dof, B) batch-last float64 arrays.

    Returns:
      (tau (dof, B), F (segments, 2, B)): generalized forces and the force of the
      parent on each segment at its joint (world frame).
    """
    p = _params(model)
    n, nb, parent = model.segments, model.nbase, model.parent
    kids = model.children
    absolute = model.coordinates == "absolute"
    B = q.shape[1]
    th, om, al = [None] * n, [None] * n, [None] * n
    rp, ap, rcm, acm = [None] * n, [None] * n, [None] * n, [None] * n
    # forward: angles, joint and centre-of-mass positions and accelerations
    for i in range(n):
        k = parent[i]
        if k < 0 or absolute:
            th[i], om[i], al[i] = q[nb + i], qd[nb + i], qdd[nb + i]
        else:
            th[i], om[i], al[i] = th[k] + q[nb + i], om[k] + qd[nb + i], al[k] + qdd[nb + i]
        c, s = np.cos(th[i]), np.sin(th[i])
        if k < 0:
            if nb:
                rp[i], ap[i] = np.stack([q[0], q[1]]), np.stack([qdd[0], qdd[1]])
            else:
                rp[i], ap[i] = np.broadcast_to(p["origin"][:, None], (2, B)), np.zeros((2, B))
        else:
            a = p["attach"][i]
            ck, sk = np.cos(th[k]), np.sin(th[k])
            rp[i] = rp[k] + a * np.stack([ck, sk])
            ap[i] = ap[k] + a * np.stack([-al[k] * sk - om[k] ** 2 * ck, al[k] * ck - om[k] ** 2 * sk])
        cx, cy = p["com"][i]
        r = np.stack([c * cx - s * cy, s * cx + c * cy])
        rcm[i] = rp[i] + r
        acm[i] = ap[i] + al[i] * np.stack([-r[1], r[0]]) - om[i] ** 2 * r

    def cross(u, v):
        return u[0] * v[1] - u[1] * v[0]

    # backward, as invdyn2d: the distal loads of segment i are minus its children's
    Fp, Mp = [None] * n, [None] * n
    for i in reversed(range(n)):
        m = p["mass"][i]
        Fd = sum((-Fp[c] for c in kids[i]), np.zeros((2, B)))
        Md = sum((-Mp[c] for c in kids[i]), np.zeros(B))
        # moments of the children's joint forces about the centre of mass
        mom = sum((cross(rp[c] - rcm[i], -Fp[c]) for c in kids[i]), np.zeros(B))
        Fp[i] = m * acm[i] - Fd - np.array([[0.0], [-p["g"] * m]])
        Mp[i] = p["inertia"][i] * al[i] - Md - mom - cross(rp[i] - rcm[i], Fp[i])
    T = np.stack(Mp)
    if absolute:
        Q = np.stack([T[i] - sum((T[c] for c in kids[i]), np.zeros(B)) for i in range(n)])
    else:
        Q = T
    tau = np.concatenate([Fp[0], Q]) if nb else Q
    return tau, np.stack(Fp)


# --------------------------------------------------------------------- SymPy


def sympy_chain(model):
    """tau(q, qd, qdd) of a fixed-base chain in relative coordinates, from SymPy.

    Lagrange's equations d/dt dL/dqd - dL/dq = tau of L = T - V, with the centres of
    mass written out in the joint angles; the result is ``lambdify``-ed to NumPy and
    takes (dof, B) arrays.

    Returns:
      (fn, seconds): the function ``fn(q, qd, qdd) -> (dof, B)`` and the time the
      derivation and lambdify took.
    """
    import time

    import sympy as sp

    if model.base != "fixed" or model.coordinates != "relative" or model.parent != tuple(range(-1, model.segments - 1)):
        raise ValueError("sympy_chain: a fixed-base chain in relative coordinates only")
    t0 = time.perf_counter()
    p = _params(model)
    n = model.segments
    t = sp.symbols("t")
    qs = [sp.Function(f"q{i}")(t) for i in range(n)]
    th = [sum(qs[: i + 1]) for i in range(n)]
    x0, y0 = (sp.Float(v) for v in p["origin"])
    T = 0
    V = 0
    P = (x0, y0)
    for i in range(n):
        if i > 0:
            a = sp.Float(p["attach"][i])
            P = (P[0] + a * sp.cos(th[i - 1]), P[1] + a * sp.sin(th[i - 1]))
        cx, cy = (sp.Float(v) for v in p["com"][i])
        xc = P[0] + cx * sp.cos(th[i]) - cy * sp.sin(th[i])
        yc = P[1] + cx * sp.sin(th[i]) + cy * sp.cos(th[i])
        m, inertia = sp.Float(p["mass"][i]), sp.Float(p["inertia"][i])
        T += m * (sp.diff(xc, t) ** 2 + sp.diff(yc, t) ** 2) / 2 + inertia * sp.diff(th[i], t) ** 2 / 2
        V += m * sp.Float(p["g"]) * yc
    L = T - V
    q_, qd_, qdd_ = sp.symbols(f"q0:{n}"), sp.symbols(f"qd0:{n}"), sp.symbols(f"qdd0:{n}")
    subs = {}
    for i in range(n):
        subs[sp.diff(qs[i], t, 2)] = qdd_[i]
    for i in range(n):
        subs[sp.diff(qs[i], t)] = qd_[i]
    for i in range(n):
        subs[qs[i]] = q_[i]
    taus = []
    for i in range(n):
        eq = sp.diff(sp.diff(L, sp.diff(qs[i], t)), t) - sp.diff(L, qs[i])
        taus.append(sp.expand(eq.subs(subs)))
    fn = sp.lambdify((q_, qd_, qdd_), taus, modules="numpy", cse=True)
    seconds = time.perf_counter() - t0

    def tau(q, qd, qdd):
        out = fn(tuple(q), tuple(qd), tuple(qdd))
        return np.stack([np.broadcast_to(o, q.shape[1:]) for o in out])

    return tau, seconds


# -------------------------------------------------------------------- MuJoCo


def _mjcf(model) -> str:
    p = _params(model)
    f = lambda *xs: " ".join(repr(float(x)) for x in xs)  # noqa: E731

    def body(i, ind):
        if model.parent[i] < 0:
            pos = (p["origin"][0], p["origin"][1], 0.0) if model.base == "fixed" else (0.0, 0.0, 0.0)
        else:
            pos = (p["attach"][i], 0.0, 0.0)
        out = [f'{ind}<body name="seg{i}" pos="{f(*pos)}">']
        if model.parent[i] < 0 and model.base == "floating":
            out += [f'{ind}  <joint name="base_x" type="slide" axis="1 0 0"/>',
                    f'{ind}  <joint name="base_y" type="slide" axis="0 1 0"/>']  # fmt: skip
        out.append(f'{ind}  <joint name="hinge{i}" type="hinge" axis="0 0 1"/>')
        I = p["inertia"][i]  # only izz matters in the plane; ixx = iyy = izz is valid
        out.append(f'{ind}  <inertial pos="{f(p["com"][i, 0], p["com"][i, 1], 0)}" mass="{f(p["mass"][i])}" diaginertia="{f(I, I, I)}"/>')
        for c in model.children[i]:
            out += body(c, ind + "  ")
        out.append(f"{ind}</body>")
        return out

    head = ['<mujoco model="bench">', f'  <option gravity="{f(0, -p["g"], 0)}">',
            '    <flag constraint="disable" contact="disable"/>', "  </option>", "  <worldbody>"]  # fmt: skip
    return "\n".join(head + body(0, "    ") + ["  </worldbody>", "</mujoco>"])


def _depth_first(model):
    order = []

    def visit(i):
        order.append(i)
        for c in model.children[i]:
            visit(c)

    visit(0)
    return order


class MujocoBaseline:
    """A MuJoCo twin of a jaxmb model (the models here number dofs depth-first, as
    MuJoCo does, which the constructor checks)."""

    def __init__(self, model):
        import mujoco

        if _depth_first(model) != list(range(model.segments)):
            raise ValueError("MujocoBaseline: segments must be numbered depth-first")
        self.mujoco = mujoco
        self.model = model
        self.mj = mujoco.MjModel.from_xml_string(_mjcf(model))
        self.data = mujoco.MjData(self.mj)
        assert self.mj.nv == model.dof

    def inverse(self, q, qd, qdd):
        """tau (B, dof) in relative angles, for (B, dof) relative-angle inputs."""
        mj, d, inv = self.mj, self.data, self.mujoco.mj_inverse
        out = np.empty_like(q)
        for b in range(q.shape[0]):
            d.qpos[:] = q[b]
            d.qvel[:] = qd[b]
            d.qacc[:] = qdd[b]
            inv(mj, d)
            out[b] = d.qfrc_inverse
        return out

    def forward(self, q, qd, tau):
        """qdd (B, dof) in relative angles, for (B, dof) relative-angle inputs."""
        mj, d, fwd = self.mj, self.data, self.mujoco.mj_forward
        out = np.empty_like(q)
        for b in range(q.shape[0]):
            d.qpos[:] = q[b]
            d.qvel[:] = qd[b]
            d.qfrc_applied[:] = tau[b]
            fwd(mj, d)
            out[b] = d.qacc
        return out


def optional(cls, *args, log=print, **kwargs):
    """``cls(*args, **kwargs)``, or None (logged) where its engine is not installed:
    a machine without Pinocchio (a GPU machine, say) still runs the benchmarks, the
    rows then without that baseline."""
    try:
        return cls(*args, **kwargs)
    except ImportError as e:
        log(f"  ({cls.__name__} skipped: {e})")
        return None


# ----------------------------------------------------------------- Pinocchio


class PinocchioBaseline:
    """A Pinocchio twin: revolute-Z joints, placed at (attach, 0, 0) in the parent's
    joint frame; a floating base is a prismatic-X then prismatic-Y joint at the
    origin carrying the root's revolute joint. Joints are added in segment order,
    so Pinocchio's q is jaxmb's (in relative angles)."""

    def __init__(self, model, threads: int = 2):
        import pinocchio as pin

        self.pin = pin
        self.model = model
        self.threads = threads
        p = _params(model)
        pm = pin.Model()
        joint_of = {}
        for i in range(model.segments):
            k = model.parent[i]
            if k < 0:
                parent_id = 0
                if model.base == "floating":
                    parent_id = pm.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "base_x")
                    parent_id = pm.addJoint(parent_id, pin.JointModelPY(), pin.SE3.Identity(), "base_y")
                    xyz = np.zeros(3)
                else:
                    xyz = np.array([p["origin"][0], p["origin"][1], 0.0])
            else:
                parent_id = joint_of[k]
                xyz = np.array([p["attach"][i], 0.0, 0.0])
            jid = pm.addJoint(parent_id, pin.JointModelRZ(), pin.SE3(np.eye(3), xyz), f"hinge{i}")
            I = p["inertia"][i]
            lever = np.array([p["com"][i, 0], p["com"][i, 1], 0.0])
            pm.appendBodyToJoint(jid, pin.Inertia(p["mass"][i], lever, np.diag([I, I, I])), pin.SE3.Identity())
            joint_of[i] = jid
        pm.gravity.linear = np.array([0.0, -p["g"], 0.0])
        assert pm.nq == pm.nv == model.dof
        self.pm = pm
        self.data = pm.createData()
        self.pool = pin.ModelPool(pm, threads)

    def inverse(self, q, qd, qdd):
        """pin.rnea in a Python loop: (B, dof) relative-angle inputs and output."""
        rnea, pm, d = self.pin.rnea, self.pm, self.data
        out = np.empty_like(q)
        for b in range(q.shape[0]):
            out[b] = rnea(pm, d, q[b], qd[b], qdd[b])
        return out

    def forward(self, q, qd, tau):
        aba, pm, d = self.pin.aba, self.pm, self.data
        out = np.empty_like(q)
        for b in range(q.shape[0]):
            out[b] = aba(pm, d, q[b], qd[b], tau[b])
        return out

    def inverse_parallel(self, q, qd, qdd, out):
        """pin.rneaInParallel: (dof, B) Fortran-ordered inputs (one column per sample)."""
        self.pin.rneaInParallel(self.threads, self.pool, q, qd, qdd, out)
        return out

    def forward_parallel(self, q, qd, tau, out):
        self.pin.abaInParallel(self.threads, self.pool, q, qd, tau, out)
        return out


# ---------------------------------------------------------------- MuJoCo MJX


class MjxBaseline:
    """MuJoCo MJX (``mujoco-mjx``, JAX) on the MuJoCo twin: ``mjx.inverse`` and
    ``mjx.forward`` under ``jax.jit(jax.vmap(...))`` over (B, dof) relative-angle
    inputs. Raises ImportError where ``mujoco.mjx`` is not installed."""

    def __init__(self, mujoco_baseline: MujocoBaseline):
        import jax
        from mujoco import mjx

        self.mjx = mjx
        self.m = mjx.put_model(mujoco_baseline.mj)
        d0 = mjx.make_data(self.m)
        m = self.m

        def inv(q, qd, qdd):
            return mjx.inverse(m, d0.replace(qpos=q, qvel=qd, qacc=qdd)).qfrc_inverse

        def fwd(q, qd, tau):
            return mjx.forward(m, d0.replace(qpos=q, qvel=qd, qfrc_applied=tau)).qacc

        self.inverse_fn = jax.jit(jax.vmap(inv))
        self.forward_fn = jax.jit(jax.vmap(fwd))


def mujoco_rollout_model(model, dt: float):
    """The MuJoCo twin of ``model`` set up for ``mujoco.rollout``: RK4 integrator,
    time step ``dt``, no damping, contacts or constraints (as the twin), and one motor
    per coordinate (gear 1, unlimited) so that the controls are the generalized forces
    in relative angles."""
    import mujoco

    xml = _mjcf(model)
    names = [f"hinge{i}" for i in range(model.segments)]
    if model.base == "floating":
        names = ["base_x", "base_y"] + names
    motors = "\n".join(f'    <motor joint="{j}" gear="1"/>' for j in names)
    xml = xml.replace("</mujoco>", f"  <actuator>\n{motors}\n  </actuator>\n</mujoco>")
    mj = mujoco.MjModel.from_xml_string(xml)
    mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    mj.opt.timestep = dt
    return mj
