"""Browser test: a learner's JupyterLab, in headless Chromium, runs a lesson copy and shows its figures.

What it does, bounded in time:

1. copies the lesson into a temporary folder (the learner's working copy; the tracked notebook
   stays clean) and starts JupyterLab there on 127.0.0.1 with a random token, ``--allow-root``,
   the simulator backend and notebook windowing off (every cell in the page);
2. opens the copy in headless Chromium through Playwright (Debian's ``chromium`` package, passed
   as ``executable_path``: Playwright's own browser download is not needed);
3. runs all cells (the Run menu's command) and waits until every code cell has an execution count;
4. checks what a learner sees: a figure (an ``<img>`` in an output), a checker's ``right:`` /
   ``wrong:`` / ``not yet:`` line, and no error output outside cells tagged ``raises-exception``;
5. saves a screenshot (``--screenshot``), stops JupyterLab and removes the folder.

Usage (from the repository root)::

    python scripts/browser_test.py lessons/00-hot-buffer.ipynb --screenshot build/browser-test.png

Needs ``pip install playwright`` and ``apt-get install chromium`` (or ``--chromium PATH``).
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
from pathlib import Path
from process_marks import marked_processes  # scripts/, beside this file

ROOT = Path(__file__).resolve().parents[1]
MARKER = "HISPARSE_BROWSER_TEST_ID"
CHECKER_LINE = re.compile(r"^(right|wrong|not yet):", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_chromium(given: str | None) -> str:
    for c in ([given] if given else ["chromium", "chromium-browser", "google-chrome"]):
        path = shutil.which(c) if c else None
        if path:
            return path
    sys.exit("no Chromium found: apt-get install chromium (or pass --chromium PATH)")


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


def run_in_browser(chromium: str, url: str, code_cells: int, expected_errors: int, cell_timeout: float,
                   total_timeout: float, screenshot: Path | None) -> list[str]:
    from playwright.sync_api import sync_playwright

    failures = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(cell_timeout * 1000)
            t = time.monotonic()
            page.goto(url)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            kernel_idle = ("() => window.jupyterapp?.shell?.currentWidget?.sessionContext?.session"
                           "?.kernel?.status === 'idle'")
            page.wait_for_function(kernel_idle, timeout=120_000)
            print(f"browser: notebook open, kernel idle: {time.monotonic() - t:.1f} s", flush=True)

            t = time.monotonic()
            # the Run menu's "Run All Cells", called by its command id (menus move between versions)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            count_js = ("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
                        ".filter(p => /\\[\\d+\\]/.test(p.textContent)).length")
            deadline = time.monotonic() + total_timeout
            done = 0
            while time.monotonic() < deadline:
                done = page.evaluate(count_js)
                busy = page.evaluate("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
                                     ".some(p => p.textContent.includes('*'))")
                if done >= code_cells and not busy:
                    break
                if int(time.monotonic() - t) % 15 == 0:
                    prompts = page.evaluate("() => [...document.querySelectorAll('.jp-CodeCell "
                                            ".jp-InputArea-prompt')].map(p => p.textContent).join(' ')")
                    print(f"browser: {done}/{code_cells} cells ran ({prompts})", flush=True)
                page.wait_for_timeout(1000)
            print(f"browser: {done}/{code_cells} cells ran: {time.monotonic() - t:.1f} s", flush=True)
            if done < code_cells:
                failures.append(f"only {done} of {code_cells} code cells ran within {total_timeout:.0f} s")

            images = page.locator(".jp-OutputArea-output img").count()
            text = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                                 ".map(o => o.innerText).join('\\n')")
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                                  " .jp-RenderedText, .jp-RenderedText[data-mime-type='application/vnd.jupyter.error']"
                                  ).count()
            checker = sorted(set(m.group(1) for m in CHECKER_LINE.finditer(text)))
            print(f"browser: {images} figures, checker lines {checker}, {errors} error outputs "
                  f"({expected_errors} cells tagged raises-exception)", flush=True)
            if images < 1:
                failures.append("no figure (<img>) in any output")
            if not checker:
                failures.append("no checker line (right: / wrong: / not yet:) in any output")
            if errors > expected_errors:
                failures.append(f"{errors} error outputs, but only {expected_errors} cells may raise")
            if screenshot:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.locator(".jp-OutputArea-output img").first.scroll_into_view_if_needed()
                page.screenshot(path=str(screenshot))
                print(f"browser: screenshot {screenshot}", flush=True)
        finally:
            browser.close()
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lesson", nargs="?", help="lesson notebook (default: lessons/00-*.ipynb)")
    parser.add_argument("--chromium", help="Chromium executable (default: chromium on PATH)")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds for one browser step")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole test")
    parser.add_argument("--screenshot", type=Path, help="save a screenshot of the executed lesson here")
    args = parser.parse_args(argv)

    lesson = Path(args.lesson or (sorted(glob.glob(str(ROOT / "lessons/00-*.ipynb"))) or [""])[0])
    if not lesson.is_file():
        sys.exit(f"no lesson notebook at {lesson!s}")
    chromium = find_chromium(args.chromium)
    notebook = json.loads(lesson.read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    expected_errors = sum("raises-exception" in c.get("metadata", {}).get("tags", []) for c in code)

    def overall_timeout(signum, frame):
        raise TimeoutError(f"the whole browser test took more than {args.timeout:.0f} s")

    signal.signal(signal.SIGALRM, overall_timeout)
    signal.alarm(int(args.timeout))
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="hisparse-browser-"))
    (work / "lessons").mkdir()
    shutil.copy(lesson, work / "lessons" / lesson.name)
    settings = work / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="simulator", JUPYTERLAB_SETTINGS_DIR=str(work / "settings"),
               JUPYTER_RUNTIME_DIR=str(work / "runtime"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("MPLBACKEND", None)
    env[MARKER] = marker = secrets.token_hex(8)
    log = open(work / "lab.log", "w")
    lab = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={work}", "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    failures: list[str] = []
    try:
        t = time.monotonic()
        wait_for_lab(f"http://127.0.0.1:{port}/api/status?token={token}", lab, 120)
        print(f"lab: up on 127.0.0.1:{port}: {time.monotonic() - t:.1f} s", flush=True)
        url = f"http://127.0.0.1:{port}/lab/tree/lessons/{lesson.name}?token={token}&reset"
        failures = run_in_browser(chromium, url, len(code), expected_errors, args.cell_timeout,
                                  args.timeout, args.screenshot)
    except Exception as e:  # report, then clean up
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
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
        log.close()
        if failures:
            print("lab log tail:\n" + "".join((work / "lab.log").read_text().splitlines(True)[-20:]))
        shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    if failures:
        print(f"FAILED after {elapsed:.0f} s:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASSED: {lesson.name} ran in JupyterLab in headless Chromium in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
