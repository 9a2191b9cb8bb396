"""A hub's GPU servers start warm: the GPU profile compiles the lessons' kernels in the
background into a kernel cache shared by the node's servers; every server runs the lessons' rung."""

import shlex
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

HUB = Path(__file__).resolve().parents[1] / "deploy" / "hub"
CACHE_ROOT = "/var/cache/hisparse-numba"


def values() -> dict:
    return yaml.safe_load((HUB / "values.yaml").read_text())


def gpu_override() -> dict:
    return next(p for p in values()["singleuser"]["profileList"] if p["slug"] == "gpu")["kubespawner_override"]


def test_every_server_runs_the_lessons_rung():
    from hisparse_numba.version_default import LESSON_VERSION, VERSION_ENV

    assert values()["singleuser"]["extraEnv"][VERSION_ENV] == str(LESSON_VERSION)
    assert f"{VERSION_ENV}={LESSON_VERSION}" in (HUB / "Dockerfile").read_text()


def test_the_kernel_cache_is_a_node_volume_the_notebook_user_owns():
    single = values()["singleuser"]
    volume = next(v for v in single["storage"]["extraVolumes"] if v["name"] == "hisparse-kernel-cache")
    assert volume["hostPath"]["path"] == CACHE_ROOT
    assert {"name": "hisparse-kernel-cache", "mountPath": CACHE_ROOT} in single["storage"]["extraVolumeMounts"]
    init = next(c for c in single["initContainers"] if c["name"] == "kernel-cache-owner")
    assert "chown -R 1000:100 " + CACHE_ROOT in init["command"][-1]
    assert gpu_override()["environment"]["NUMBA_CACHE_DIR"].startswith(CACHE_ROOT + "/")


def test_the_gpu_profile_warms_up_in_the_background_after_the_lesson_copy():
    override = gpu_override()
    script = override["lifecycle_hooks"]["postStart"]["exec"]["command"][-1]
    copy = values()["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"][-1]
    assert copy in script                                 # the lesson copy of every profile, first
    words = shlex.split(script.split(";", 2)[-1])
    assert words[:3] == ["nohup", "flock", "-n"] and words[-1] == "&"   # one warmup per node at a time
    warm = words[words.index("hisparse-numba"):]
    assert warm[:3] == ["hisparse-numba", "warmup", "--lessons"]
    jobs = int(warm[warm.index("--jobs") + 1])
    assert jobs <= override["cpu_limit"]                  # os.cpu_count() sees the node, not the limit


def test_the_simulator_profile_compiles_nothing():
    sim = next(p for p in values()["singleuser"]["profileList"] if p["slug"] == "simulator")
    assert "lifecycle_hooks" not in sim["kubespawner_override"]
