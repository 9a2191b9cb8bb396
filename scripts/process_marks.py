"""The processes a test script started, found by an environment variable it gave them.

``browser_test.py`` and ``hub_smoke_test.py`` start servers whose kernels run in sessions of their
own; each sets ``VARIABLE=<run id>`` in what it starts, and stops whatever still carries it.
"""

from __future__ import annotations

import os
from pathlib import Path


def marked_processes(variable: str, value: str) -> list[int]:
    """Pids (not this one) whose environment holds ``variable=value``."""
    needle = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found
