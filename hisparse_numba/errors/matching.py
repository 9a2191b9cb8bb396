"""Matching a pasted error message to its catalogue entries (what ``hisparse-numba explain`` prints)."""

from __future__ import annotations

import difflib

from .catalogue import CATALOGUE
from .entry import Entry
from .text import PLACEHOLDER, TOKEN, cached_regex, last_exception, normalise


def _piece_score(message_tokens: list[str], text: str) -> int:
    """Fixed tokens of ``text`` matched when the whole paste is a contiguous piece of it
    (placeholders take any one or more tokens; the paste may start and stop anywhere, and its
    last word may be cut short), or -1 when it is not."""
    pattern = ["*" if t.startswith("{") else t for t in TOKEN.findall(normalise(text, False))]
    last = len(message_tokens) - 1
    states = {(i, False): 0 for i in range(len(pattern))}  # (next pattern token, in a placeholder)
    for k, token in enumerate(message_tokens):
        moved: dict[tuple[int, bool], int] = {}

        def keep(state, score):
            if moved.get(state, -1) < score:
                moved[state] = score

        for (i, absorbing), score in states.items():
            if absorbing:
                keep((i, True), score)
            if i < len(pattern):
                if pattern[i] == "*":
                    keep((i + 1, True), score)
                elif pattern[i] == token:
                    keep((i + 1, False), score + 1)
                elif k == last and token.isalnum() and pattern[i].startswith(token):
                    keep((i + 1, False), score)
        states = moved
        if not states:
            return -1
    return max(states.values())


def _pieces(message: str) -> list[Entry]:
    """Entries of which ``message`` is a piece (a partial paste), best first."""
    tokens = TOKEN.findall(normalise(message, False))
    words = {t for t in tokens if t[0].isalnum() and not t.isdigit()}
    if len(words) < 2:
        return []
    scored = []
    for entry in CATALOGUE:
        best = -1
        for text in entry.texts():
            if len(words & set(TOKEN.findall(normalise(text, False)))) >= 2:
                best = max(best, _piece_score(tokens, text))
        if best >= 3 and best >= 0.6 * len(tokens):
            scored.append((best, entry.specificity(), entry))
    return [e for *_, e in sorted(scored, key=lambda s: (-s[0], -s[1]))]


def explain(message: str) -> list[Entry]:
    """Entries matching a pasted ``message``, the most specific first.

    Forgiving: whitespace and final punctuation are ignored, as are prefixes such as
    ``ValueError:``, ``RuntimeError:`` or ``kv-canary:``; a whole traceback is read from its last
    exception; sglang's variant texts count; and a piece of a message (``verify_capacity=3 does
    not match ...``) finds the entries it is a piece of."""
    message = last_exception(message)
    ranked = []
    for strict in (True, False):
        text = normalise(message, keep_kv_canary=strict)
        for entry in CATALOGUE:
            if entry not in ranked and any(cached_regex(t, strict).search(text) for t in entry.texts()):
                ranked.append(entry)
        if ranked:
            # exact (prefix kept) matches come first; within a pass, more fixed text wins
            break
    if ranked:
        return sorted(ranked, key=lambda e: -e.specificity())
    return _pieces(message)


def suggest(message: str, n: int = 3) -> list[Entry]:
    """The ``n`` entries whose texts read most like ``message`` (for when ``explain`` finds none)."""
    text = normalise(last_exception(message), False)

    def likeness(entry):
        return max(difflib.SequenceMatcher(None, text, PLACEHOLDER.sub("", normalise(t, False))).ratio()
                   for t in entry.texts())

    scored = sorted(((likeness(e), i) for i, e in enumerate(CATALOGUE)), reverse=True)
    return [CATALOGUE[i] for score, i in scored[:n] if score >= 0.3]


NOTHING_PASTED = """\
Nothing to explain: the message is empty. Paste the error in one of three ways:
  hisparse-numba explain "ValueError: hot_buffer_size (4) must be >= num_top_k (6)"   (in quotes)
  python my_script.py 2>&1 | hisparse-numba explain -                    (- reads standard input)
  hisparse-numba explain --file traceback.txt                            (a saved traceback)"""


def explain_report(message: str) -> tuple[str, int]:
    """What ``hisparse-numba explain`` prints for ``message``, and its exit status: 0 for a match,
    1 for none, 2 for an empty message (then the text says how to paste one)."""
    if not message.strip():
        return NOTHING_PASTED, 2
    matches = explain(message)
    if matches:
        return "\n\n".join(entry.render() for entry in matches), 0
    lines = ["No catalogue entry matches that message."]
    nearest = suggest(message)
    if nearest:
        lines.append("Nearest entries (did you mean one of these?):")
        lines += [f"  [{', '.join(e.lessons)}] {e.pattern}" for e in nearest]
    lines.append("`hisparse-numba lessons list --all` shows the whole catalogue.")
    return "\n".join(lines), 1


def entries_for_lesson(lesson_id: str) -> list[Entry]:
    """Entries whose main lesson is ``lesson_id`` (the error that lesson teaches comes first)."""
    return [e for e in CATALOGUE if e.lesson == lesson_id]
