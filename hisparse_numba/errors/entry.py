"""One catalogue entry: a message pattern, its cause, its fix, whose text it is and its lessons."""

from __future__ import annotations

from dataclasses import dataclass

from .text import PLACEHOLDER, text_regex

SGLANG = "sglang"
OURS = "hisparse-numba"
NUMBA = "numba"
CUDA = "cuda"   # the CUDA runtime's or driver's error, as CUDA, CuPy, Numba or PyTorch print it


@dataclass(frozen=True)
class Entry:
    pattern: str
    cause: str
    fix: str
    lesson: str
    origin: str = SGLANG
    variants: tuple[str, ...] = ()
    also: tuple[str, ...] = ()

    @property
    def lessons(self) -> tuple[str, ...]:
        return (self.lesson, *self.also)

    def texts(self) -> tuple[str, ...]:
        return (self.pattern, *self.variants)

    def regex(self):
        """The pattern as raised (placeholders match any text)."""
        return text_regex(self.pattern, normalised=False)

    def specificity(self) -> int:
        """Characters of fixed text: the more, the more specific the entry."""
        return len(PLACEHOLDER.sub("", self.pattern))

    def render(self) -> str:
        lessons = ", ".join(self.lessons)
        runs = " ".join(self.lessons)
        label = "also printed as" if self.origin == CUDA else "sglang also raises"
        variants = "".join(f"\n  {label}: {v}" for v in self.variants)
        return (f"{self.pattern}\n  raised by: {self.origin}{variants}\n  cause: {self.cause}\n"
                f"  fix: {self.fix}\n  lesson{'s' if self.also else ''}: {lessons} "
                f"(hisparse-numba lessons run {runs})")


def entry(pattern, cause, fix, lesson, origin=OURS) -> Entry:
    """An entry written positionally, hisparse-numba's own text unless ``origin`` says otherwise."""
    return Entry(pattern, cause, fix, lesson, origin)
