"""``HISPARSE_NUMBA_VERSION`` (``version_default.py``): the rung ``version=None`` runs in
every kernel ladder, the lessons' default (version 1) in their kernels."""

import json

import pytest

from hisparse_numba.hisparse.single_step import versions as single_step_versions
from hisparse_numba.hisparse.speculative import versions as spec_versions
from hisparse_numba.version_default import LESSON_VERSION, VERSION_ENV

FAMILIES = (single_step_versions, spec_versions)


@pytest.mark.parametrize("versions", FAMILIES, ids=("single_step", "speculative"))
def test_unset_or_tuned_is_the_tuned_rung(monkeypatch, versions):
    monkeypatch.delenv(VERSION_ENV, raising=False)
    assert versions.check_version(None) == versions.DEFAULT
    monkeypatch.setenv(VERSION_ENV, "tuned")
    assert versions.check_version(None) == versions.DEFAULT


@pytest.mark.parametrize("versions", FAMILIES, ids=("single_step", "speculative"))
def test_a_number_sets_the_default_and_an_explicit_version_wins(monkeypatch, versions):
    monkeypatch.setenv(VERSION_ENV, "1")
    assert versions.check_version(None) == 1 == LESSON_VERSION
    assert versions.check_version(versions.DEFAULT) == versions.DEFAULT


@pytest.mark.parametrize("value", ["7", "fast", "-1"])
def test_a_value_no_family_has_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(VERSION_ENV, value)
    with pytest.raises(ValueError, match=VERSION_ENV):
        spec_versions.check_version(None)


def test_a_rung_one_family_lacks_is_refused_there_only(monkeypatch):
    monkeypatch.setenv(VERSION_ENV, "3")
    assert spec_versions.check_version(None) == 3
    with pytest.raises(ValueError, match=rf"{VERSION_ENV} must be 'tuned' or one of \[1, 2\], got '3'"):
        single_step_versions.check_version(None)


def test_lesson_kernels_run_version_one_unless_told_otherwise(monkeypatch):
    from hisparse_numba.lessons import runner

    monkeypatch.delenv(VERSION_ENV, raising=False)
    assert runner.lesson_kernel_env() == {VERSION_ENV: "1"}
    monkeypatch.setenv(VERSION_ENV, "tuned")
    assert runner.lesson_kernel_env() == {VERSION_ENV: "tuned"}
    runner._kernel_dir.cache_clear()
    try:
        spec = json.loads((__import__("pathlib").Path(runner._kernel_dir()) / "kernels" / "python3"
                           / "kernel.json").read_text())
    finally:
        runner._kernel_dir.cache_clear()
    assert spec["env"] == {VERSION_ENV: "tuned"}
