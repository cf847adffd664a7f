"""Tests run in float64: switched on here, never on import of jaxmb."""

import jax

jax.config.update("jax_enable_x64", True)
