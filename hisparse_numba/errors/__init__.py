"""The error catalogue: every error hisparse-numba raises, its cause, its fix and its lesson.

``pattern`` is the message as raised, with ``{name}`` for the parts that vary; ``variants`` are
the other texts sglang raises for the same mistake (its C++ ``RuntimeCheck`` texts, the MTP
kernel's, older wrappers'). ``explain`` turns a pasted message back into its entries, the most
specific first (a pattern with more fixed text wins over a generic one such as
``{name} must be contiguous``). It forgives what a paste does to a message: other whitespace, a
missing final period, a prefix (``ValueError:``, ``kv-canary:``, ``RuntimeError:``), a whole
traceback, or only a piece of the message; ``suggest`` names the nearest entries when nothing
matches. Tests check that every ``fail(...)``/``raise`` site in the package has an entry and every
entry names a lesson that exists.

``origin`` says whose text it is: ``"sglang"`` when sglang raises the same text, ``"numba"``
for Numba's own warning, ``"hisparse-numba"`` for the checks this project adds where sglang
checks nothing and a mistake corrupts memory or state silently.

Lessons 00-13 and 16 each teach one error (``lesson``); ``also`` names further lessons where the
same error matters (lesson 14, the kernel puzzles, teaches no error of its own).

The package, one concern a module:

* ``entry``: what an entry is (``Entry``) and how it prints;
* ``swap_in_entries`` and ``plan_entries``: the entries themselves (swap-in arguments, memory and
  backend; miss plans and kv-canary);
* ``catalogue``: ``CATALOGUE``, with sglang's other texts (``VARIANTS``) and further lessons
  (``ALSO``) attached;
* ``text``: one spelling for a message or a pattern (whitespace, prefixes, tracebacks);
* ``matching``: matching a paste to entries (``explain``, ``suggest``, ``explain_report``).
"""

from .catalogue import ALSO, CATALOGUE, VARIANTS
from .entry import NUMBA, OURS, SGLANG, Entry
from .matching import entries_for_lesson, explain, explain_report, suggest

__all__ = [
    "ALSO", "CATALOGUE", "Entry", "NUMBA", "OURS", "SGLANG", "VARIANTS",
    "entries_for_lesson", "explain", "explain_report", "suggest",
]
