"""The CLI forgives: every bad invocation gets a one-line reason, doctor never raises, help has
examples and help text for every option, piping into head is quiet."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hisparse_numba import cli, doctor

ROOT = Path(__file__).resolve().parents[1]


def _run(*args, env=None, **kwargs):
    env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "hisparse_numba", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600, **kwargs)


def _parsers(parser, path=("hisparse-numba",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_option_and_command_has_help_text_without_rst_markup():
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, f"{' '.join(path)} {choice.dest} has no help"
                continue
            assert action.help, f"{' '.join(path)} {action.option_strings or action.dest} has no help"
        text = parser.format_help()
        assert "``" not in text and ":func:" not in text, f"RST markup in {' '.join(path)} --help"


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "hisparse-numba lessons run --solved" in out


def test_subcommands_are_one_table():
    assert set(cli.COMMANDS) >= {"doctor", "lessons", "kernel", "bench", "explain"}
    for name, (help_text, add_arguments, run) in cli.COMMANDS.items():
        assert help_text and callable(add_arguments) and callable(run)


@pytest.mark.parametrize("argv, needle", [
    (["lessons"], "required"),
    (["lessons", "frobnicate"], "invalid choice"),
    (["lessons", "run", "--timeout", "x"], "is not a whole number"),
    (["lessons", "run", "--timeout", "0"], "must be > 0"),
    (["lessons", "list", "--dir", "/nonexistent/lessons"], "no such folder"),
    (["bench"], "required"),
    (["bench", "nope"], "invalid choice"),
    (["nope"], "invalid choice"),
])
def test_a_bad_invocation_gets_a_one_line_reason(argv, needle, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert needle in err[-1] and "Traceback" not in "\n".join(err)


def test_an_unknown_lesson_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lessons", "run", "99"])
    assert "no lesson with id 99; known: 00" in str(exc.value.code)


def test_bench_on_the_simulator_says_what_it_needs(capsys):
    from hisparse_numba import device
    if device.backend() == "cuda":
        pytest.skip("a GPU is present: bench runs for real")
    assert cli.main(["bench", "spec"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "needs a CUDA GPU" in err and "docs/performance.md" in err and "cuda12" in err


def test_a_broken_bench_module_fails_loudly(monkeypatch, capsys):
    monkeypatch.setitem(cli.BENCHMARKS, "broken", ("hisparse_numba.bench.no_such_module", "a broken one"))
    assert cli.main(["bench", "broken"]) == 2
    err = capsys.readouterr().err
    assert "ModuleNotFoundError" in err                 # the traceback is shown
    assert "hisparse_numba.bench.no_such_module failed to import" in err.strip().splitlines()[-1]


def test_bench_modules_are_imported_only_for_bench(monkeypatch):
    imported = []
    monkeypatch.setattr(cli, "_bench_module", lambda name: imported.append(name))
    cli._ARGV = ["lessons", "list"]
    cli.build_parser()
    assert imported == []


def test_lessons_list_is_one_line_per_lesson_and_all_adds_the_catalogue(capsys):
    assert cli.main(["lessons", "list"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l[:2].isdigit()]
    assert [l[:2] for l in lines] == [p.name[:2] for p in sorted((ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))]
    assert cli.main(["lessons", "list", "--all"]) == 0
    assert "      [" in capsys.readouterr().out


def test_lessons_list_reads_the_notebook_metadata(tmp_path):
    import nbformat

    from hisparse_numba.lessons import runner
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 07 · Strides")])
    nb.metadata["hisparse"] = {"minutes": 15, "prerequisites": ["00", "05"],
                               "error": "miss_src must have shape [batch, top_k]"}
    nbformat.write(nb, tmp_path / "07-strides.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "08-bare.ipynb")      # no metadata: still listed
    one, two = runner.discover(tmp_path)
    assert one.line().split() == ["07", "Strides", "15", "min", "after", "00,05", "miss_src", "must", "have",
                                  "shape", "[batch,", "top_k]"]
    assert two.line().startswith("08  (untitled)") and "? min" in two.line()


def test_lessons_copy_gives_a_scratch_copy_and_keeps_work(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert cli.main(["lessons", "copy", str(dest)]) == 0
    names = sorted(p.name for p in dest.iterdir())
    assert [n for n in names if n.endswith(".ipynb")] == \
        sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    (dest / names[0]).write_text("my work")
    assert cli.main(["lessons", "copy", str(dest)]) == 2
    assert "your work is kept" in capsys.readouterr().err
    assert (dest / names[0]).read_text() == "my work"
    assert cli.main(["lessons", "copy", str(dest), "--force"]) == 0


def test_kernel_install_registers_hisparse_numba(tmp_path, capsys):
    assert cli.main(["kernel", "install", "--prefix", str(tmp_path)]) == 0
    spec = tmp_path / "share" / "jupyter" / "kernels" / "hisparse-numba" / "kernel.json"
    import json
    data = json.loads(spec.read_text())
    assert data["display_name"] == "Python 3 (hisparse-numba)" and data["argv"][0] == sys.executable
    assert data["env"]["HISPARSE_NUMBA_VERSION"] in ("1", os.environ.get("HISPARSE_NUMBA_VERSION"))


@pytest.mark.parametrize("problem, fix", [
    (ValueError("HISPARSE_NUMBA_BACKEND must be one of auto, cuda, simulator, compile-only, got 'gpu'"),
     "unset HISPARSE_NUMBA_BACKEND"),
    (RuntimeError("HISPARSE_NUMBA_BACKEND=cuda but no CUDA device is usable on this machine"),
     "auto picks the simulator"),
])
def test_doctor_never_raises_on_a_backend_that_cannot_start(problem, fix, monkeypatch, capsys):
    monkeypatch.setenv("HISPARSE_NUMBA_BACKEND", "cuda" if isinstance(problem, RuntimeError) else "gpu")

    def refuse():
        raise problem
    monkeypatch.setattr(doctor, "_import_device", refuse)
    assert doctor.report() == 0
    out = capsys.readouterr().out
    assert "backend      unusable" in out and str(problem) in out and fix in out
    assert "minimum GPU  compute capability 7.5" in out


def test_doctor_names_a_gpu_below_the_minimum():
    what, fix = doctor.capability_problem((7, 0), "Tesla V100")
    assert "7.0, below the minimum 7.5" in what and "T4" in fix
    assert doctor.capability_problem((7, 5)) is None and doctor.capability_problem((9, 0)) is None


def test_doctor_runs_as_a_command():
    out = _run("doctor")
    assert out.returncode == 0 and "known problems" in out.stdout and "Traceback" not in out.stderr


def test_no_broken_pipe_when_piped_into_head():
    cmd = f"{sys.executable} -m hisparse_numba lessons list --all | head -n 2"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert "BrokenPipeError" not in out.stderr and "Traceback" not in out.stderr
    assert len(out.stdout.splitlines()) == 2


# ---------------------------------------------------------------------------------------------- explain

TRACEBACK = ("Traceback (most recent call last):\n  File \"run.py\", line 3, in <module>\n"
             "ValueError: hot_buffer_size (4) must be >= num_top_k (6)\n")


@pytest.mark.parametrize("argv", [["explain"], ["explain", ""], ["explain", "  "]])
def test_explain_without_a_message_says_how_to_paste_one(argv, capsys):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("Nothing to explain: the message is empty")
    assert "explain -" in captured.err and "--file" in captured.err


def test_explain_reads_standard_input_after_a_dash(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(TRACEBACK))
    assert cli.main(["explain", "-"]) == 0
    assert capsys.readouterr().out.startswith("hot_buffer_size ({hot_buffer_size}) must be >= num_top_k")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli.main(["explain", "-"]) == 2


def test_explain_reads_a_file(tmp_path, capsys):
    log = tmp_path / "traceback.txt"
    log.write_text(TRACEBACK)
    assert cli.main(["explain", "--file", str(log)]) == 0
    assert capsys.readouterr().out.startswith("hot_buffer_size ({hot_buffer_size})")
    assert cli.main(["explain", "-f", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert cli.main(["explain", "--file", str(log), "more words"]) == 2
    assert "not both" in capsys.readouterr().err


def test_explain_a_cuda_failure_from_a_pipe():
    result = _run("explain", "-", input="RuntimeError: CUDA error: an illegal memory access was encountered\n"
                                        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("an illegal memory access was encountered")
    assert "HISPARSE_NUMBA_BACKEND=simulator" in result.stdout
