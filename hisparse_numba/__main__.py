"""``python -m hisparse_numba``: the same as the ``hisparse-numba`` command."""
import sys

from .cli import main

sys.exit(main())
