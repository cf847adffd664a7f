"""jaxmb: dynamics of planar multibody models of the human body, in JAX.

Core functions take one sample or any leading batch shape, run compiled batched
kernels, and are pure: compose ``jax.jit``, ``jax.vmap`` and ``jax.grad`` freely. Importing jaxmb changes no global JAX setting: switch float64 on
in your own program if you want it (``jax.config.update("jax_enable_x64", True)``; docs: Batches, gradients and devices).
"""

from .dynamics import (
    applied_wrenches,
    bias_forces,
    coriolis_matrix,
    external_forces,
    forward_dynamics,
    gravity_forces,
    inverse_dynamics,
    joint_loads,
    joint_moments,
    joint_reactions,
    kinetic_energy,
    mass_matrix,
    point_load,
    potential_energy,
    rnea,
    rnea_full,
    torque_components,
    total_energy,
)
from .kinematics import (
    com_positions,
    constraint_jacobian,
    coordinates_to,
    distal_positions,
    forces_to,
    joint_positions,
    point_acceleration,
    point_jacobian,
    point_position,
    point_velocity,
    pose,
    pose_acceleration,
    pose_jacobian,
    pose_velocity,
    segment_angles,
    whole_body_com,
)
from . import anthropometry
from .anthropometry import (
    SEVEN_SEGMENT_NAMES,
    SEVEN_SEGMENT_POINTING,
    SegmentParameters,
    from_vertical,
    segment_parameters,
    seven_segment_human,
    three_segment_leg,
    to_vertical,
    two_link_arm,
)
from .model import Model, chain, tree
from .sharding import batch_mesh, sharded
from .simulate import Trajectory, simulate
from . import maximal
from . import identify
from . import optimal
from . import datasets, gait, io, plot, signal  # NumPy-only at import: no plotting backend, no JAX compile
from . import reaching, wholebody
from .optimal import IKResult, Movement, OptimalMovement, hand_position, inverse_kinematics, optimize, workspace

__version__ = "0.1.0"

__all__ = [
    "Model",
    "chain",
    "tree",
    # kinematics
    "pose",
    "segment_angles",
    "joint_positions",
    "distal_positions",
    "com_positions",
    "whole_body_com",
    "point_position",
    "point_velocity",
    "point_acceleration",
    "point_jacobian",
    "pose_jacobian",
    "constraint_jacobian",
    "pose_velocity",
    "pose_acceleration",
    "coordinates_to",
    "forces_to",
    # dynamics
    "mass_matrix",
    "bias_forces",
    "gravity_forces",
    "external_forces",
    "applied_wrenches",
    "inverse_dynamics",
    "forward_dynamics",
    "joint_moments",
    "joint_reactions",
    "joint_loads",
    "coriolis_matrix",
    "kinetic_energy",
    "potential_energy",
    "total_energy",
    "torque_components",
    "point_load",
    "rnea",
    "rnea_full",
    # anthropometry and ready-made models
    "anthropometry",
    "SegmentParameters",
    "segment_parameters",
    "two_link_arm",
    "three_segment_leg",
    "seven_segment_human",
    "SEVEN_SEGMENT_NAMES",
    "SEVEN_SEGMENT_POINTING",
    "from_vertical",
    "to_vertical",
    # devices
    "sharded",
    "batch_mesh",
    # simulation
    "simulate",
    "Trajectory",
    # maximal coordinates with Lagrange multipliers (a reference formulation)
    "maximal",
    # gait analysis from lab files, file readers, filters and derivatives, figures
    "gait",
    "datasets",
    # whole-body residuals and segment parameters fitted to the force plates
    "wholebody",
    # the minimum-jerk reach and its torque terms
    "reaching",
    "io",
    "signal",
    "plot",
    # segment parameters from measured forces
    "identify",
    # planned and optimal movements
    "optimal",
    "optimize",
    "OptimalMovement",
    "Movement",
    "inverse_kinematics",
    "IKResult",
    "hand_position",
    "workspace",
]
