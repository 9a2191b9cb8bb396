"""Fixtures of the HiSparse tests."""

import pytest

from hisparse_numba.hisparse.speculative.versions import VERSIONS


@pytest.fixture(params=sorted(VERSIONS), ids=lambda v: f"v{v}")
def spec_version(request):
    """Each rung of the speculative swap-in (``speculative.versions.VERSIONS``) in turn."""
    return request.param
