"""Whole-body residuals and segment parameters fitted to the force plates.

The force plates measure the ground reaction force under the feet; the motion
gives every segment's acceleration. Newton-Euler of the whole (floating-base)
body says that the plates' force and moment equal the rate of change of the
body's momentum less gravity; what is left over, the **residual** force and
moment at the root, measures how wrong the segment parameters and the motion
are (OpenSim reports it with every inverse dynamics). This subpackage computes
the residuals, batched over frames and trials, and fits the segment parameters
that make them small (linear in the parameters: one exact least squares).

Example:
    >>> from jaxmb import wholebody
    >>> r = wholebody.residuals(model, q, qd, qdd, loads)      # doctest: +SKIP
    >>> wholebody.summarize(r, body_mass=61.2).rms              # doctest: +SKIP
    >>> fit = wholebody.fit_to_plates(model, q, qd, qdd, loads, prior=prior,
    ...                               sigma=(12.0, 12.0, 4.0))  # doctest: +SKIP
    >>> fits = wholebody.fit_subjects(models, q, qd, qdd, loads, priors=priors,
    ...                               sigma=(12.0, 12.0, 4.0))  # doctest: +SKIP
"""

from ._batch import SubjectFits, fit_subjects, stack_models
from ._fit import PlateFit, about_com, barycentric_prior, fit_to_plates, prior_around, root_regressor
from ._moments import WholeBodyMoments, residual_bands, whole_body_moments
from ._lab import ARM_MARKERS, WholeBodyTrial, whole_body_trial
from ._residuals import ResidualSummary, residuals, summarize

__all__ = [
    "residuals",
    "summarize",
    "ResidualSummary",
    "root_regressor",
    "about_com",
    "barycentric_prior",
    "fit_to_plates",
    "PlateFit",
    "fit_subjects",
    "SubjectFits",
    "stack_models",
    "prior_around",
    "whole_body_moments",
    "WholeBodyMoments",
    "residual_bands",
    "whole_body_trial",
    "WholeBodyTrial",
    "ARM_MARKERS",
]
