"""``bench startup``'s first-run figures (``bench/startup_flow.py``): the rungs' configurations,
the first-launch log of the lessons' kernels, the cold lessons flow, the markdown section."""

import json

import pytest

from hisparse_numba import device
from hisparse_numba.bench import startup_flow
from hisparse_numba.device import cuda
from tests.test_warmup_coverage import LESSONS_DIR


def test_every_rung_of_both_ladders_has_a_configuration():
    from hisparse_numba.hisparse.single_step import versions as ss
    from hisparse_numba.hisparse.speculative import versions as spec

    names = [name for name, _ in startup_flow.rung_jobs()]
    assert len(names) == len(ss.VERSIONS) + len(spec.VERSIONS) == len(set(names))
    assert all(f"v{n} {v.name}" in " ".join(names) for n, v in {**ss.VERSIONS}.items())


def test_a_rung_child_runs_its_configuration_twice():
    spec = dict(startup_flow.rung_jobs())["single-step v1 v1_plain"]
    row = startup_flow.rung_child(json.dumps(spec))
    assert row["first_s"] > 0 and row["again_s"] > 0


def test_the_startup_file_logs_a_process_first_launch_once(tmp_path, monkeypatch):
    @cuda.jit
    def touch(a):
        a[0] = 1

    log = tmp_path / "log.txt"
    monkeypatch.setenv(startup_flow.LOG_ENV, str(log))
    monkeypatch.setattr(device, "launch", device.launch)      # restored after the test
    exec(startup_flow.STARTUP, {})
    a = device.xp.zeros(1, dtype=device.xp.int32)
    device.launch(touch, 1, 1, a)
    device.launch(touch, 1, 1, a)
    (when, kernel), = startup_flow.first_launches(log)
    assert kernel.endswith("touch") and when > 0 and int(device.to_host(a)[0]) == 1


def test_markdown_section_is_added_then_replaced(tmp_path):
    rungs = [{"what": "speculative v1 v1_plain", "cold_s": 20.0, "warm_s": 0.5}]
    flow = {"first_kernel_s": 12.3, "first_kernel": "gather_kernel", "total_s": 140.0, "rc": 0}
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nSomething else.\n")
    block = startup_flow.markdown_block(rungs, flow, "NVIDIA H100", date="2026-12-07", command="hisparse-numba bench startup")
    startup_flow.write_markdown(doc, block)
    text = doc.read_text()
    assert "Something else." in text and text.count(startup_flow.BEGIN) == 1
    assert "NVIDIA H100 on 2026-12-07 with `hisparse-numba bench startup`" in text
    assert "| until the first lesson kernel has run (gather_kernel) | 12.3 |" in text
    assert "| every lesson done | 140.0 |" in text and "| speculative v1 v1_plain | 20.0 | 0.50 |" in text
    startup_flow.write_markdown(doc, block.replace("12.3", "9.9"))
    text = doc.read_text()
    assert text.count(startup_flow.BEGIN) == 1 and "9.9" in text and "12.3" not in text
    missing = tmp_path / "new.md"
    startup_flow.write_markdown(missing, block)
    assert missing.read_text().startswith("# Performance") and startup_flow.END in missing.read_text()


@pytest.mark.slow
def test_the_flow_in_the_simulator_reports_lesson_00s_first_kernel(capsys):
    flow = startup_flow.measure_flow(["00"], ["--dir", str(LESSONS_DIR)])
    assert flow["rc"] == 0, capsys.readouterr().out
    assert 0 < flow["first_kernel_s"] < flow["total_s"]
    assert "1 passed, 0 failed" in capsys.readouterr().out
