"""One line a phase while the suite starts, so that a long collection is not a silent one.

Collecting the suite imports NumPy, Numba and every test module; on two busy cores that is a
minute or more, and pytest prints nothing meanwhile (pytest-xdist: nothing between "created: N
workers" and "N workers [M items]"). ``tests/conftest.py`` registers one of these plugins in the
process that owns the terminal (never in an xdist worker):

- one process: "collecting tests ..." before, "collected in X s: N tests to run" after;
- pytest-xdist: the workers starting, each worker up and its collection done, with times;

and, in both, "... still collecting (X s)" every ``HEARTBEAT_S`` seconds until collection ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time

HEARTBEAT_S = 20.0
WHAT = "imports NumPy, Numba and every test module"


class _Progress:
    def __init__(self, config):
        self.config = config
        self.t0 = time.monotonic()
        self._done = threading.Event()
        self._beat: threading.Thread | None = None
        try:
            # the terminal itself: while a test module is imported pytest captures fd 1, and a
            # heartbeat written through the terminal reporter then would land in the capture
            self.fd = os.dup(sys.stdout.fileno())
            self.tty = os.isatty(self.fd)
        except (AttributeError, OSError, ValueError):  # stdout is not a file (pytest.main in a notebook)
            self.fd, self.tty = None, False

    def say(self, text: str) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.fd is None:
            if tr is not None:
                tr.write_line(text)
            return
        if tr is not None:
            tr.flush()
        # on a terminal pytest-xdist keeps a status line rewritten in place: replace it, then move on
        os.write(self.fd, (("\r\x1b[K" if self.tty else "") + text + "\n").encode())

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def start_heartbeat(self) -> None:
        def beat():
            while not self._done.wait(HEARTBEAT_S):
                self.say(f"  ... still collecting ({self.elapsed():.0f} s)")
        self._beat = threading.Thread(target=beat, daemon=True)
        self._beat.start()

    def stop_heartbeat(self) -> None:
        self._done.set()
        if self._beat is not None:
            self._beat.join()

    def pytest_unconfigure(self, config) -> None:
        self.stop_heartbeat()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class OneProcess(_Progress):
    """Progress of a run without pytest-xdist workers."""

    def pytest_collection(self, session) -> None:
        self.say(f"collecting tests (this process {WHAT}) ...")
        self.start_heartbeat()

    def pytest_collection_finish(self, session) -> None:
        self.stop_heartbeat()
        self.say(f"collected in {self.elapsed():.0f} s: {len(session.items)} tests to run")


class XdistWorkers(_Progress):
    """Progress of the pytest-xdist controller while its workers start and collect."""

    def __init__(self, config):
        super().__init__(config)
        self.workers = 0
        self.collected: set[str] = set()

    def pytest_xdist_setupnodes(self, config, specs) -> None:
        self.workers = len(specs)
        self.say(f"starting {self.workers} pytest-xdist workers; each {WHAT} ...")
        self.start_heartbeat()

    def pytest_testnodeready(self, node) -> None:
        self.say(f"[{node.gateway.id}] worker up in {self.elapsed():.0f} s, collecting ...")

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.collected.add(node.gateway.id)
        self.say(f"[{node.gateway.id}] collected in {self.elapsed():.0f} s: {len(ids)} tests to run")
        if len(self.collected) >= self.workers:
            self.stop_heartbeat()


def register(config) -> None:
    """Register the progress plugin that fits this process (none in an xdist worker)."""
    if hasattr(config, "workerinput"):
        return
    xdist = config.pluginmanager.hasplugin("xdist") and bool(getattr(config.option, "numprocesses", 0))
    plugin = XdistWorkers(config) if xdist and getattr(config.option, "dist", "no") != "no" else OneProcess(config)
    config.pluginmanager.register(plugin, "hisparse-startup-progress")
