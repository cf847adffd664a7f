"""Signal processing for measured movement data: filtering, cut-off selection, derivatives.

The NumPy/SciPy functions run eagerly, as the data preparation before the JAX
dynamics (:mod:`jaxmb.gait`); they work along one axis of arrays of any shape, so a
batch of trials ``(trials, T, channels)`` is filtered in one call.

- :func:`lowpass`: zero-phase Butterworth filter (``scipy.signal`` design, the
  ``filtfilt`` result), optionally with Winter's correction of the cut-off.
- :func:`residual_analysis`: Winter's residual method, choosing the cut-off where the
  residual of the filtered signal reaches the noise level.
- :func:`derivative`: finite-difference derivatives with second-order accurate end
  points (a polynomial of the derivative's degree is differentiated exactly at every
  sample, the first and last included).

Their JAX counterparts (jit- and vmap-able, the design done eagerly from static
arguments), which :func:`jaxmb.gait.analyze` runs inside its compiled computation:
``lowpass_jax``, ``sosfiltfilt_jax``, ``derivative_jax``, and for a padded batch of
trials of unequal lengths in one shape ``ragged_design``, ``ragged_sosfiltfilt``,
``ragged_derivative``.

Reference: D. A. Winter, *Biomechanics and Motor Control of Human Movement*, 4th ed.
(2009), sections 3.4 (digital filtering, the cut-off correction for multiple passes)
and 3.4.4 (residual analysis).
"""

from ._design import lowpass_design, settling_samples, warn_unsettled, winter_correction
from ._jax import derivative_jax, lowpass_jax, sosfiltfilt_jax
from ._numpy import derivative, lowpass
from ._ragged import ragged_derivative, ragged_design, ragged_sosfiltfilt
from ._residual import ResidualAnalysis, residual_analysis

__all__ = ["lowpass", "residual_analysis", "ResidualAnalysis", "derivative", "winter_correction", "settling_samples"]
