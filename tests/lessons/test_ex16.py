"""Lesson 16 (the kernel ladder): the exercise's checker is right for the hashed hit stage and names
each plausible mistake; the ladder's figures come from docs/performance.md in the simulator; the
code excerpts are the rungs' own lines."""

import io
from contextlib import redirect_stdout

import matplotlib
import pytest

from hisparse_numba import device
from hisparse_numba.bench import ladder
from hisparse_numba.hisparse.single_step import reference
from hisparse_numba.lessons import ex16

from . import ladder_kernels as k

matplotlib.use("Agg")


@pytest.mark.parametrize("kernel,ok,start,words", [
    (k.hashed, True, "right", ("one probe per slot",)),
    (k.stub, False, "not yet", ("empty the hash",)),
    (k.hashed_with_the_newest, False, "wrong", ("newest position", "hit_lane[2]")),
    (k.hashed_one_slot_per_thread, False, "wrong", ("never looked up",)),
    (k.hashed_without_a_barrier, False, "wrong", ("cuda.syncthreads()",)),
    (k.scanned, False, "wrong", ("the way version 1 finds it",)),
], ids=lambda v: getattr(v, "__name__", "") if callable(v) else None)
def test_the_checker_says_right_only_for_the_hashed_stage(capsys, kernel, ok, start, words):
    assert ex16.check_hit_stage(kernel) is ok
    out = capsys.readouterr().out
    assert out.startswith(start), out
    for w in words:
        if start == "wrong" and w == "cuda.syncthreads()" and "hit_lane[" in out:
            continue            # the race showed itself as a wrong lane: also a right verdict
        assert w in out, out


def test_the_reference_of_the_hit_stage_is_the_references_hit_test():
    t, tags, newest = ex16.stage_cases()[0]
    assert ex16.hit_lanes_reference(t, tags, newest).tolist() == [
        3, -1, -1, -1, 0, -1, 7, -1, -1, 2, -1, -1, 6, -1, -1, -1]


def test_excerpts_are_the_rungs_own_lines():
    out = io.StringIO()
    with redirect_stdout(out):
        ex16.excerpt(1, "# Stage 2", "cuda.syncthreads()")
        ex16.excerpt(reference, "newest = seq_len - 1", "misses = np.flatnonzero")
    text = out.getvalue()
    assert text.startswith("# v1_plain.py, lines ") and "np.isin: a linear scan" in text
    assert "# reference.py, lines " in text and "hit = (slot_tags >= 0)" in text
    assert "cuda.syncthreads()" not in text.split("# reference.py")[0]


def test_the_ladder_figure_reads_docs_performance_md_in_the_simulator(tmp_path, capsys):
    if not device.SIMULATOR:
        pytest.skip("on a GPU the lesson measures instead")
    path = tmp_path / "performance.md"
    path.write_text("# Performance\n\n<!-- ladder:begin -->\n<!-- ladder:end -->\n")
    assert ex16.ladder_rows(path) == []
    assert "has no ladder table here yet" in capsys.readouterr().out
    rows = [dict(rung="1 v1_plain", batch=1, timing="graph", us=80.0, GBps=2.6, of_floor="5%", speedup="-"),
            dict(rung="2 v2_tuned", batch=1, timing="graph", us=30.0, GBps=7.0, of_floor="13%", speedup="2.67x")]
    ladder.write_markdown(path, ladder.SWAP_IN, ladder.markdown_block(
        ladder.SWAP_IN, rows, gpu="NVIDIA H200", date="2026-12-07", command="hisparse-numba bench swap-in --versions"))
    got = ex16.ladder_rows(path)
    out = capsys.readouterr().out
    assert "READ from docs/performance.md" in out and "Measured on NVIDIA H200 on 2026-12-07" in out
    assert [(r["rung"], r["us"]) for r in got] == [("1 v1_plain", 80.0), ("2 v2_tuned", 30.0)]
    ex16.draw_ladder(got)


def test_every_rung_equals_the_reference_in_the_lesson(capsys):
    for number in (1, 2):
        assert ex16.same_as_reference(number)
    assert capsys.readouterr().out.count("equals the reference on every output and state array") == 2
    ex16.draw_shared_memory()
