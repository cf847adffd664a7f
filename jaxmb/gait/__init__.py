"""Sagittal-plane gait analysis: joint angles, moments, powers and reactions of the leg.

The pipeline of the gait notebook (Duarte, "Gait analysis 2D") on jaxmb's core, for
one trial or a batch of trials in one call:

1. data preparation, NumPy/SciPy (:mod:`jaxmb.signal`): the joint centres and the
   ground reaction force are low-pass filtered at the *same* cut-off (see
   :func:`analyze`), the force is resampled to the kinematics, the segment angles
   are computed from the joint centres and differentiated (:func:`jaxmb.signal.derivative`);
2. one jitted JAX computation: the leg is a floating-base chain (thigh, shank, foot;
   base at the hip, absolute segment angles, :func:`jaxmb.tree`), the ground reaction
   force acts at the centre of pressure on the foot (:func:`jaxmb.point_load`), and
   :func:`jaxmb.joint_moments` and :func:`jaxmb.joint_reactions` give the hip, knee
   and ankle loads (``jax.vmap`` over time and over trials).

Entry points: :func:`analyze` (2-D arrays: joint centres, force, centre of pressure),
:func:`running_data` (the bundled van den Bogert running trial, with its true joint
loads), :func:`rms_errors`, :func:`term_effects` and :func:`term_effects_figure` (the
notebook's quasi-static comparison), :func:`moments_figure`. 3-D marker and
force-plate data (C3D, TRC) reach :func:`analyze` through a sagittal-plane front end,
:func:`sagittal`. :class:`Filter` holds the low-pass filter's settings as one value.

Inside (private modules, one job each): ``_analyze`` (the stages of :func:`analyze`),
``_inputs`` and ``_cutoffs`` (its checks and cut-offs), ``_pipeline`` (the compiled
computation), ``_dynamics`` (the leg's inverse dynamics in it), ``_steps`` (the
stepped runner and ``out=``), ``_result``, ``_sagittal`` with ``_markers`` and
``_contacts``, ``_terms`` and ``_figures``.
"""

from ..datasets import SEGMENTS, RunningData, running_data
from ._analyze import analyze
from ._cutoffs import Filter
from ._figures import CONVENTION_TEXT, MOMENT_POSITIVE, moments_figure, term_effects_figure
from ._markers import DEFAULT_MAPPING, MAPPING_HINT, check_mapping_entry
from ._result import JOINTS, OUTPUTS, TERMS, GaitResult
from ._sagittal import SagittalTrial, sagittal
from ._steps import release_memory
from ._terms import rms_errors, term_effects

__all__ = [
    "analyze",
    "release_memory",
    "Filter",
    "GaitResult",
    "running_data",
    "RunningData",
    "rms_errors",
    "term_effects",
    "term_effects_figure",
    "moments_figure",
    "sagittal",
    "SagittalTrial",
    "DEFAULT_MAPPING",
    "JOINTS",
    "SEGMENTS",
    "TERMS",
    "OUTPUTS",
]
