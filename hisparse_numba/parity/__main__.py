"""``python -m hisparse_numba.parity``: the same as ``hisparse-numba parity``."""

import argparse
import sys

from . import add_arguments, run

parser = argparse.ArgumentParser(prog="hisparse-numba parity",
                                 description="compare this project's kernels with sglang's own")
add_arguments(parser)
sys.exit(run(parser.parse_args()))
