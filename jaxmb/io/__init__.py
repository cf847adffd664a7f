"""Readers and writers for motion-capture files, as plain NumPy arrays in SI units.

Every reader returns lengths in metres, forces in newtons and moments in newton metres,
whatever units the file uses, and raises ``ValueError`` naming the file and the line
(or the header field) when a file is malformed: a row with too few or too many fields,
a value that is not a number, or a row count that disagrees with the header. Nothing is
silently truncated. Text files are read as UTF-8, or as Latin-1 with a warning when
they are not UTF-8. Gaps in marker data (empty fields, or invalid C3D points) become
NaN and are reported with a warning and by :meth:`Markers.gaps`.

Formats:

- TRC (OpenSim / Motion Analysis marker trajectories): :func:`read_trc`,
  :func:`write_trc`.
- Motion Analysis Cortex ``.forces`` (force-plate force, centre of pressure and free
  moment per plate): :func:`read_forces`, :func:`write_forces`.
- OpenSim ``.mot`` / ``.sto`` tables: :func:`read_mot`, :func:`read_sto`,
  :func:`write_mot`.
- C3D, through the optional ``ezc3d`` package (``pip install "jaxmb[c3d]"``):
  :func:`read_c3d`.

The results are NumPy arrays, not JAX arrays: convert with ``jnp.asarray`` where a
jitted computation needs them. Writers are atomic: they write a temporary file in the
target directory and rename it over the target, so a failed write leaves no partial
file (and its error names the target); they replace regular files only, and a
read-only one only with ``overwrite=True``. They write every number so that it reads back
as the same float64 in the file's units (``decimals=`` gives fixed-point instead; a
value in SI units written in mm, as TRC files and a ``.forces`` file's centre of
pressure are, is divided by 1e-3 and multiplied back when read, which may change its
last bit), and refuse, before writing anything, data that
their reader would reject or read differently.
"""

from ._c3d import read_c3d
from ._forces import read_forces
from ._markers import C3DTrial, ForcePlates, Markers, Table
from ._mot import read_mot, read_sto
from ._trc import read_trc
from ._write import write_forces, write_mot, write_trc

__all__ = [
    "Markers",
    "ForcePlates",
    "Table",
    "C3DTrial",
    "read_trc",
    "write_trc",
    "read_forces",
    "write_forces",
    "read_mot",
    "read_sto",
    "write_mot",
    "read_c3d",
]
