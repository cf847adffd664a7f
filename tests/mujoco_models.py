"""MuJoCo twins of jaxmb models: an independent reference for the dynamics tests.

:func:`to_mjcf` writes the MJCF of the same planar tree: bodies in the x-y plane,
hinges about +z, gravity (0, -g, 0), one ``<inertial>`` per body (mass, centre of
mass, inertia about it) and nothing else (no geoms, contacts, damping, armature or
limits). :class:`MujocoTwin` evaluates MuJoCo's mass matrix, bias, inverse and
forward dynamics and expresses them in the jaxmb model's coordinates, so that a
test compares numbers directly.

Frame conventions (checked by the tests, which compare positions too):

- Body ``seg{i}`` has its frame at segment i's proximal joint P_i; its local x axis
  is the segment axis and local y the "across" direction, so the centre of mass
  ``com_i = (along, across)`` is the body's ``inertial pos``.
- At zero joint angle a body has its parent's orientation (the root: the world's),
  so the segment lies along +x of its parent. A child is placed at
  ``pos = (attach_i, 0, 0)`` in its parent's frame, i.e. on the parent's axis.
- Fixed base: the root body sits at ``origin`` with one hinge. Floating base: the
  root body sits at (0, 0, 0) with slide joints along world x then y and then the
  hinge; slides that come before the hinge in the same body translate along the
  parent's (world) axes, so qpos = (x, y, theta_0) of P_0 as in jaxmb.

MuJoCo's hinge angles are relative (theta_i = theta_parent + q_i). For a jaxmb model
with ``coordinates="absolute"`` the angles are theta = A q_rel with A the ancestor
matrix (base translations unchanged; T = blockdiag(I, A) on the whole q). The map
is linear and constant, so qd and qdd map the same way, power invariance gives the
forces Q_abs = T^{-T} Q_rel, and the mass matrix M_abs = T^{-T} M_rel T^{-1}.

MuJoCo numbers its bodies and dofs depth-first in the MJCF tree, which differs from
jaxmb's index order for trees such as parent = (-1, 0, 0, 1): every exchange goes
through ``perm`` (the MuJoCo dof of each jaxmb coordinate), looked up by name.
"""

from __future__ import annotations

import mujoco
import numpy as np

import jaxmb

__all__ = ["to_mjcf", "angle_map", "MujocoTwin"]


def _f(x) -> str:
    """A float written so that MuJoCo parses back the same double."""
    return repr(float(x))


def _vec(*xs) -> str:
    return " ".join(_f(x) for x in xs)


def to_mjcf(model: jaxmb.Model) -> str:
    """MJCF text of the planar tree ``model``.

    Args:
      model: a jaxmb model (any base, any coordinates; MuJoCo's are relative).

    Returns:
      An MJCF string: body ``seg{i}`` with hinge ``hinge{i}`` for segment i, and for
      a floating base slide joints ``base_x``, ``base_y`` on the root body.
    """
    com = np.asarray(model.com, float)
    mass = np.asarray(model.mass, float)
    inertia = np.asarray(model.inertia, float)
    attach = np.asarray(model.joint_attach, float)
    origin = np.asarray(model.origin, float)
    g = float(model.gravity)
    children = model.children

    def body(i: int, indent: str) -> list:
        if model.parent[i] < 0:
            pos = (origin[0], origin[1], 0.0) if model.base == "fixed" else (0.0, 0.0, 0.0)
        else:
            pos = (attach[i], 0.0, 0.0)  # on the parent's axis
        lines = [f'{indent}<body name="seg{i}" pos="{_vec(*pos)}">']
        inner = indent + "  "
        if model.parent[i] < 0 and model.base == "floating":
            lines.append(f'{inner}<joint name="base_x" type="slide" axis="1 0 0"/>')
            lines.append(f'{inner}<joint name="base_y" type="slide" axis="0 1 0"/>')
        lines.append(f'{inner}<joint name="hinge{i}" type="hinge" axis="0 0 1" pos="0 0 0"/>')
        # Only izz enters planar dynamics (every angular velocity is along z); ixx = iyy
        # = izz keeps MuJoCo's triangle inequality (ixx + iyy >= izz) satisfied.
        I = inertia[i]
        lines.append(
            f'{inner}<inertial pos="{_vec(com[i, 0], com[i, 1], 0.0)}" mass="{_f(mass[i])}" '
            f'diaginertia="{_vec(I, I, I)}"/>'
        )
        for k in children[i]:
            lines += body(k, inner)
        lines.append(f"{indent}</body>")
        return lines

    head = [
        '<mujoco model="jaxmb_twin">',
        # no contacts, no constraints: mj_forward's qacc is M^{-1} (qfrc_applied +
        # J^T xfrc_applied - qfrc_bias) and mj_inverse has no constraint forces.
        f'  <option gravity="{_vec(0.0, -g, 0.0)}" timestep="0.001">',
        '    <flag constraint="disable" contact="disable"/>',
        "  </option>",
        "  <worldbody>",
    ]
    return "\n".join(head + body(0, "    ") + ["  </worldbody>", "</mujoco>"])


def angle_map(model: jaxmb.Model) -> np.ndarray:
    """T (dof, dof) with q_model = T q_relative: the identity for relative coordinates.

    For absolute coordinates T = blockdiag(I_nbase, A), A[i, k] = 1 where k is i or
    one of its ancestors (theta_i = sum of the relative angles down to i). Built here
    from the parent list, independently of jaxmb's own conversion.
    """
    nb, n = model.nbase, model.segments
    T = np.eye(nb + n)
    if model.coordinates == "absolute":
        for i in range(n):
            k = model.parent[i]
            while k >= 0:
                T[nb + i, nb + k] = 1.0
                k = model.parent[k]
    return T


class MujocoTwin:
    """MuJoCo's dynamics of a jaxmb model, in the jaxmb model's coordinates.

    Attributes:
      model: the jaxmb model.
      mj, data: the compiled ``mujoco.MjModel`` and its ``MjData``.
      perm: (dof,) int, the MuJoCo dof (= qpos index, all joints being scalar) of
        each jaxmb coordinate.
      body: (segments,) int, the MuJoCo body id of each segment.
      T: (dof, dof) from :func:`angle_map`.
    """

    def __init__(self, model: jaxmb.Model):
        self.model = model
        self.xml = to_mjcf(model)
        self.mj = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.mj)
        names = (["base_x", "base_y"] if model.base == "floating" else []) + [
            f"hinge{i}" for i in range(model.segments)
        ]
        jid = [mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_JOINT, nm) for nm in names]
        self.perm = np.array([self.mj.jnt_dofadr[j] for j in jid])
        assert np.array_equal(self.perm, [self.mj.jnt_qposadr[j] for j in jid])
        assert self.mj.nv == self.mj.nq == model.dof
        self.body = np.array(
            [mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_BODY, f"seg{i}") for i in range(model.segments)]
        )
        self.T = angle_map(model)
        self.Tinv = np.linalg.inv(self.T)
        self._rel = model.replace(coordinates="relative")

    # ------------------------------------------------------------ conversions
    def _to_mj(self, x) -> np.ndarray:
        """A q, qd or qdd of the jaxmb model as MuJoCo's (relative, MuJoCo order)."""
        xr = np.asarray(jaxmb.coordinates_to(self.model, np.asarray(x, float), "relative"))
        out = np.empty(self.model.dof)
        out[self.perm] = xr
        return out

    def _motion_from_mj(self, x) -> np.ndarray:
        """MuJoCo's qacc (relative, MuJoCo order) in the jaxmb model's coordinates."""
        xr = np.asarray(x, float)[self.perm]
        return np.asarray(jaxmb.coordinates_to(self._rel, xr, self.model.coordinates))

    def _force_to_mj(self, Q) -> np.ndarray:
        """Generalized forces of the jaxmb model as MuJoCo's: Q_rel = T^T Q_model."""
        Qr = np.asarray(jaxmb.forces_to(self.model, np.asarray(Q, float), "relative"))
        out = np.empty(self.model.dof)
        out[self.perm] = Qr
        return out

    def _force_from_mj(self, Q) -> np.ndarray:
        """MuJoCo generalized forces in the jaxmb model's coordinates: T^{-T} Q_rel."""
        Qr = np.asarray(Q, float)[self.perm]
        return np.asarray(jaxmb.forces_to(self._rel, Qr, self.model.coordinates))

    def _set_state(self, q, qd=None, qdd=None, loads=None, tau=None):
        d = self.data
        mujoco.mj_resetData(self.mj, d)
        d.qpos[:] = self._to_mj(q)
        d.qvel[:] = 0.0 if qd is None else self._to_mj(qd)
        if qdd is not None:
            d.qacc[:] = self._to_mj(qdd)
        if tau is not None:
            d.qfrc_applied[:] = self._force_to_mj(tau)
        if loads is not None:
            # xfrc_applied rows: (force xyz, torque xyz), world frame, at the body's
            # centre of mass, the same point as a jaxmb load (Fx, Fy, Mz).
            loads = np.asarray(loads, float)
            d.xfrc_applied[self.body, 0:2] = loads[:, 0:2]
            d.xfrc_applied[self.body, 5] = loads[:, 2]

    # ------------------------------------------------------------- quantities
    def com_positions(self, q) -> np.ndarray:
        """(segments, 2) world centres of mass after mj_kinematics, m."""
        self._set_state(q)
        mujoco.mj_kinematics(self.mj, self.data)
        return self.data.xipos[self.body, :2].copy()

    def segment_angles(self, q) -> np.ndarray:
        """(segments,) absolute angles of the body x axes, rad (in (-pi, pi])."""
        self._set_state(q)
        mujoco.mj_kinematics(self.mj, self.data)
        R = self.data.xmat[self.body].reshape(-1, 3, 3)
        return np.arctan2(R[:, 1, 0], R[:, 0, 0])

    def mass_matrix(self, q) -> np.ndarray:
        """M (dof, dof) = T^{-T} M_rel T^{-1}, from mj_fullM after mj_forward."""
        self._set_state(q)
        mujoco.mj_forward(self.mj, self.data)
        nv = self.mj.nv
        Mmj = np.zeros((nv, nv))
        mujoco.mj_fullM(self.mj, self.data, Mmj)
        Mrel = Mmj[np.ix_(self.perm, self.perm)]
        return self.Tinv.T @ Mrel @ self.Tinv

    def bias(self, q, qd) -> np.ndarray:
        """C + G (dof,): MuJoCo's qfrc_bias (Coriolis, centripetal and gravity)."""
        self._set_state(q, qd)
        mujoco.mj_forward(self.mj, self.data)
        return self._force_from_mj(self.data.qfrc_bias)

    def external(self, q, loads) -> np.ndarray:
        """E = -J^T F (dof,), with J^T F from mj_applyFT at each body's centre of mass."""
        self._set_state(q)
        mujoco.mj_forward(self.mj, self.data)
        return -self._force_from_mj(self._jt_loads(loads))

    def _jt_loads(self, loads) -> np.ndarray:
        """J^T F in MuJoCo's dof order for loads at the current state."""
        d = self.data
        out = np.zeros(self.mj.nv)
        loads = np.asarray(loads, float)
        for i, b in enumerate(self.body):
            force = np.array([loads[i, 0], loads[i, 1], 0.0])
            torque = np.array([0.0, 0.0, loads[i, 2]])
            mujoco.mj_applyFT(self.mj, d, force, torque, d.xipos[b].copy(), int(b), out)
        return out

    def inverse(self, q, qd, qdd, loads=None) -> np.ndarray:
        """tau (dof,) such that M qdd + C + G + E = tau, from mj_inverse.

        MuJoCo's qfrc_inverse is the *net* external generalized force,
        qfrc_applied + J^T xfrc_applied + qfrc_actuator (mjdata.h), so the
        actuation that jaxmb returns is tau = qfrc_inverse - J^T F: the loads
        subtract. xfrc_applied is set too, which mj_inverse must ignore.
        """
        self._set_state(q, qd, qdd, loads)
        mujoco.mj_inverse(self.mj, self.data)
        Q = self.data.qfrc_inverse.copy()
        if loads is not None:
            Q -= self._jt_loads(loads)
        return self._force_from_mj(Q)

    def forward(self, q, qd, tau, loads=None) -> np.ndarray:
        """qdd (dof,) from mj_forward with qfrc_applied = tau, xfrc_applied = loads."""
        self._set_state(q, qd, loads=loads, tau=tau)
        mujoco.mj_forward(self.mj, self.data)
        return self._motion_from_mj(self.data.qacc)
