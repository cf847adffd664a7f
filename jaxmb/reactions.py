"""Joint reaction forces: merged into :mod:`jaxmb.dynamics` (this module forwards
:func:`joint_reactions` there and stays importable for one release)."""

from .dynamics import joint_reactions

__all__ = ["joint_reactions"]
