"""The mutation sweep: start from a valid call, change one thing, and judge what the call does.

A hostile or careless caller gets one of two answers, never a third:

* a clean rejection: ``ValueError`` (or ``TypeError`` for a wrong Python type) whose message names
  the argument, raised before anything is written, so every byte of every argument's root buffer
  (the array a view was cut from) is unchanged; or
* a result equal to the NumPy reference's on the same (mutated) inputs.

Everything else is a finding, by kind: ``out-of-bounds`` (the simulator's ``IndexError`` from inside
a kernel), ``crash`` (any other exception), ``hang`` (no answer within the time limit),
``unnamed`` (a rejection that does not name the argument), ``written`` (a rejection after bytes
changed), ``accepted-invalid`` (a documented-invalid input accepted), ``wrong`` (accepted, but not
what the reference computes), ``reference-rejects`` (the launcher accepted what the reference
refuses).

An entry point describes one public function: how to build a valid call (NumPy on the host), how to
move it to the device, how to call it, and how to judge an accepted call. A mutation changes the
device-side call in place and says which argument it touched and whether the input is documented as
invalid (``must_reject``). Generic mutations (dtype, ndim, layout, axes, Python types, scalars) come
from :func:`array_mutations` and :func:`scalar_mutations`; value mutations (out-of-range ids,
duplicates, aliasing, corrupted state) are written per family; ``wide.py`` adds, for every array of
the call and every field of its state, plan and context objects, negative, zero and overlapping
strides, aliasing between arguments, dtypes and values at and past each bound.

The default run judges a seeded sample of each entry point's mutations (``EntryPoint.budget``,
stratified by ``Mutation.group``); ``HISPARSE_NUMBA_SWEEP=full`` (or ``python -m
tests.sweep.test_sweep --full``) judges every one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hisparse_numba import device

xp = device.xp
# A call that needs a new specialisation compiles first: on a GPU the speculative swap kernel takes
# about 40 s (longer under compute-sanitizer), so a GPU call gets longer before it counts as a hang.
CALL_SECONDS = 180 if device.backend() == "cuda" else 30


@dataclass
class Mutation:
    name: str
    argument: str                       # the argument a rejection must name
    apply: Callable[[dict], None]       # changes the device-side call in place
    must_reject: bool = False           # documented invalid: accepting it is a finding
    names: tuple = ()                   # other words that count as naming the argument
    group: str = "core"                 # core, layout, value or alias (wide.py): the sample's strata


@dataclass
class EntryPoint:
    name: str
    build: Callable[[np.random.Generator], dict]   # a valid call, NumPy arrays on the host
    call: Callable[[dict], Any]                    # calls the public function on device arrays
    mutations: Callable[[dict], list]              # mutations of a built (host) call
    judge: Callable[[dict, dict, Any], str | None] | None = None
    # judge(host_call_before, device_call_after, result) -> None when right, else why it is wrong
    to_device: Callable[[dict], dict] | None = None
    budget: int | None = None                      # mutated calls of the default (sampled) run


@dataclass
class Finding:
    entry: str
    mutation: str
    kind: str
    detail: str


@dataclass
class Report:
    entry: str
    calls: int = 0
    outcomes: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return f"{self.entry}: {self.calls} mutated calls ({parts})"


class CallTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise CallTimeout in the main thread after ``seconds`` (a spinning kernel or reference)."""
    def on_alarm(signum, frame):
        raise CallTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------
# Moving calls between host and device, and snapshots of every byte a call could touch.

def is_array(v) -> bool:
    return isinstance(v, np.ndarray) or (xp is not np and isinstance(v, xp.ndarray))


def to_device_value(key, v):
    if key == "host_cache" and isinstance(v, np.ndarray):
        h = device.host_cache_array(v.shape, v.dtype)
        h[...] = v
        return h
    if isinstance(v, np.ndarray):
        return device.to_device(v)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(to_device_value(f, x) for f, x in zip(v._fields, v)))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.replace(v, **{f.name: to_device_value(f.name, getattr(v, f.name))
                                         for f in dataclasses.fields(v) if f.init})
    return v


def to_host_value(v):
    """A host copy of a call value for the reference: arrays C-contiguous (views, broadcasts and
    aliases become buffers of their own, with the same values)."""
    if is_array(v):
        return np.ascontiguousarray(device.to_host(v))
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(to_host_value(x) for x in v))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.replace(v, **{f.name: to_host_value(getattr(v, f.name))
                                         for f in dataclasses.fields(v) if f.init})
    return v


def default_to_device(call: dict) -> dict:
    return {k: to_device_value(k, v) for k, v in call.items()}


def to_host_call(call: dict) -> dict:
    return {k: to_host_value(v) for k, v in call.items()}


def arrays_of(value, path=""):
    """(path, array) for every array inside a call value (NamedTuples and dataclasses too)."""
    if is_array(value):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from arrays_of(v, f"{path}.{k}" if path else k)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for f, v in zip(value._fields, value):
            yield from arrays_of(v, f"{path}.{f}")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from arrays_of(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from arrays_of(v, f"{path}[{i}]")


def raw_bytes(a: np.ndarray) -> np.ndarray:
    if a.dtype == object:       # references, not bytes: compare what they refer to
        return np.frombuffer(repr(a.tolist()).encode(), dtype=np.uint8)
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


_ROOTS: dict = {}   # id(view) -> (view, root) for views whose .base does not lead to their buffer


def keep_root(view, base):
    """Record ``base`` as the buffer behind ``view`` (an ``as_strided`` view, whose ``base`` is not
    an array), so that the byte snapshot compares the whole buffer; returns ``view``."""
    _ROOTS[id(view)] = (view, root(base))
    return view


def root(a):
    while True:
        if id(a) in _ROOTS and _ROOTS[id(a)][0] is a:
            a = _ROOTS[id(a)][1]
        elif getattr(a, "base", None) is not None and is_array(a.base):
            a = a.base
        else:
            return a


def snapshot(call: dict) -> list:
    """A host copy of the root buffer of every array in the call (each root once)."""
    seen, snap = set(), []
    for path, a in arrays_of(call):
        r = root(a)
        if id(r) in seen:
            continue
        seen.add(id(r))
        snap.append((path, r, device.to_host(r)))
    return snap


def changed(snap: list) -> list:
    device.synchronize()
    return [path for path, r, before in snap
            if not np.array_equal(raw_bytes(device.to_host(r)), raw_bytes(before))]


# ---------------------------------------------------------------------------------------------
# Judging one mutated call.

def names_argument(message: str, mutation: Mutation) -> bool:
    words = (mutation.argument, *mutation.names)
    leaf = mutation.argument.split(".")[-1]
    return any(w and w in message for w in (*words, leaf))


def judge_call(entry: EntryPoint, host_call: dict, mutation: Mutation) -> tuple[str, str]:
    """Run one mutated call; return (outcome, detail). ``ok-*`` outcomes are not findings."""
    to_dev = entry.to_device or default_to_device
    _ROOTS.clear()
    call = to_dev(host_call)
    try:
        mutation.apply(call)
    except Exception as e:  # noqa: BLE001 - a broken mutation is the sweep's own bug
        return "sweep-error", f"mutation failed: {type(e).__name__}: {e}"
    before_host = to_host_call(call)
    snap = snapshot(call)
    try:
        with time_limit(CALL_SECONDS):
            result = entry.call(call)
            device.synchronize()
    except CallTimeout as e:
        return "hang", str(e)
    except (ValueError, TypeError) as e:
        message = str(e)
        touched = changed(snap)
        if touched:
            return "written", f"{type(e).__name__}: {message[:160]} but changed {touched}"
        if not names_argument(message, mutation):
            return "unnamed", f"{type(e).__name__}: {message[:200]}"
        return "ok-rejected", ""
    except IndexError as e:
        return "out-of-bounds", f"{e}"[:240]
    except Exception as e:  # noqa: BLE001
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return "crash", f"{type(e).__name__}: {e} ({tb.filename.split('/')[-1]}:{tb.lineno})"[:240]
    if mutation.must_reject:
        return "accepted-invalid", "the call returned normally"
    if entry.judge is None:
        return "ok-accepted", ""
    try:
        with time_limit(CALL_SECONDS):
            why = entry.judge(before_host, call, result)
    except CallTimeout as e:
        return "hang", f"reference: {e}"
    except (ValueError, TypeError) as e:
        return "reference-rejects", f"{type(e).__name__}: {e}"[:240]
    except Exception as e:  # noqa: BLE001
        return "crash", f"reference: {type(e).__name__}: {e}"[:240]
    return ("wrong", why) if why else ("ok-accepted", "")


def full_sweep() -> bool:
    """``HISPARSE_NUMBA_SWEEP=full``: every mutation, not the default run's seeded sample."""
    return os.environ.get("HISPARSE_NUMBA_SWEEP", "").lower() == "full"


def sample(mutations: list, budget: int | None, seed: int = 0) -> list:
    """A seeded sample of ``budget`` mutations, stratified by group (each group's share follows
    its size, and every group keeps at least a few), in the original order; all of them when
    ``budget`` is None or not smaller."""
    if budget is None or len(mutations) <= budget:
        return list(mutations)
    rng = np.random.default_rng(seed)
    groups: dict = {}
    for i, m in enumerate(mutations):
        groups.setdefault(m.group, []).append(i)
    keep = []
    for indices in groups.values():
        share = max(min(len(indices), 8), round(budget * len(indices) / len(mutations)))
        keep += rng.choice(indices, size=min(share, len(indices)), replace=False).tolist()
    return [mutations[i] for i in sorted(keep)]


def sweep(entry: EntryPoint, seed: int = 0, full: bool | None = None) -> Report:
    """Judge every mutation of ``entry`` (``full``, or ``HISPARSE_NUMBA_SWEEP=full``), else the
    seeded sample of ``entry.budget`` of them."""
    rng = np.random.default_rng(seed)
    report = Report(entry.name)
    base = entry.build(rng)
    full = full_sweep() if full is None else full
    mutations = entry.mutations(base)
    for mutation in mutations if full else sample(mutations, entry.budget, seed):
        host_call = copy_call(base)
        outcome, detail = judge_call(entry, host_call, mutation)
        report.calls += 1
        report.outcomes[outcome] += 1
        if not outcome.startswith("ok-"):
            report.findings.append(Finding(entry.name, mutation.name, outcome, detail))
    return report


def copy_call(call: dict) -> dict:
    out = {}
    for k, v in call.items():
        if isinstance(v, np.ndarray):
            out[k] = v.copy()
        elif isinstance(v, tuple) and hasattr(v, "_fields"):
            out[k] = type(v)(*(x.copy() if isinstance(x, np.ndarray) else x for x in v))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            out[k] = dataclasses.replace(v, **{f.name: (getattr(v, f.name).copy()
                                                        if isinstance(getattr(v, f.name), np.ndarray)
                                                        else getattr(v, f.name))
                                               for f in dataclasses.fields(v) if f.init})
        else:
            out[k] = v
    return out


def compare_calls(expected: dict, got: dict) -> str | None:
    """None when every array of ``got`` (device) equals ``expected`` (host) byte for byte."""
    want = dict(arrays_of(expected))
    for path, a in arrays_of(got):
        if path not in want:
            continue
        g, w = device.to_host(a), want[path]
        if g.shape != w.shape or g.dtype != w.dtype or not np.array_equal(raw_bytes(g), raw_bytes(w)):
            return f"{path} differs from the reference"
    return None


def reference_judge(reference: Callable[..., Any]):
    """A judge that runs ``reference(**host_call)`` and compares every array."""
    def judge(host_call, device_call, result):
        reference(**host_call)
        return compare_calls(host_call, device_call)
    return judge


# ---------------------------------------------------------------------------------------------
# Generic mutations. ``get``/``put`` address a value by a dotted path: "state.cache_index".

def get(call: dict, path: str):
    head, *rest = path.split(".")
    v = call[head]
    for name in rest:
        v = getattr(v, name)
    return v


def put(call: dict, path: str, value) -> None:
    head, *rest = path.split(".")
    if not rest:
        call[head] = value
        return
    parent_path = ".".join([head, *rest[:-1]])
    parent = get(call, parent_path)
    if isinstance(parent, tuple) and hasattr(parent, "_fields"):
        new = parent._replace(**{rest[-1]: value})
    else:
        new = dataclasses.replace(parent, **{rest[-1]: value})
    put(call, parent_path, new)


def _setter(path, fn):
    def apply(call):
        put(call, path, fn(get(call, path)))
    return apply


OTHER_DTYPES = {np.int16: (np.int32,), np.int32: (np.int64, np.int16, np.float32, np.uint32),
                np.int64: (np.int32, np.float64, np.uint64), np.uint8: (np.int32,),
                np.float32: (np.float64, np.int32), np.uint64: (np.int64,)}


def _ops(v):
    """NumPy for host arrays (a mapped host pool on a GPU: the result is pageable memory, which
    the launchers must refuse), CuPy or the simulator's NumPy for device arrays."""
    return np if isinstance(v, np.ndarray) else xp


def array_mutations(path: str, a: np.ndarray, *, dtypes: tuple = (), optional: bool = False,
                    layout: bool = True, axes: bool = True, any_shape: bool = False,
                    names: tuple = ()) -> list[Mutation]:
    """Shape, dtype, layout and Python-type mutations of one array argument.

    ``dtypes`` are the accepted dtypes (empty: any dtype is accepted, so dtype changes are judged
    by the reference). Changing ndim (unless ``any_shape``: a byte pool), or passing a list, a
    scalar or a string, must be rejected.
    """
    out = []
    accepted = tuple(np.dtype(d) for d in dtypes)

    def m(name, fn, must_reject=False):
        out.append(Mutation(f"{path}: {name}", path, _setter(path, fn), must_reject, names))

    for d in OTHER_DTYPES.get(a.dtype.type, (np.int32,)):
        if np.dtype(d) not in accepted:
            m(f"dtype {np.dtype(d).name}", lambda v, d=d: v.astype(d), must_reject=bool(accepted))
    m("one more axis", lambda v: v[None], must_reject=not any_shape)
    if a.ndim >= 1:
        m("flattened" if a.ndim > 1 else "0-d", lambda v: v.reshape(-1) if v.ndim > 1 else v[0],
          must_reject=not any_shape)
    m("Python list", lambda v: v.tolist(), must_reject=True)
    m("string", lambda v: "not an array", must_reject=True)
    m("Python int", lambda v: 3, must_reject=True)
    if not optional:
        m("None", lambda v: None, must_reject=True)
    if layout and a.ndim >= 1 and a.shape[-1] >= 1:
        m("inner stride 2 (a strided view)", lambda v: xp.repeat(v, 2, axis=-1)[..., ::2])
        if a.ndim == 2:
            m("Fortran order", lambda v: xp.asfortranarray(v))
        m("an offset view (base not at the root's start)",
          lambda v: xp.concatenate([v.reshape(-1)[:1], v.reshape(-1)])[1:].reshape(v.shape))
    if axes and a.ndim >= 1:
        for ax in range(a.ndim):
            if a.shape[ax] > 0:
                m(f"axis {ax} empty", lambda v, ax=ax: _ops(v).take(v, _ops(v).arange(0), axis=ax))
            if a.shape[ax] > 1:
                m(f"axis {ax} one short",
                  lambda v, ax=ax: _ops(v).take(v, _ops(v).arange(v.shape[ax] - 1), axis=ax))
            m(f"axis {ax} one long", lambda v, ax=ax: _ops(v).concatenate(
                [v, _ops(v).take(v, _ops(v).arange(min(1, v.shape[ax])), axis=ax)], axis=ax)
                if v.shape[ax] else v)
    return out


def scalar_mutations(path: str, value, *, low=None, high=None, optional: bool = False,
                     names: tuple = (), extremes: bool = False) -> list[Mutation]:
    """Bad Python scalars: floats (even integral-looking ones), inf, NaN, strings, bools, None,
    values outside ``[low, high]``. An integer in range of another integer type is fine (judged).
    ``extremes``: also the int32 and int64 extremes, judged unless outside ``[low, high]`` (not for
    allocators: a size of 2^31 would allocate it)."""
    out = []

    def m(name, new, must_reject=True, group="core"):
        out.append(Mutation(f"{path}: {name}", path, lambda call, new=new: put(call, path, new),
                            must_reject, names, group))

    v = int(value)
    m("float with a fraction", v + 0.5)
    m("integral float", float(v))
    m("inf", math.inf)
    m("nan", math.nan)
    m("string", str(v))
    m("bool", True)
    m("list", [v])
    if not optional:
        m("None", None)
    m("numpy int64 (fine)", np.int64(v), must_reject=False)
    if low is not None:
        m(f"below {low}", int(low) - 1)
        m("very negative", -2**40)
    if high is not None:
        m(f"above {high}", int(high) + 1)
        m("huge", 2**62)
    for x in (2**31 - 1, 2**31, 2**63 - 1, -2**63) if extremes else ():
        m(f"int extreme {x}", x, (low is not None and x < low) or (high is not None and x > high), "value")
    return out


def value_mutation(path: str, name: str, fn: Callable[[Any], Any], *, must_reject=True,
                   names: tuple = ()) -> Mutation:
    """A value change of one argument: ``fn`` gets a NumPy copy and returns the new NumPy value,
    which goes back to the device in the argument's original array type."""
    def apply(call):
        new = np.asarray(fn(device.to_host(get(call, path))))
        put(call, path, to_device_value(path.split(".")[-1], new))
    return Mutation(f"{path}: {name}", path, apply, must_reject, names)


def alias(path_a: str, path_b: str, *, must_reject=True, names: tuple = ()) -> Mutation:
    """Pass argument ``path_a``'s buffer also as ``path_b`` (same shape and dtype needed)."""
    return Mutation(f"{path_b}: aliases {path_a}", path_b,
                    lambda call: put(call, path_b, get(call, path_a)), must_reject, names)


def format_findings(reports: list[Report], limit: int = 60) -> str:
    lines = [r.summary() for r in reports]
    findings = [f for r in reports for f in r.findings]
    for f in findings[:limit]:
        lines.append(f"  [{f.kind}] {f.entry} / {f.mutation}: {f.detail}")
    if len(findings) > limit:
        lines.append(f"  ... and {len(findings) - limit} more")
    return "\n".join(lines)
