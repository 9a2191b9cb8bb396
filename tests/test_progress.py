"""The suite's start is not silent: one line a phase while tests are collected (tests/progress.py)."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import progress

ROOT = Path(__file__).resolve().parents[1]


def _pytest(*args) -> str:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "tests/test_scheduling.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return out.stdout


class _Config:
    class pluginmanager:
        @staticmethod
        def get_plugin(name):
            return None


def test_the_heartbeat_reaches_the_terminal_while_collection_captures_it(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    plugin = progress.OneProcess(_Config())
    os.close(plugin.fd)
    read, plugin.fd = os.pipe()
    plugin.start_heartbeat()
    time.sleep(0.3)
    plugin.stop_heartbeat()
    plugin.pytest_unconfigure(None)
    lines = os.read(read, 10_000).decode().splitlines()
    os.close(read)
    assert len(lines) >= 2 and all(re.fullmatch(r"  \.\.\. still collecting \(\d+ s\)", l) for l in lines), lines


def test_one_process_says_it_collects_and_how_many_in_how_long():
    out = _pytest("--co", "-q")
    assert "collecting tests (this process imports NumPy, Numba and every test module) ..." in out
    assert re.search(r"^collected in \d+ s: \d+ tests to run$", out, re.M), out


@pytest.mark.slow(seconds=30)
def test_xdist_workers_say_when_they_are_up_and_what_they_collected():
    out = _pytest("-n", "1")
    assert "starting 1 pytest-xdist workers; each imports NumPy, Numba and every test module ..." in out
    assert re.search(r"^\[gw0\] worker up in \d+ s, collecting \.\.\.$", out, re.M), out
    assert re.search(r"^\[gw0\] collected in \d+ s: \d+ tests to run$", out, re.M), out
    assert "collecting tests (this process" not in out
