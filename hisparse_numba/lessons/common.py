"""Helpers shared by the lesson checkers (``exNN.py``) and the lessons' figures.

Three groups:

* verdicts: every checker prints exactly one line, ``right: ...``, ``wrong: ...`` (naming the
  mistake) or ``not yet: ...`` (the learner's stub still raises ``NotImplementedError``), and
  returns whether it was right. A checker never raises: an exception from the learner's own
  code is reported as theirs, with its line in the learner's cell; a launcher's ``ValueError``
  is reported as the launcher's.
* problems: a small single-step swap-in problem (lessons 04-08, 13) and a small speculative one
  (lessons 03, 04, 08), each run through kernel and NumPy reference on the same inputs, and the
  speculative launch without its checks that lessons 01, 03, 04 and 08 use to show the damage.
* figures: small matplotlib helpers (an integer grid drawn cell by cell, a guarded arena).
"""

from __future__ import annotations

import functools
import traceback
from pathlib import Path

import numpy as np

from .. import device
from ..hisparse import speculative as spec
from ..hisparse.single_step.examples import copy_problem, make_swap_in_problem, new_queries, to_device_problem, to_host_problem
from ..hisparse.miss_plan import alloc_miss_plan
from ..hisparse.speculative.examples import make_spec_problem, run_kernel_and_reference, set_selection
from ..hisparse.single_step import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference

# ---------------------------------------------------------------------------------------------
# Verdicts.


class Verdict(Exception):
    """Raised inside a checker to stop it with one printed line (``word: message``)."""

    def __init__(self, word: str, message: str):
        super().__init__(message)
        self.word, self.message = word, message


def wrong(message: str):
    raise Verdict("wrong", message)


def report(ok: bool, right: str, wrong_message: str) -> bool:
    print(f"right: {right}" if ok else f"wrong: {wrong_message}")
    return ok


def is_unanswered(answer) -> bool:
    """Whether ``answer`` is still a placeholder: ``...`` as shipped, or ``None``."""
    return answer is ... or answer is None


def whole_number(answer, name: str) -> int:
    """``answer`` as an ``int``, or a wrong verdict naming the mistake: a ``bool``, a float
    (Python's or NumPy's, even 14.0), a string of digits, anything else that is not an integer."""
    if isinstance(answer, (bool, np.bool_)):
        wrong(f"{name} is {answer}, a bool: write a whole number")
    if isinstance(answer, (int, np.integer)):
        return int(answer)
    if isinstance(answer, str):
        wrong(f"{name} is the string {answer!r}: write the number itself, without quotes")
    if isinstance(answer, (float, np.floating)):
        wrong(f"{name} is {answer!r}, a {type(answer).__name__}: a whole number is asked "
              "(// divides to a whole number, / to a float)")
    wrong(f"{name} is {answer!r} ({type(answer).__name__}): a whole number is asked")


def whole_numbers(answer, name: str, what: str = "whole numbers") -> list[int]:
    """``answer`` (a list or tuple of whole numbers, or a 1-D integer array) as a list of ``int``,
    or a wrong verdict naming the mistake (``what`` names the numbers: "slot numbers")."""
    if isinstance(answer, np.ndarray) and answer.ndim == 1:
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple)):
        wrong(f"{name} must be a list of {what}, got {answer!r} ({type(answer).__name__})")
    return [whole_number(a, f"{name}[{i}]") for i, a in enumerate(answer)]


def checker(fn):
    """Turn a ``Verdict`` raised inside ``fn`` into its printed line and ``False``."""
    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Verdict as v:
            print(f"{v.word}: {v.message}")
            return False
    return checked


def _where(err: BaseException) -> str:
    """`` (line N of your cell)``: the deepest frame of the learner's own file in ``err``."""
    frames = traceback.extract_tb(err.__traceback__)
    if len(frames) < 2:
        return ""
    cell = frames[1].filename            # frames[0] is learner_call itself
    lines = [f.lineno for f in frames[1:] if f.filename == cell]
    return f" (line {lines[-1]} of your cell)" if lines else ""


def learner_call(fn, *args, **kwargs):
    """Call the learner's ``fn``; a stub's ``NotImplementedError`` becomes ``not yet``, any other
    exception ``wrong: your code raised ...`` (never confused with a launcher's rejection)."""
    if is_unanswered(fn):
        raise Verdict("not yet", "pass your function to the checker")
    name = getattr(fn, "__name__", "your function")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise Verdict("not yet", f"{name} is still a stub: {e}") from None
    except (ValueError, TypeError) as e:
        if _raised_by_the_package(e):     # the learner called a launcher and it said no
            raise Verdict("wrong", f"the launcher rejects your call{_where(e)}: {e}") from None
        raise Verdict("wrong", f"your code raised {type(e).__name__}: {e}{_where(e)}") from None
    except Exception as e:  # noqa: BLE001 - the learner's bug is reported, not raised
        raise Verdict("wrong", f"your code raised {type(e).__name__}: {e}{_where(e)}") from None


def learner_answer(fn, *args, **kwargs):
    """:func:`learner_call` for a function whose result is the answer: ``None`` (a body without a
    ``return`` yet) is ``not yet``."""
    answer = learner_call(fn, *args, **kwargs)
    if answer is None:
        raise Verdict("not yet", f"{getattr(fn, '__name__', 'your function')} returned None: finish it "
                                 "with a return statement")
    return answer


_PACKAGE = str(Path(__file__).resolve().parents[1])
_LESSONS = str(Path(__file__).resolve().parent)


def _raised_by_the_package(err: BaseException) -> bool:
    """Whether ``err`` was raised by a hisparse-numba check (not by the learner or NumPy)."""
    last = traceback.extract_tb(err.__traceback__)[-1].filename
    return last.startswith(_PACKAGE) and not last.startswith(_LESSONS)


def launcher_says(run, what: str = "the launcher rejects it"):
    """Run a launcher call built from the learner's answer: its ``ValueError``/``TypeError`` is the
    launcher's rejection (sglang's text), reported as such."""
    try:
        return run()
    except (ValueError, TypeError) as e:
        raise Verdict("wrong", f"{what}: {e}") from None


def three_arrays(answer, name: str):
    """``answer`` unpacked as ``(miss_src, miss_dst, miss_count)``, or a wrong verdict naming it."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        kind = f"a {type(answer).__name__}" + (f" of {len(answer)} items"
                                               if isinstance(answer, (tuple, list)) else "")
        wrong(f"{name} returned {kind}; it must return three arrays (miss_src, miss_dst, miss_count)")
    for key, a in zip(PLAN_KEYS, answer):
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            wrong(f"{name}'s {key} is a {type(a).__name__}, not an array")
    return tuple(answer)


# ---------------------------------------------------------------------------------------------
# Single-step problems (load_cache_to_device_buffer_mla).

PLAN_KEYS = ("miss_src", "miss_dst", "miss_count")
STATE_KEYS = ("top_k_device_locs", "device_buffer_tokens", "lru_slots", "device_buffer")


def miss_slots_and_lru(problem: dict, row: int = 0):
    """``(slots the misses of batch row ``row`` take, in lane order; lru_slots after)``,
    from the NumPy reference run on a copy of ``problem``."""
    p = copy_problem(problem)
    batch, k = p["top_k_tokens"].shape
    p["miss_src"] = np.full((batch, k), -1, np.int64)
    p["miss_dst"] = np.full((batch, k), -1, np.int32)
    p["miss_count"] = np.zeros(batch, np.int32)
    load_cache_to_device_buffer_mla_reference(**p)
    rid = int(p["req_pool_indices"][row])
    h = p["hot_buffer_size"]
    row_of_slot = {int(r): s for s, r in enumerate(p["device_buffer_locs"][rid, :h])}
    dst = p["miss_dst"][row, :p["miss_count"][row]]
    return [row_of_slot[int(d)] for d in dst], p["lru_slots"][rid, :h].tolist()


def small_problem(seed: int = 0, *, batch: int = 3, num_top_k: int = 8, hot_buffer_size: int = 16,
                  num_real: int | None = None, fast_rows: int = 1):
    """A valid single-step problem (NumPy arrays, no plan): ``batch`` rows, the last real row on
    the fast path, the others on the long path with misses."""
    rng = np.random.default_rng(seed)
    return make_swap_in_problem(rng, batch=batch, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
                                num_real=num_real, fast_rows=fast_rows, record_plan=False, block_size=32,
                                max_extra=4 * hot_buffer_size)


def run_single_step(problem, miss_src, miss_dst, miss_count):
    """Run the kernel (on device copies, with the given plan arrays) and the reference (on NumPy
    copies of them). Returns ``(got, want)``: dicts of NumPy arrays after the call."""
    d = to_device_problem(problem)
    d.update(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)
    want = copy_problem(problem)
    want.update({k: (None if v is None else device.to_host(v))
                 for k, v in zip(PLAN_KEYS, (miss_src, miss_dst, miss_count))})
    load_cache_to_device_buffer_mla_reference(**want)
    load_cache_to_device_buffer_mla(**d)
    device.synchronize()
    return to_host_problem(d), want


def next_step(after, seed: int = 1):
    """The problem of the next decode step, given the (host) problem after a swap-in: the slot
    tables and LRU order carry over, long rows grow by one token and select new positions."""
    p = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in after.items()}
    p.update(miss_src=None, miss_dst=None, miss_count=None)
    rng = np.random.default_rng(seed)
    for _ in range(20):  # a random query can need more non-resident positions than exist
        try:
            q = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
            return new_queries(rng, q, grow=True)
        except ValueError:
            continue
    raise RuntimeError("could not draw a valid next step")


def same(got, want, keys=STATE_KEYS + PLAN_KEYS) -> bool:
    """Byte equality of the named arrays."""
    return all(np.array_equal(np.asarray(got[k]).view(np.uint8), np.asarray(want[k]).view(np.uint8))
               for k in keys if want.get(k) is not None)


def live_entries(plan):
    """Per batch row, the recorded ``(src, dst)`` pairs below ``miss_count`` (entries past the
    count are whatever an earlier step left there)."""
    src, dst, cnt = (np.asarray(device.to_host(plan[k])) for k in PLAN_KEYS)
    return [list(zip(src[b, :cnt[b]].tolist(), dst[b, :cnt[b]].tolist())) for b in range(cnt.shape[0])]


# ---------------------------------------------------------------------------------------------
# Speculative problems (load_cache_to_device_buffer_spec_mla).


def spec_problem(seed: int = 0, *, batch: int = 2, steps: int = 2, top_k: int = 8, hot: int = 16,
                 tail: int = 4, prefix: int = 48, num_real: int | None = None, state_steps=None,
                 record: bool = False):
    """Launcher keywords (device arrays) of a small speculative call with a selection set.

    Row ``b`` step ``s`` has ``seq_len = prefix + s + 1`` and selects ``top_k`` distinct positions
    below ``prefix``: about half hot (``< hot``), the rest host misses; step ``s > 0`` repeats half
    of step 0's positions (cross-step duplicates). ``state_steps`` sizes the state for another
    number of steps than the selection has."""
    rng = np.random.default_rng(seed)
    kw = make_spec_problem(batch=batch, steps=state_steps or steps, top_k=top_k, hot=hot, tail=tail,
                           record=False, seed=seed, max_positions=4 * (hot + steps * top_k) + prefix)
    xp = device.xp
    if (state_steps or steps) != steps:
        kw["top_k_tokens"] = xp.full((batch, steps, top_k), -1, dtype=xp.int32)
        kw["top_k_device_locs"] = xp.full((batch, steps, top_k), -1, dtype=xp.int32)
        kw["seq_lens"] = xp.zeros(batch * steps, dtype=xp.int32)
    tokens = np.zeros((batch, steps, top_k), np.int32)
    for b in range(batch):
        first = np.concatenate([rng.choice(hot, top_k // 2, replace=False),
                                rng.choice(np.arange(hot, prefix), top_k - top_k // 2, replace=False)])
        tokens[b, 0] = rng.permutation(first)
        for s in range(1, steps):
            keep = rng.choice(first, top_k // 2, replace=False)
            rest = rng.choice(np.setdiff1d(np.arange(prefix), keep), top_k - top_k // 2, replace=False)
            tokens[b, s] = rng.permutation(np.concatenate([keep, rest]))
    lens = np.array([[prefix + s + 1 for s in range(steps)] for _ in range(batch)])
    set_selection(kw, tokens, lens, num_real if num_real is not None else batch)
    if record:
        kw["miss_src"], kw["miss_dst"], kw["miss_count"] = alloc_miss_plan(batch, steps, top_k)
    return kw


LAUNCH_KEYWORDS = ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs",
                   "host_cache", "device_buffer", "top_k_device_locs", "req_pool_indices",
                   "seq_lens", "state", "num_real_reqs", "miss_src", "miss_dst", "miss_count")


def launch_spec_unchecked(kw) -> None:
    """Launch the speculative swap kernel WITHOUT ``check_speculative``: the same arguments as
    ``load_cache_to_device_buffer_spec_mla`` passes, for lessons that show what the checks
    prevent. Never use it elsewhere."""
    state = kw["state"]
    batch, steps, top_k = (int(x) for x in kw["top_k_tokens"].shape)
    hot = int(state.cache_policy.shape[1])
    call = spec.SpecCall(batch=batch, steps=steps, top_k=top_k, hot=hot,
                         tail=int(kw["device_buffer_tokens"].shape[1]) - hot,
                         num_requests=int(state.scratch_locs.shape[0]),
                         capacity=int(state.scratch_locs.shape[1]),
                         item_size_bytes=int(kw["host_cache"].strides[0]),
                         record=kw.get("miss_src") is not None,
                         **{k: kw.get(k) for k in LAUNCH_KEYWORDS})
    spec.launch_unchecked(call)
    device.synchronize()


def run_speculative(kw):
    """Launcher on ``kw`` and reference on a host copy: ``(got, want)`` snapshots."""
    return run_kernel_and_reference(kw)


# ---------------------------------------------------------------------------------------------
# Guarded arenas: the silent damage made visible in both worlds.


def guarded(rows: int, guard_rows: int, *tail, dtype, fill=-1):
    """``(arena, view)``: an arena of ``rows + guard_rows`` rows filled with ``fill``, and its first
    ``rows`` rows, handed to a call as if they were the whole buffer. A write past the view lands
    in the arena's guard rows (memory the lesson owns) in the simulator and on a GPU alike."""
    arena = device.xp.full((rows + guard_rows, *tail), fill, dtype=dtype)
    return arena, arena[:rows]


def sglang_view(arena, batch: int, num_top_k: int, row_stride: int):
    """``arena`` (a 1-D buffer) addressed the way sglang's kernels address a plan: one base
    pointer and one row stride in elements, entry ``(b, m)`` at element ``b * row_stride + m``.
    A ``[batch, num_top_k]`` view; with ``row_stride < num_top_k`` its rows overlap. The arena
    must hold ``(batch - 1) * row_stride + num_top_k`` elements."""
    need = (batch - 1) * row_stride + num_top_k
    if arena.ndim != 1 or arena.shape[0] < need:
        raise ValueError(f"the arena must be 1-D with >= {need} elements, got shape {tuple(arena.shape)}")
    item = arena.itemsize
    return device.xp.lib.stride_tricks.as_strided(arena, shape=(batch, num_top_k),
                                                  strides=(row_stride * item, item))


def changed_guard(arena, rows: int, fill=-1) -> list[int]:
    """Indices (flattened past the first ``rows`` rows) of the guard entries that no longer hold
    ``fill``: what a call wrote outside its buffer."""
    guard = np.asarray(device.to_host(arena))[rows:].reshape(-1)
    return np.flatnonzero(guard != fill).tolist()


# ---------------------------------------------------------------------------------------------
# Figures.


def figure(width: float = 7.0, height: float = 2.4, ncols: int = 1, nrows: int = 1):
    """A matplotlib figure and its axes (a flat list); :func:`show` puts it into the notebook."""
    import matplotlib

    if not _in_notebook():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    return fig, list(axes.reshape(-1))


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def show(fig) -> None:
    """Show ``fig`` once in the notebook as a PNG, and close it so that it is not drawn twice.

    The PNG is rendered here (as matplotlib's inline backend renders it) and published as the
    cell's ``image/png`` output, so it shows whatever backend the kernel runs: inline in
    JupyterLab, ``Agg`` in a process that set ``MPLBACKEND=Agg``, on a GPU or in the simulator.
    Outside IPython nothing is shown."""
    import matplotlib.pyplot as plt

    try:
        fig.tight_layout()
        if _in_notebook():
            from IPython.core.pylabtools import print_figure
            from IPython.display import display

            display({"image/png": print_figure(fig, "png"), "text/plain": repr(fig)}, raw=True)
    finally:
        plt.close(fig)


def draw_grid(ax, values, *, colors=None, title: str = "", row_labels=None, col_labels=None,
              annotate: bool = True, cmap_colors=("#f2f2f2", "#8fbce6", "#e8604c", "#7ccf7c", "#f5c35a")):
    """Draw a 2-D integer grid cell by cell. ``colors`` (same shape, small ints) picks each cell's
    colour from ``cmap_colors``; ``values`` are written into the cells when ``annotate``."""
    from matplotlib.colors import ListedColormap

    values = np.atleast_2d(np.asarray(values))
    colors = np.zeros(values.shape, int) if colors is None else np.atleast_2d(np.asarray(colors))
    ax.imshow(colors, cmap=ListedColormap(cmap_colors), vmin=0, vmax=len(cmap_colors) - 1,
              aspect="auto", interpolation="nearest")
    if annotate and values.size <= 400:
        for (r, c), v in np.ndenumerate(values):
            ax.text(c, r, str(v), ha="center", va="center", fontsize=7)
    ax.set_xticks(np.arange(values.shape[1]) - 0.5, minor=True)
    ax.set_yticks(np.arange(values.shape[0]) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.set_yticks(range(values.shape[0]))
    ax.set_yticklabels(row_labels if row_labels is not None else range(values.shape[0]))
    if col_labels is not None:
        ax.set_xticks(range(values.shape[1]))
        ax.set_xticklabels(col_labels, fontsize=7)
    ax.set_title(wrap_title(ax, title), fontsize=9)


def wrap_title(ax, title: str) -> str:
    """``title`` broken into lines that fit the width of ``ax``'s figure."""
    import textwrap

    return "\n".join(textwrap.wrap(title, max(30, int(ax.figure.get_figwidth() * 11))))


def draw_guarded_row(arena, owned: int, label: str, title: str = "", fill=-1) -> None:
    """A 1-D arena as one row of cells: the ``owned`` cells the caller allocated (blue), then the
    guard cells (grey, red where something wrote into them)."""
    a = np.asarray(device.to_host(arena)).reshape(1, -1)
    colors = np.zeros(a.shape, int)
    colors[0, :owned] = 1
    colors[0, owned:][a[0, owned:] != fill] = 2
    fig, (ax,) = figure(min(max(6.0, 1.0 + 0.6 * a.shape[1]), 10), 1.6)
    draw_grid(ax, a, colors=colors, row_labels=[label],
              col_labels=[f"[{i}]" + ("" if i < owned else "\nguard") for i in range(a.shape[1])],
              title=title or "blue: the buffer the caller allocated; red: writes past it, into the next allocation")
    show(fig)
