"""``python -m jaxmb``: the command line, the same as the ``jaxmb`` command (for an
environment whose scripts folder is not on the PATH)."""

import sys

from .cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
