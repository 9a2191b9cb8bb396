"""One spelling for an error message or a catalogue pattern, so that a paste matches its entry.

A paste differs from the message as raised: other whitespace or quotes, a prefix
(``ValueError:``, ``RuntimeError:``, ``kv-canary:``), a final period gone, a whole traceback
around it. ``normalise`` folds these away; ``text_regex`` turns a pattern's ``{placeholders}``
into "any text"; ``last_exception`` picks the message out of a traceback.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{[a-z0-9_]+\}")

_EXCEPTION_LINE = re.compile(r"^\s*(?:E\s+)?(?:[\w.]+\.)?\w*(?:Error|Exception|Warning)\s*:", re.MULTILINE)
_PREFIX = re.compile(r"^(?:E\s+)?(?:(?:[\w.]+\.)?\w*(?:Error|Exception|Warning)|runtimecheck failed|"
                     r"runtime check failed|error)\s*:\s*", re.IGNORECASE)
_KV_CANARY = re.compile(r"^kv-canary\s*:\s*", re.IGNORECASE)
TOKEN = re.compile(r"\{[a-z0-9_]+\}|\w+|[^\w\s]")


def last_exception(text: str) -> str:
    """The message of the last exception in a pasted traceback (or the text itself)."""
    starts = [m.start() for m in _EXCEPTION_LINE.finditer(text)]
    if "\n" not in text.strip() or not starts:
        return text
    return text[starts[-1]:]


def normalise(text: str, keep_kv_canary: bool) -> str:
    """One spelling for a message or a pattern: whitespace, quotes, prefixes, final punctuation."""
    text = text.replace("\u2026", "...").translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
    text = re.sub(r"\s+", " ", text).strip().strip("`'\"").strip()
    while True:
        stripped = _PREFIX.sub("", text, count=1)
        if not keep_kv_canary:
            stripped = _KV_CANARY.sub("", stripped, count=1)
        if stripped == text:
            break
        text = stripped
    text = re.sub(r"(?:\.\.\.|[\s.;:,!])+$", "", text)
    text = re.sub(r"\s*([^\w\s{}])\s*", r"\1", text)  # spacing around punctuation is not meaningful
    return text.lower()


def text_regex(text: str, normalised: bool = True, keep_kv_canary: bool = True) -> re.Pattern:
    """A regex for ``text`` whose placeholders match any text (normalised first unless told not)."""
    if normalised:
        text = normalise(text, keep_kv_canary)
    parts = PLACEHOLDER.split(text)
    if normalised:  # the space beside a value may be gone ("got(3,)int32"): the value takes it
        parts = [p.lstrip() if i else p for i, p in enumerate(parts)]
        parts = [p.rstrip() if i < len(parts) - 1 else p for i, p in enumerate(parts)]
    body = ".+?".join(re.escape(p) for p in parts)
    if normalised and not parts[0]:
        body = body[3:]  # a paste may leave out a leading name (a function, an argument)
    return re.compile(body, re.DOTALL)


_REGEX_CACHE: dict[tuple[str, bool], re.Pattern] = {}


def cached_regex(text: str, keep_kv_canary: bool) -> re.Pattern:
    """``text_regex`` of a normalised ``text``, built once."""
    key = (text, keep_kv_canary)
    if key not in _REGEX_CACHE:
        _REGEX_CACHE[key] = text_regex(text, keep_kv_canary=keep_kv_canary)
    return _REGEX_CACHE[key]
