"""``hisparse-numba``: doctor, lessons, bench and explain."""

from __future__ import annotations

import argparse
import importlib
import sys

BENCHMARKS = {
    "swap-in": "hisparse_numba.bench.swap_in",
    "spec": "hisparse_numba.bench.spec",
    "canary": "hisparse_numba.bench.canary",
}


def _doctor(args) -> int:
    from .doctor import report

    return report()


def _lessons(args) -> int:
    from .lessons import runner

    if args.action == "list":
        from . import errors

        for lesson in runner.discover(args.dir):
            print(f"{lesson.id}  {lesson.title}")
            for entry in errors.entries_for_lesson(lesson.id):
                text = entry.pattern if len(entry.pattern) <= 96 else entry.pattern[:93] + "..."
                print(f"      [{entry.origin}] {text}")
        print("\n`hisparse-numba explain \"<message>\"` gives an entry's cause and fix.")
        return 0
    return runner.run(args.ids, args.dir, args.out, args.timeout)


def _bench(args) -> int:
    return importlib.import_module(BENCHMARKS[args.name]).run(args)


def _explain(args) -> int:
    from . import errors

    message = " ".join(args.message)
    matches = errors.explain(message)
    if not matches:
        print("No catalogue entry matches that message. `hisparse-numba lessons list` shows them all.")
        return 1
    for entry in matches:
        print(entry.render())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hisparse-numba", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="backend, versions, GPU and known problems with their fixes")
    p.set_defaults(func=_doctor)

    p = sub.add_parser("lessons", help="list or run the lesson notebooks headless")
    p.add_argument("action", choices=["list", "run"])
    p.add_argument("ids", nargs="*", help="lesson ids such as 00 01 (default: all)")
    p.add_argument("--dir", default=None, help="lessons folder (default: ./lessons)")
    p.add_argument("--out", default="build/lessons", help="where executed copies and HTML go")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=_lessons)

    p = sub.add_parser("bench", help="GPU benchmarks with ratios to measured hardware ceilings")
    bench = p.add_subparsers(dest="name", required=True)
    for name, module in BENCHMARKS.items():
        q = bench.add_parser(name)
        try:
            importlib.import_module(module).add_arguments(q)
        except ImportError:
            pass
        q.set_defaults(func=_bench)

    p = sub.add_parser("explain", help="find the catalogue entry for a pasted error message")
    p.add_argument("message", nargs="+")
    p.set_defaults(func=_explain)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
