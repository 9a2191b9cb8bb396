"""The kernel ladder benchmark (``bench swap-in --versions``, ``bench spec --versions``): the
equality check of every rung at small sizes (``--check-only``, both worlds), the table's
arithmetic, a rung that differs is not timed, and the generated markdown section."""

import importlib
import io
import sys
import types

import pytest

from hisparse_numba import cli
from hisparse_numba.bench import ladder
from hisparse_numba.hisparse.single_step import versions as single_versions
from .conftest import ON_GPU


def test_check_only_finds_every_single_step_rung_equal_to_the_reference(capsys):
    assert cli.main(["bench", "swap-in", "--check-only"]) == 0
    out = capsys.readouterr().out
    for number, v in single_versions.VERSIONS.items():
        assert f"swap-in rung {number} ({v.name}): equals the reference" in out


@pytest.fixture
def speculative_ladder(monkeypatch):
    """The speculative registry; where this tree has none yet, a stand-in with the same API whose
    rungs all launch the tuned kernel (the ladder's code is what is under test)."""
    try:
        return importlib.import_module(ladder.SPEC.registry)
    except ModuleNotFoundError:
        pass
    from hisparse_numba.hisparse.speculative import launch

    fake = types.ModuleType(ladder.SPEC.registry)
    fake.Version = single_versions.Version
    fake.VERSIONS = {1: fake.Version(1, "v1_plain", "stand-in"), 3: fake.Version(3, "v3_tuned", "stand-in")}
    fake.DEFAULT = 3
    monkeypatch.setitem(sys.modules, ladder.SPEC.registry, fake)
    public = launch.load_cache_to_device_buffer_spec_mla
    monkeypatch.setattr(launch, "load_cache_to_device_buffer_spec_mla",
                        lambda version=None, **kw: public(**kw))
    return fake


def test_check_only_finds_every_speculative_rung_equal_to_the_reference(speculative_ladder):
    out = io.StringIO()
    assert ladder.check_rungs(ladder.SPEC, out) == 0
    for number, v in speculative_ladder.VERSIONS.items():
        assert f"spec rung {number} ({v.name}): equals the reference" in out.getvalue()


def fake_family(times, wrong=()):
    """A family whose rungs 'run' in ``times[number][batch]`` microseconds; rungs in ``wrong``
    differ from the reference."""
    registry = types.ModuleType("fake_ladder_registry")
    registry.VERSIONS = {n: single_versions.Version(n, f"v{n}_x", "x") for n in times}

    class Bench:
        def __init__(self, batch, iters):
            self.batch, self.miss_bytes = batch, 1000 * batch

        def check(self, version):
            return ["lru_slots"] if version in wrong else []

        def time_us(self, version, graph, iters):
            assert graph == (self.batch == 1)
            return times[version][self.batch]

    sys.modules["fake_ladder_registry"] = registry
    return ladder.Family("fake", "A fake ladder", "fake_ladder_registry",
                         lambda n: ["top_k_device_locs (call 1)"] if n in wrong else [], Bench)


def test_the_table_gives_rates_floor_shares_and_speed_ups_per_batch():
    family = fake_family({1: {1: 10.0, 8: 40.0}, 2: {1: 5.0, 8: 10.0}})
    rows = ladder.measure(family, batches=(1, 8), floor_gbps=50.0, out=io.StringIO())
    assert [(r["rung"], r["batch"], r["timing"], r["speedup"]) for r in rows] == [
        ("1 v1_x", 1, "graph", "-"), ("1 v1_x", 8, "events", "-"),
        ("2 v2_x", 1, "graph", "2.00x"), ("2 v2_x", 8, "events", "4.00x")]
    assert rows[0]["GBps"] == pytest.approx(1000 / 10e-6 / 1e9)          # 0.1 GB/s
    assert rows[3]["of_floor"] == f"{8000 / 10e-6 / 1e9 / 50:.0%}"


def test_a_rung_that_differs_from_the_reference_is_not_timed():
    family = fake_family({1: {1: 10.0}, 2: {1: 5.0}, 3: {1: 4.0}}, wrong={2})
    out = io.StringIO()
    rows = ladder.measure(family, batches=(1,), floor_gbps=50.0, out=out)
    assert [r["rung"] for r in rows] == ["1 v1_x", "3 v3_x"]
    assert "rung 2 (v2_x), batch 1: NOT TIMED, differs from the reference on the benchmark's inputs: " \
           "lru_slots" in out.getvalue()
    assert rows[1]["speedup"] == "2.50x"     # over the last rung that was timed
    out = io.StringIO()
    assert ladder.check_rungs(family, out) == 1
    assert "fake rung 2 (v2_x): DIFFERS from the reference: top_k_device_locs (call 1)" in out.getvalue()


PERFORMANCE_MD = """# Performance

Text before.

<!-- ladder:begin -->
<!-- ladder:end -->

Text after.
"""


def test_markdown_rewrites_only_its_familys_block_between_the_markers(tmp_path):
    path = tmp_path / "performance.md"
    path.write_text(PERFORMANCE_MD)
    rows = ladder.measure(fake_family({1: {1: 10.0}, 2: {1: 5.0}}), batches=(1,), floor_gbps=50.0,
                          out=io.StringIO())
    swap_in = ladder.Family("swap-in", "Single-step ladder", "", None, None)
    spec = ladder.Family("spec", "Speculative ladder", "", None, None)
    stamp = dict(gpu="NVIDIA H200", date="2026-12-07", command="hisparse-numba bench swap-in --versions")
    ladder.write_markdown(path, swap_in, ladder.markdown_block(swap_in, rows, **stamp))
    ladder.write_markdown(path, spec, ladder.markdown_block(spec, rows[:1], **stamp))
    faster = [dict(r, us=r["us"] / 2) for r in rows]
    ladder.write_markdown(path, swap_in, ladder.markdown_block(swap_in, faster, **stamp))
    text = path.read_text()
    assert text.startswith("# Performance\n\nText before.\n\n<!-- ladder:begin -->")
    assert text.endswith("<!-- ladder:end -->\n\nText after.\n")
    assert text.count("<!-- ladder:swap-in:begin -->") == 1 and text.count("<!-- ladder:spec:begin -->") == 1
    provenance, got = ladder.read_markdown(path, "swap-in")
    assert provenance.startswith("Measured on NVIDIA H200 on 2026-12-07 with "
                                 "`hisparse-numba bench swap-in --versions`")
    assert [(r["rung"], r["batch"], r["us"]) for r in got] == [("1 v1_x", 1, 5.0), ("2 v2_x", 1, 2.5)]
    assert len(ladder.read_markdown(path, "spec")[1]) == 1
    assert ladder.read_markdown(tmp_path / "missing.md", "swap-in") == ("", [])


def test_markdown_needs_the_markers_and_the_versions(tmp_path):
    path = tmp_path / "performance.md"
    path.write_text("# Performance\n")
    family = ladder.Family("swap-in", "x", "", None, None)
    with pytest.raises(SystemExit, match="has no ladder section"):
        ladder.write_markdown(path, family, "block")
    args = types.SimpleNamespace(markdown=str(path), versions=False, check_only=False)
    with pytest.raises(SystemExit, match="add --versions"):
        ladder.requested(args)


def test_the_ladder_on_the_simulator_says_it_needs_a_gpu(capsys):
    if ON_GPU:
        pytest.skip("a GPU is present: the ladder runs for real")
    assert cli.main(["bench", "swap-in", "--versions"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
def test_on_a_gpu_every_single_step_rung_is_checked_then_timed():
    out = io.StringIO()
    rows = ladder.measure(ladder.SWAP_IN, batches=(1, 8), iters=3, out=out)
    assert "NOT TIMED" not in out.getvalue(), out.getvalue()
    assert [(r["rung"], r["batch"]) for r in rows] == [
        (f"{n} {v.name}", b) for n, v in sorted(single_versions.VERSIONS.items()) for b in (1, 8)]
    assert all(r["us"] > 0 and r["GBps"] > 0 for r in rows)
