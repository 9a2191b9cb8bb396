"""``pip install`` with one line a phase instead of pip's hundreds: what the Makefile installs with.

    python scripts/pip_progress.py --log .venv/pip-install.log -e ".[lessons]"

runs ``python -m pip install ARGS`` (this interpreter's pip) and prints, instead of its output:

- on a terminal, one line rewritten in place as pip goes (``pip: collecting 37 packages (12
  downloads): jupyterlab-4.6.6-py3-none-any.whl (12 s)``), kept at each change of phase;
- elsewhere (CI logs), one line a phase (preparing, collecting, building, installing, done), and
  one every 15 s within a long one;

and the whole of pip's output in ``--log``. When pip fails, the last lines of its output follow,
and the exit status is pip's.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

# pip's line -> the phase it belongs to, and the package it names (group 1), if any
PHASES = [
    (re.compile(r"^(?:Obtaining|Processing)\s+(\S+)(?!.*\(from )"), "preparing"),
    (re.compile(r"^(?:Collecting|Requirement already satisfied:|Processing)\s+(\S+)"), "collecting"),
    (re.compile(r"^\s*(?:Downloading|Using cached)\s+(\S+)"), "collecting"),
    (re.compile(r"^\s*(?:Building|Created) (?:wheel|editable) for ([^\s:]+)"), "building"),
    (re.compile(r"^Installing collected packages: (.*)"), "installing"),
    (re.compile(r"^Successfully installed (.*)"), "done"),
]
TAIL = 40
QUIET_S = 15  # with nothing from pip for this long (installing 100 packages), say it is still at it


class Progress:
    """What pip is doing, printed as one line a phase (a terminal: one line updated in place)."""

    def __init__(self, out=sys.stdout):
        self.out = out
        self.tty = out.isatty()
        self.t0 = time.monotonic()
        self.phase = ""
        self.shown, self.shown_at = "", self.t0
        self.packages: set[str] = set()
        self.downloads = 0
        self.lines = 0

    def feed(self, line: str) -> None:
        self.lines += 1
        for pattern, phase in PHASES:
            match = pattern.match(line)
            if match:
                self._event(phase, match.group(1).strip(), line)
                return

    def _event(self, phase: str, name: str, line: str) -> None:
        if line.lstrip().startswith(("Downloading", "Using cached")):
            self.downloads += 1
        elif phase == "collecting":
            project = re.split(r"[<>=!~\[;@ ]|[-_]\d", Path(name).name, maxsplit=1)[0]
            self.packages.add(re.sub(r"[-_.]+", "-", project).lower())
        changed = phase != self.phase
        if changed and self.phase and self.tty:
            self.out.write("\n")
        self.phase = phase
        if changed or self.tty or time.monotonic() - self.shown_at >= QUIET_S:
            self._show(self._describe(phase, name))

    def _describe(self, phase: str, name: str) -> str:
        if phase == "installing":
            return f"pip: installing {len(name.split(', '))} packages"
        if phase == "done":
            return f"pip: installed {len(name.split())} packages"
        if phase == "collecting":
            return (f"pip: collecting {len(self.packages)} packages ({self.downloads} downloads): "
                    f"{Path(name).name[:60]}")
        return f"pip: {phase}: {Path(name).name[:60]}"

    def quiet(self) -> None:
        """pip said nothing for QUIET_S seconds: a terminal's line gets its time updated, a log a line."""
        if self.phase:
            self._show(self.shown if self.tty else f"pip: still {self.phase}")

    def _show(self, text: str) -> None:
        self.shown, self.shown_at = text, time.monotonic()
        text = f"{text} ({time.monotonic() - self.t0:.0f} s)"
        if self.tty:  # a line wider than the terminal would wrap, and only its last row be rewritten
            width = shutil.get_terminal_size().columns - 1
            self.out.write("\r\x1b[K" + (text if len(text) <= width else text[:width - 3] + "..."))
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def finish(self, status: int) -> None:
        if self.tty and self.phase:
            self.out.write("\n")
        if status == 0 and self.phase != "done":
            self._show(f"pip: nothing to install ({len(self.packages)} packages already satisfied)")
            if self.tty:
                self.out.write("\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], usage="%(prog)s [--log FILE] PIP-ARGS...")
    parser.add_argument("--log", type=Path, help="where pip's whole output goes (default: nowhere)")
    args, pip_args = parser.parse_known_args(argv)
    command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *pip_args]
    progress = Progress()
    tail: list[str] = []
    log = open(args.log, "w") if args.log else open(os.devnull, "w")
    with log, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               bufsize=1, env=dict(os.environ, PYTHONUNBUFFERED="1")) as pip:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in pip.stdout] + [lines.put(None)], daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=QUIET_S)
            except queue.Empty:
                progress.quiet()
                continue
            if line is None:
                break
            log.write(line)
            tail = (tail + [line])[-TAIL:]
            progress.feed(line)
    progress.finish(pip.returncode)
    if pip.returncode:
        print(f"pip install failed (exit status {pip.returncode}); its last lines"
              f"{f' (all of them: {args.log})' if args.log else ''}:\n" + "".join(tail), end="", file=sys.stderr)
    return pip.returncode


if __name__ == "__main__":
    sys.exit(main())
