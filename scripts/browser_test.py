"""Browser test: a learner's JupyterLab, in headless Chromium, runs a lesson copy and shows its figures.

What it does, bounded in time:

1. copies the lesson into a temporary folder (the learner's working copy; the tracked notebook
   stays clean) and starts JupyterLab there on 127.0.0.1 with a random token, ``--allow-root``,
   the simulator backend, notebook windowing off (every cell in the page) and the news pop-up off;
2. opens the copy in headless Chromium through Playwright (its own Chromium when
   ``python -m playwright install chromium`` could download it, else Debian's ``chromium``);
3. runs all cells (the Run menu's command) and follows the notebook's own model every second: how
   many code cells have run and which outputs are errors (``output_type`` ``error``; on the page a
   traceback and a warning on stderr are the same ``jp-OutputArea-output`` element). It stops at
   the first error in a cell not tagged ``raises-exception`` and names that cell;
4. checks what a learner sees: a figure (an ``<img>`` in an output), a checker's ``right:`` /
   ``wrong:`` / ``not yet:`` line, and that each cell tagged ``raises-exception`` raised;
5. saves a screenshot (``--screenshot``), stops JupyterLab and removes the folder.

Usage (from the repository root)::

    python scripts/browser_test.py lessons/00-hot-buffer.ipynb --screenshot build/browser-test.png

Needs ``pip install playwright`` and a Chromium: ``python -m playwright install chromium``, or
``apt-get install chromium`` where Playwright's download host is unreachable (or ``--chromium PATH``).
Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from process_marks import marked_processes  # scripts/, beside this file

ROOT = Path(__file__).resolve().parents[1]
MARKER = "HISPARSE_BROWSER_TEST_ID"
CHECKER_LINE = re.compile(r"^(right|wrong|not yet):", re.MULTILINE)
RAISES_TAG = "raises-exception"
# Per code cell of the open notebook: its prompt ("[3]:", "[*]:", "[ ]:"), its execution count
# and its error outputs, read from the notebook model (the page cannot tell a traceback from stderr).
CELLS_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .filter(cell => cell.model.type === 'code')
    .map(cell => ({
        prompt: cell.node.querySelector('.jp-InputArea-prompt')?.textContent ?? '',
        count: cell.model.executionCount,
        errors: Array.from({length: cell.model.outputs.length}, (_, i) => cell.model.outputs.get(i).toJSON())
            .filter(o => o.output_type === 'error')
            .map(o => ({ename: o.ename, evalue: o.evalue}))}))"""
# JupyterLab settings of the test's own profile: every cell in the page, no news or update pop-up
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}


@dataclass(frozen=True)
class LessonCell:
    """A code cell as the notebook file has it: where it is, how it starts, whether it must raise."""
    number: int       # 1-based among all the notebook's cells (what a reader counts)
    first_line: str
    raises: bool

    def name(self) -> str:
        return f"cell {self.number} ({self.first_line!r})"


def lesson_cells(notebook: dict) -> list[LessonCell]:
    cells = []
    for number, cell in enumerate(notebook["cells"], 1):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            first = next((line.strip() for line in source.splitlines() if line.strip()), "")
            cells.append(LessonCell(number, first[:60], RAISES_TAG in cell.get("metadata", {}).get("tags", [])))
    return cells


def cells_ran(cells: list[dict]) -> int:
    return sum(c["count"] is not None and "*" not in c["prompt"] for c in cells)


def cells_busy(cells: list[dict]) -> bool:
    return any("*" in c["prompt"] for c in cells)


def error_count(cells: list[dict]) -> int:
    return sum(len(c["errors"]) for c in cells)


def unexpected_error(cells: list[dict], lesson: list[LessonCell]) -> str | None:
    """The first error in a cell not tagged raises-exception, naming the cell; None when none."""
    for page_cell, cell in zip(cells, lesson):
        if page_cell["errors"] and not cell.raises:
            error = page_cell["errors"][0]
            return (f"{cell.name()} raised {error['ename']}: {error['evalue']} "
                    f"(not tagged {RAISES_TAG}; the cells after it did not run)")
    return None


def unraised(cells: list[dict], lesson: list[LessonCell]) -> list[str]:
    """Cells tagged raises-exception that ran without raising."""
    return [f"{cell.name()} is tagged {RAISES_TAG} but raised nothing"
            for page_cell, cell in zip(cells, lesson)
            if cell.raises and page_cell["count"] is not None and not page_cell["errors"]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_chromium(given: str | None) -> str | None:
    """The Chromium to launch: ``given``, else Playwright's own (None) when installed, else one on PATH."""
    if given:
        return shutil.which(given) or sys.exit(f"--chromium {given}: not found")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("the browser test needs Playwright: pip install playwright")

    with sync_playwright() as pw:
        if Path(pw.chromium.executable_path).is_file():
            return None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit("no Chromium found: python -m playwright install chromium, or apt-get install chromium "
             "(or pass --chromium PATH)")


def wait_for_lab(url: str, process: subprocess.Popen, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"JupyterLab not up after {timeout:.0f} s")


def open_notebook(page, url: str) -> None:
    t = time.monotonic()
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    kernel_idle = ("() => window.jupyterapp?.shell?.currentWidget?.sessionContext?.session"
                   "?.kernel?.status === 'idle'")
    page.wait_for_function(kernel_idle, timeout=120_000)
    print(f"browser: notebook open, kernel idle: {time.monotonic() - t:.1f} s", flush=True)


def run_all(page, lesson: list[LessonCell], total_timeout: float) -> list[str]:
    """Run every cell; poll the notebook once a second until all ran, one raised, or time is up."""
    t = time.monotonic()
    # the Run menu's "Run All Cells", called by its command id (menus move between versions)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    deadline, last_report, cells = t + total_timeout, t, []
    while time.monotonic() < deadline:
        cells = page.evaluate(CELLS_JS)
        problem = unexpected_error(cells, lesson)
        if problem:
            print(f"browser: stopped at the first unexpected error: {problem}", flush=True)
            return [problem]
        if cells_ran(cells) >= len(lesson) and not cells_busy(cells):
            break
        if time.monotonic() - last_report >= 15:
            last_report = time.monotonic()
            print(f"browser: {cells_ran(cells)}/{len(lesson)} cells ran "
                  f"({' '.join(c['prompt'] for c in cells)})", flush=True)
        page.wait_for_timeout(1000)
    done = cells_ran(cells)
    print(f"browser: {done}/{len(lesson)} cells ran: {time.monotonic() - t:.1f} s", flush=True)
    failures = unraised(cells, lesson)
    if done < len(lesson):
        failures.append(f"only {done} of {len(lesson)} code cells ran within {total_timeout:.0f} s")
    expected = sum(c.raises for c in lesson)
    print(f"browser: {error_count(cells)} error outputs ({expected} cells tagged {RAISES_TAG})", flush=True)
    return failures


def check_what_a_learner_sees(page) -> list[str]:
    images = page.locator(".jp-OutputArea-output img").count()
    text = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                         ".map(o => o.innerText).join('\\n')")
    checker = sorted(set(m.group(1) for m in CHECKER_LINE.finditer(text)))
    print(f"browser: {images} figures, checker lines {checker}", flush=True)
    failures = []
    if images < 1:
        failures.append("no figure (<img>) in any output")
    if not checker:
        failures.append("no checker line (right: / wrong: / not yet:) in any output")
    return failures


def run_in_browser(chromium: str | None, url: str, lesson: list[LessonCell], cell_timeout: float,
                   total_timeout: float, screenshot: Path | None) -> list[str]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(cell_timeout * 1000)
            open_notebook(page, url)
            failures = run_all(page, lesson, total_timeout)
            if not failures:
                failures = check_what_a_learner_sees(page)
            if screenshot:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                figure = page.locator(".jp-OutputArea-output img")
                if figure.count():
                    figure.first.scroll_into_view_if_needed()
                page.screenshot(path=str(screenshot))
                print(f"browser: screenshot {screenshot}", flush=True)
        finally:
            browser.close()
    return failures


def start_lab(work: Path, port: int, token: str, marker: str, log) -> subprocess.Popen:
    for name, values in LAB_SETTINGS.items():
        path = work / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="simulator", JUPYTERLAB_SETTINGS_DIR=str(work / "settings"),
               JUPYTER_RUNTIME_DIR=str(work / "runtime"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("MPLBACKEND", None)
    env[MARKER] = marker
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={work}", "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_lab(lab: subprocess.Popen, marker: str) -> None:
    try:
        os.killpg(lab.pid, signal.SIGTERM)  # JupyterLab shuts its kernels down on SIGTERM
        lab.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    leftovers = marked_processes(MARKER, marker)  # a kernel runs in its own session
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if leftovers:
        print(f"cleanup: ended leftover processes {leftovers}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lesson", nargs="?", help="lesson notebook (default: lessons/00-*.ipynb)")
    parser.add_argument("--chromium", help="Chromium executable (default: Playwright's, else chromium on PATH)")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds for one browser step")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole test")
    parser.add_argument("--screenshot", type=Path, help="save a screenshot of the executed lesson here")
    args = parser.parse_args(argv)

    lesson_path = Path(args.lesson or (sorted(glob.glob(str(ROOT / "lessons/00-*.ipynb"))) or [""])[0])
    if not lesson_path.is_file():
        sys.exit(f"no lesson notebook at {lesson_path!s}")
    chromium = find_chromium(args.chromium)
    lesson = lesson_cells(json.loads(lesson_path.read_text()))

    def overall_timeout(signum, frame):
        raise TimeoutError(f"the whole browser test took more than {args.timeout:.0f} s")

    signal.signal(signal.SIGALRM, overall_timeout)
    signal.alarm(int(args.timeout))
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="hisparse-browser-"))
    (work / "lessons").mkdir()
    shutil.copy(lesson_path, work / "lessons" / lesson_path.name)
    port, token, marker = free_port(), secrets.token_hex(16), secrets.token_hex(8)
    log = open(work / "lab.log", "w")
    lab = start_lab(work, port, token, marker, log)
    failures: list[str] = []
    try:
        t = time.monotonic()
        wait_for_lab(f"http://127.0.0.1:{port}/api/status?token={token}", lab, 120)
        print(f"lab: up on 127.0.0.1:{port}: {time.monotonic() - t:.1f} s", flush=True)
        url = f"http://127.0.0.1:{port}/lab/tree/lessons/{lesson_path.name}?token={token}&reset"
        failures = run_in_browser(chromium, url, lesson, args.cell_timeout, args.timeout, args.screenshot)
    except Exception as e:  # report, then clean up
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        stop_lab(lab, marker)
        log.close()
        if failures:
            print("lab log tail:\n" + "".join((work / "lab.log").read_text().splitlines(True)[-20:]))
        shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    if failures:
        print(f"FAILED after {elapsed:.0f} s:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASSED: {lesson_path.name} ran in JupyterLab in headless Chromium in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
