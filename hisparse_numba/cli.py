"""hisparse-numba: doctor, lessons, kernel, bench and explain.

Each subcommand is one row of COMMANDS: its name, a one-line help, the function that adds its
arguments and the function that runs it. A new subcommand is a new row (and its two functions).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
import traceback

PROG = "hisparse-numba"

EXAMPLES = """\
examples:
  hisparse-numba doctor                      what runs the kernels here, and what to fix
  hisparse-numba lessons list                one line per lesson (--all: the error catalogue)
  hisparse-numba lessons run 00 03           run lessons 00 and 03 headless (as shipped)
  hisparse-numba lessons run --solved        run every lesson with its solutions
  hisparse-numba lessons check --dir ~/my-lessons   your copy: each exercise right, wrong or not yet
  hisparse-numba lessons run --solved --warmup --jobs 4
                                             the same, compiling on a GPU meanwhile, 4 lessons at a time
  hisparse-numba lessons copy ~/hisparse     a scratch copy of the lessons to work in
  hisparse-numba kernel install --user       register the "hisparse-numba" Jupyter kernel
  hisparse-numba hub-values --repo me/fork   the hub's Helm values for your images
  hisparse-numba bench swap-in               GPU benchmark (needs a CUDA GPU)
  hisparse-numba explain "hot_buffer_size must be >= num_top_k"
  python run.py 2>&1 | hisparse-numba explain -   explain the traceback a script ends with
"""

BENCHMARKS = {
    "swap-in": ("hisparse_numba.bench.swap_in", "single-step swap-in, batch 1..64"),
    "spec": ("hisparse_numba.bench.spec", "speculative swap-in vs four single steps vs replays"),
    "canary": ("hisparse_numba.bench.canary", "kv-canary plan, write, verify"),
    "startup": ("hisparse_numba.bench.startup",
                "where the time goes: cold/warm compile, first and steady calls, a public call's split"),
    "graph": ("hisparse_numba.bench.graph", "eager launches vs CUDA-graph replay of a decode step"),
}
GPU_RUNS = "docs/performance.md"


class CliError(Exception):
    """A bad invocation or an unusable machine: printed as one line, exit status 2."""


def _device():
    """``hisparse_numba.device``, or a CliError naming the fix when the backend cannot start."""
    try:
        from . import device
    except (ValueError, RuntimeError) as exc:
        raise CliError(f"{exc} (`hisparse-numba doctor` explains; HISPARSE_NUMBA_BACKEND=simulator "
                       "always works)") from None
    return device


# ---------------------------------------------------------------- doctor

def _doctor_args(p):
    pass


def _doctor(args) -> int:
    from .doctor import report

    return report()


# ---------------------------------------------------------------- lessons

def _lessons_args(p):
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    q = actions.add_parser("list", help="one line per lesson: id, title, minutes, prerequisites, error",
                           description="One line per lesson: id, title, minutes, prerequisites and the "
                                       "error it teaches (from each notebook's metadata).")
    q.add_argument("--all", action="store_true",
                   help="also print every error-catalogue entry under its lesson")
    _dir_option(q)

    q = actions.add_parser("run", help="run lesson notebooks headless, one line per lesson",
                           description="Run lesson notebooks top to bottom in a fresh kernel and print "
                                       "one line per lesson with the exercise checkers' verdicts.",
                           epilog="examples:\n  hisparse-numba lessons run\n  hisparse-numba lessons "
                                  "run 00 --solved\n", formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("ids", nargs="*", metavar="ID", help="lesson ids such as 00 01 (default: every lesson)")
    q.add_argument("--solved", action="store_true",
                   help="replace each exercise stub by its solution (lessons/solutions/NN.py); every "
                        "checker must then print right")
    q.add_argument("--out", default="build/lessons", help="where executed copies and HTML go "
                                                          "(default: build/lessons)")
    q.add_argument("--timeout", type=_positive_int, default=600, help="seconds per cell (default: 600)")
    q.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N",
                   help="lessons run at a time, each in its own kernel (default: 1; with --warmup on "
                        "a GPU 4)")
    q.add_argument("--warmup", action="store_true",
                   help="on a GPU: compile the lessons' kernels in background processes while the "
                        "lessons run, each lesson waiting only for its own (what make lessons runs)")
    q.add_argument("--compile-jobs", type=_positive_int, default=None, metavar="N",
                   help="with --warmup: compiling processes (default: one per CPU core)")
    _dir_option(q)

    q = actions.add_parser("check", help="a learner's copy as it is: right, wrong or not yet per exercise",
                           description="Run the notebooks of a learner's copy as they are (every cell, "
                                       "nothing written there) and print one line per exercise: right, "
                                       "wrong or not yet, then 'exercises right: N/M'.",
                           epilog="--report writes one JSON object: learner, checked_at, backend, right, "
                                  "total, lessons [{id, title, seconds, ran, problem}], exercises [{id, "
                                  "lesson, verdict, message}].\nexamples:\n  hisparse-numba lessons check "
                                  "--dir ~/my-lessons\n  hisparse-numba lessons check 09 11 --dir ~/my-lessons "
                                  "--report ada.json --name ada\n",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("ids", nargs="*", metavar="ID", help="lesson ids such as 09 11 (default: every lesson)")
    q.add_argument("--report", default=None, metavar="FILE", help="also write the verdicts to FILE (JSON)")
    q.add_argument("--name", default=None, help="the learner's name in the report (default: your user name)")
    q.add_argument("--timeout", type=_positive_int, default=600, help="seconds per cell (default: 600)")
    q.add_argument("--dir", default=None, help="the copy to check (default: the current folder when it "
                                               "holds lessons, else ./lessons, else the installed copy)")

    q = actions.add_parser("slides", help="reveal.js slides, one deck per syllabus block",
                           description="Make one reveal.js deck per block of docs/syllabus.md from the "
                                       "lessons' Markdown and figures (lessons without an executed copy "
                                       "in --executed are run first).")
    q.add_argument("blocks", nargs="*", type=_positive_int, metavar="BLOCK",
                   help="block numbers (default: every block)")
    q.add_argument("--out", default="build/slides", help="where the decks go (default: build/slides)")
    q.add_argument("--executed", default="build/lessons",
                   help="executed notebooks to take the figures from (default: build/lessons)")
    q.add_argument("--syllabus", default=None, help="the syllabus (default: docs/syllabus.md of the checkout)")
    q.add_argument("--timeout", type=_positive_int, default=600, help="seconds per cell (default: 600)")
    _dir_option(q)

    q = actions.add_parser("copy", help="copy the lessons into a folder to work in",
                           description="Copy the lesson notebooks (and lessons/README.md) into DIR, so "
                                       "your edits and outputs never touch the tracked lessons/.")
    q.add_argument("dest", metavar="DIR", help="folder to create or fill, e.g. ~/hisparse-lessons")
    q.add_argument("--force", action="store_true", help="overwrite notebooks that already exist in DIR")
    _dir_option(q)

    q = actions.add_parser("colab-cell", help="insert or update the Colab setup cell in notebooks",
                           description="Make the Colab setup cell the first code cell of each notebook "
                                       "(idempotent). The repository URL comes from pyproject.toml.")
    q.add_argument("paths", nargs="+", metavar="PATH", help="notebooks, or folders of NN-*.ipynb notebooks")
    _repo_option(q, "to install from when the cell is given no other source")
    q.add_argument("--source", default="",
                   help="what the cell installs from on Colab, the default of its HISPARSE_NUMBA_SOURCE form "
                        "field: a wheel URL, a wheel's path or a git+https URL (works unpublished)")

    q = actions.add_parser("colab-badges", help="print the Markdown table of Open-in-Colab badges",
                           description="Print a Markdown table with an Open-in-Colab badge per lesson.")
    _repo_option(q, "whose lessons/ the badges open", branch=True)
    _dir_option(q)

    q = actions.add_parser("binder-badge", help="print the Binder badge and link for a repository",
                           description="Print the Binder badge (Markdown) and the mybinder.org link "
                                       "that opens every lesson in the simulator.")
    _repo_option(q, "that mybinder.org builds", branch=True)


def _repo_option(p, what: str, branch: bool = False):
    p.add_argument("--repo", "--repository", dest="repo", default=None, metavar="OWNER/NAME",
                   help=f"GitHub repository {what} (OWNER/NAME or its URL; default: [project.urls] "
                        "Repository in pyproject.toml)")
    if branch:
        p.add_argument("--branch", default="main", help="branch (default: main)")


def _dir_option(p):
    p.add_argument("--dir", default=None, help="lessons folder (default: ./lessons, else the installed copy)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _lessons_dir(args):
    from pathlib import Path

    if args.dir is not None and not Path(args.dir).is_dir():
        raise CliError(f"--dir {args.dir}: no such folder")
    return args.dir


def _learner_dir(args):
    """``lessons check``'s folder: --dir, else the current folder when it holds lessons."""
    from pathlib import Path

    if args.dir is None and any(Path.cwd().glob("[0-9][0-9]-*.ipynb")):
        return Path.cwd()
    return _lessons_dir(args)


# what a command needs from the [lessons] extra (a plain `pip install` lists, explains and copies)
LESSONS_EXTRA = {"run": ("nbformat", "nbclient", "ipykernel", "matplotlib"),
                 "check": ("nbformat", "nbclient", "ipykernel", "matplotlib"),
                 "slides": ("nbformat", "nbconvert"), "colab-cell": ("nbformat",)}


def _require_lessons_extra(action: str) -> None:
    """A CliError naming the install command when ``lessons <action>`` lacks the lessons extra."""
    import importlib.util

    missing = [m for m in LESSONS_EXTRA.get(action, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"lessons {action} needs the lessons extra ({', '.join(missing)} not installed): "
                       "pip install 'hisparse-numba[lessons]'")


def _lessons(args) -> int:
    from .lessons import runner

    _require_lessons_extra(args.action)

    if args.action == "list":
        return _lessons_list(runner.discover(_lessons_dir(args)), args.all)
    if args.action == "run":
        _device()
        if args.warmup or (args.jobs or 1) > 1:
            from .lessons import flow

            return flow.run(args.ids, _lessons_dir(args), args.out, args.timeout, args.solved,
                            args.jobs, args.warmup, args.compile_jobs)
        return runner.run(args.ids, _lessons_dir(args), args.out, args.timeout, solved=args.solved)
    if args.action == "check":
        from .lessons import progress

        _device()
        return progress.check(args.ids, _learner_dir(args), args.timeout, args.report, args.name)
    if args.action == "slides":
        from .lessons import slides

        _device()
        try:
            slides.build(args.out, args.blocks, _lessons_dir(args), args.syllabus, args.executed, args.timeout)
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(str(exc)) from None
        return 0
    if args.action == "copy":
        from .lessons import scratch

        try:
            copied = scratch.copy_lessons(args.dest, _lessons_dir(args), force=args.force)
        except (FileExistsError, FileNotFoundError) as exc:
            raise CliError(str(exc)) from None
        print(f"copied {len(copied)} files to {args.dest}; open it with: jupyter lab {args.dest}")
        return 0
    if args.action == "colab-cell":
        return _colab_cell(args)
    return _badges(args, runner)


def _badges(args, runner) -> int:
    from .lessons import colab
    from .workshop import binder_badge, binder_url

    try:
        if args.action == "binder-badge":
            print(f"{binder_badge(args.repo, args.branch)}\n{binder_url(args.repo, args.branch)}")
            return 0
        print(colab.badge_table(runner.discover(_lessons_dir(args)), args.repo, args.branch))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return 0


def _lessons_list(lessons, show_all: bool) -> int:
    if not lessons:
        raise CliError("no lesson notebooks found (pass --dir FOLDER)")
    for lesson in lessons:
        print(lesson.line())
        if show_all:
            from . import errors

            for entry in errors.entries_for_lesson(lesson.id):
                text = entry.pattern if len(entry.pattern) <= 96 else entry.pattern[:93] + "..."
                print(f"      [{entry.origin}] {text}")
    hint = "" if show_all else "`hisparse-numba lessons list --all` adds the error catalogue; "
    print(f"\n{hint}`hisparse-numba explain \"<message>\"` gives an entry's cause and fix.")
    return 0


def _colab_cell(args) -> int:
    from pathlib import Path

    from .lessons import colab

    notebooks = []
    for path in map(Path, args.paths):
        if path.is_dir():
            notebooks += sorted(path.glob("[0-9][0-9]-*.ipynb"))
        elif path.suffix == ".ipynb" and path.is_file():
            notebooks.append(path)
        else:
            raise CliError(f"{path}: not a notebook or a folder")
    if not notebooks:
        raise CliError("no notebooks found in " + ", ".join(args.paths))
    try:
        changed = colab.add_setup_cells(notebooks, args.repo, args.source)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    print(f"setup cell: {len(changed)} notebook(s) changed, {len(notebooks) - len(changed)} already up to date")
    return 0


# ---------------------------------------------------------------- kernel

def _kernel_args(p):
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("install", help="register this Python as the Jupyter kernel \"hisparse-numba\"",
                           description="Register this Python as a Jupyter kernel named hisparse-numba "
                                       "(JupyterLab and JupyterHub list it as \"Python 3 (hisparse-numba)\").")
    where = q.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for the current user (~/.local/share/jupyter)")
    where.add_argument("--sys-prefix", action="store_true",
                       help="inside this environment (the default; what a hub image wants)")
    where.add_argument("--prefix", default=None, help="under this prefix, e.g. /usr/local")


def _kernel(args) -> int:
    from .lessons import scratch

    try:
        path = scratch.install_kernel(user=args.user, prefix=args.prefix)
    except ImportError:
        raise CliError("ipykernel is not installed: pip install 'hisparse-numba[lessons]'") from None
    print(f"installed kernelspec {scratch.KERNEL_NAME} in {path}")
    return 0


# ---------------------------------------------------------------- hub-values

def _hub_values_args(p):
    where = p.add_mutually_exclusive_group()
    where.add_argument("--repo", default=None, metavar="OWNER/NAME",
                       help="images ghcr.io/<owner>/<name>-singleuser:cpu and :gpu (default: the repository "
                            "in pyproject.toml: the file as it is)")
    where.add_argument("--image", default=None, metavar="REGISTRY/PATH",
                       help="any image name without a tag, e.g. registry.example.org/class/hisparse-numba")
    p.add_argument("--values", default=None, metavar="FILE",
                   help="the values to rewrite (default: deploy/hub/values.yaml of this checkout)")


def _hub_values(args) -> int:
    from pathlib import Path

    from . import workshop

    path = Path(args.values) if args.values else workshop.VALUES
    if not path.is_file():
        raise CliError(f"{path}: no such file; hub-values rewrites deploy/hub/values.yaml of a checkout "
                       "(or pass --values FILE)")
    try:
        image = workshop.check_image(args.image) if args.image else workshop.singleuser_image(args.repo)
        print(workshop.hub_values(path.read_text(), image), end="")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    print("# build and push the images from the checkout's root:\n#   "
          + "\n#   ".join(workshop.build_commands(image)), file=sys.stderr)
    return 0


# ---------------------------------------------------------------- bench

def _bench_args(p):
    names = p.add_subparsers(dest="name", metavar="NAME", required=True)
    wanted = _bench_requested()
    for name, (module, help_text) in BENCHMARKS.items():
        q = names.add_parser(name, help=help_text, description=f"GPU benchmark: {help_text}.")
        if name in wanted:
            _bench_module(name).add_arguments(q)


def _bench_requested() -> set:
    """The benchmark named on the command line, the only module imported (imports Numba)."""
    argv = sys.argv[1:] if _ARGV is None else _ARGV
    if "bench" in argv:
        rest = argv[argv.index("bench") + 1:]
        return {a for a in rest if a in BENCHMARKS}
    return set()


def _bench_module(name: str):
    module = BENCHMARKS[name][0]
    try:
        return importlib.import_module(module)
    except (ValueError, RuntimeError) as exc:  # the device layer refused the backend
        raise CliError(f"{exc} (`hisparse-numba doctor` explains)") from None
    except ImportError:
        traceback.print_exc()
        raise CliError(f"benchmark module {module} failed to import (traceback above); "
                       "this is a bug in hisparse-numba") from None


def _bench(args) -> int:
    device = _device()
    if device.backend() != "cuda" and not getattr(args, "check_only", False):   # --check-only: any world
        raise CliError(
            f"bench {args.name} needs a CUDA GPU and the backend here is {device.backend()!r}: "
            "install the CuPy extra for your driver's CUDA major (pip install 'hisparse-numba[cuda12]' "
            f"or '[cuda13]') on a GPU machine; the H200 figures are in {GPU_RUNS}")
    return _bench_module(args.name).run(args)


# ---------------------------------------------------------------- explain

def _explain_args(p):
    p.add_argument("message", nargs="*",
                   help="the error message in quotes (a whole traceback is fine); - reads it from "
                        "standard input")
    p.add_argument("-f", "--file", default=None, metavar="PATH",
                   help="read the message from a file (a saved traceback or log)")


def _explain_message(args) -> str:
    """The pasted text: the arguments, standard input (``-``) or a file (``--file``)."""
    if args.file is not None:
        if args.message:
            raise CliError("give the message or --file, not both")
        try:
            with open(args.file, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError as exc:
            raise CliError(f"--file {args.file}: {exc.strerror or exc}") from None
    if args.message == ["-"]:
        return sys.stdin.read()
    return " ".join(args.message)


def _explain(args) -> int:
    from . import errors

    text, status = errors.explain_report(_explain_message(args))
    print(text, file=sys.stderr if status == 2 else sys.stdout)
    return status


# ---------------------------------------------------------------- warmup and parity

def _requested(command: str) -> bool:
    """Whether ``command`` is the subcommand on the command line (its options import Numba)."""
    argv = sys.argv[1:] if _ARGV is None else _ARGV
    return bool(argv) and argv[0] == command


def _numba_command(command: str, module: str):
    """``(add arguments, run)`` of a subcommand whose ``module`` (with ``add_arguments(parser)``
    and ``run(args)``) imports Numba: it is imported only when ``command`` is the one asked for."""

    def add_arguments(p):
        if _requested(command):
            importlib.import_module(module, __package__).add_arguments(p)

    def run(args) -> int:
        _device()
        return importlib.import_module(module, __package__).run(args)

    return add_arguments, run


_warmup_args, _warmup = _numba_command("warmup", ".warmup")
_parity_args, _parity = _numba_command("parity", ".parity.command")


# name -> (help, add arguments, run)
COMMANDS = {
    "doctor": ("backend, versions, GPU and known problems with their fixes (never fails)",
               _doctor_args, _doctor),
    "lessons": ("list, run, check or copy the lesson notebooks; slides; Colab cells and badges",
                _lessons_args, _lessons),
    "kernel": ("register the hisparse-numba Jupyter kernel", _kernel_args, _kernel),
    "hub-values": ("the workshop hub's Helm values for your images (deploy/hub/values.yaml renamed)",
                   _hub_values_args, _hub_values),
    "bench": ("GPU benchmarks with ratios to hardware ceilings measured in the same run",
              _bench_args, _bench),
    "explain": ("find the catalogue entry (cause, fix, lesson) for a pasted error message",
                _explain_args, _explain),
    "warmup": ("compile every kernel the lessons/tests use into the on-disk kernel cache (GPU)",
               _warmup_args, _warmup),
    "parity": ("compare with sglang's own kernels on identical inputs (needs sglang >= 0.5.23 on a GPU)",
               _parity_args, _parity),
}

_ARGV = None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="sglang's HiSparse and kv-canary KV-cache kernels in Numba CUDA, with lessons.",
        epilog=EXAMPLES + "\n`hisparse-numba COMMAND --help` describes each command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, add_arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".")
        add_arguments(p)
        p.set_defaults(func=run)
    return parser


def main(argv=None) -> int:
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = build_parser().parse_args(_ARGV)
            return int(args.func(args) or 0)
        except CliError as exc:
            print(textwrap.shorten(f"{PROG}: error: {exc}", 10_000), file=sys.stderr)
            return 2
        finally:
            sys.stdout.flush()
    except BrokenPipeError:  # piped into `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
