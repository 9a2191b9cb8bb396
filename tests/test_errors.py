"""The error catalogue covers every message the package raises, and every entry has a lesson."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import hisparse_numba
from hisparse_numba import errors

PACKAGE = Path(hisparse_numba.__file__).resolve().parent
LESSONS = Path(__file__).resolve().parents[1] / "lessons"
RAISERS = {"fail", "ValueError", "RuntimeError", "TypeError"}
# Benchmarks, lesson helpers and the parity check raise RuntimeError for their own result checks ("expected N
# misses"), not for a caller's mistake: there only fail()/ValueError count.
SELF_CHECK_DIRS = {"bench", "lessons", "parity"}
SAMPLE = "7"  # what each {placeholder} of a raise site becomes in the rendered message
PREFIX = "\0prefix\0"  # a check's ``prefix`` argument: rendered once per prefix the package passes
PREFIXES = ("", "kv-canary: ")


def _constants(tree) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments (messages kept in constants)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _render(node, constants):
    """The message a string literal / f-string / constant produces, placeholders -> SAMPLE."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value.value, ast.Name) and value.value.id in constants:
                parts.append(constants[value.value.id])
            elif isinstance(value.value, ast.Name) and value.value.id == "prefix":
                parts.append(PREFIX)
            else:
                parts.append(SAMPLE)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _render(node.left, constants), _render(node.right, constants)
        if left is not None and right is not None:
            return left + right
    return None


def raised_messages() -> list[tuple[str, str]]:
    """``(where, message)`` for every message the package can raise.

    Sources: the first argument of ``fail``/``ValueError``/``RuntimeError``/``TypeError`` (a
    ``{prefix}`` in it, a shared check's message prefix, once per prefix in ``PREFIXES``),
    keyword arguments named ``*_message`` (messages handed to a shared check), the returns
    of ``*_message`` functions, the lambdas listed in ``raise_first(verdict, [...])`` and module
    constants named ``*MESSAGE``. Arguments that are
    only a variable (``fail(message)``) are covered at their origin.
    """
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        raisers = {"fail", "ValueError"} if path.parent.name in SELF_CHECK_DIRS else RAISERS
        tree = ast.parse(path.read_text())
        constants = _constants(tree)
        where = str(path.relative_to(PACKAGE))
        nodes = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in raisers and node.args:
                    nodes.append((node.lineno, node.args[0]))
                nodes.extend((node.lineno, kw.value) for kw in node.keywords
                             if kw.arg and kw.arg.endswith("_message"))
                if name == "raise_first" and len(node.args) > 1 and isinstance(node.args[1], ast.List):
                    nodes.extend((m.lineno, m.body) for m in node.args[1].elts if isinstance(m, ast.Lambda))
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("_message"):
                nodes.extend((r.lineno, r.value) for r in ast.walk(node)
                             if isinstance(r, ast.Return) and r.value is not None)
        for name, text in constants.items():
            if name.endswith("MESSAGE"):
                found.append((f"{where}:{name}", text))
        for lineno, arg in nodes:
            text = _render(arg, constants)
            if text is None or text.strip() in ("", SAMPLE):
                continue
            found.extend((f"{where}:{lineno}", text.replace(PREFIX, p)) for p in dict.fromkeys(
                PREFIXES if PREFIX in text else ("",)))
    return found


MESSAGES = raised_messages()


def test_scan_finds_the_known_raise_sites():
    texts = [m for _, m in MESSAGES]
    assert "The pointers must be multiple of 16 bytes." in texts
    assert any(t.startswith("hot_buffer_size (7) must be >= num_top_k (7)") for t in texts)
    assert len(MESSAGES) > 50


@pytest.mark.parametrize("where,message", MESSAGES, ids=[w for w, _ in MESSAGES])
def test_every_raised_message_has_an_entry(where, message):
    assert errors.explain(message), f"{where}: no catalogue entry matches {message!r}"


def lesson_file(lesson_id: str):
    return sorted(LESSONS.glob(f"{lesson_id}-*.ipynb"))


@pytest.mark.parametrize("entry", errors.CATALOGUE, ids=[e.pattern[:60] for e in errors.CATALOGUE])
def test_every_entry_has_a_lesson_and_an_origin(entry):
    assert lesson_file(entry.lesson), f"lesson {entry.lesson} does not exist for {entry.pattern!r}"
    assert entry.origin in (errors.SGLANG, errors.OURS, errors.NUMBA)
    assert entry.cause and entry.fix


def test_every_entry_is_raised_somewhere():
    """No stale entries: each pattern matches a raise site (numba's warning is numba's own)."""
    texts = [m for _, m in MESSAGES]
    for entry in errors.CATALOGUE:
        if entry.origin == errors.NUMBA:
            continue
        assert any(entry.regex().search(t) for t in texts), f"no raise site for {entry.pattern!r}"


def test_patterns_are_distinct():
    patterns = [e.pattern for e in errors.CATALOGUE]
    assert len(patterns) == len(set(patterns))


def test_specific_entries_win_over_generic_ones():
    best = errors.explain("kv-canary: req_pool_indices must have dtype int64, got shape (3,) int32")[0]
    assert best.pattern.startswith("kv-canary: {name} must have dtype")
    best = errors.explain("speculative miss_count must have shape [batch].")[0]
    assert best.pattern.startswith("speculative")
    best = errors.explain("ValueError: top_k_tokens must have dtype int32, got shape (2, 4) int64")[0]
    assert best.pattern == "{name} must have dtype {dtype}, got {got}"


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def _real_messages():
    """Each lesson's error, produced by really calling the package (validation only)."""
    from hisparse_numba.checks import check_item_copy
    from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem
    from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla_reference
    from hisparse_numba.kv_canary.examples import allocate_plans, plan_problem
    from hisparse_numba.kv_canary.plan import launch_canary_plan_kernels_reference

    out = []
    p = make_swap_in_problem(np.random.default_rng(0), batch=2, num_top_k=4, hot_buffer_size=8)
    p["hot_buffer_size"] = 2
    out.append(("09", _message(load_cache_to_device_buffer_mla_reference, **p)))
    out.append(("10", _message(check_item_copy, 584)))
    out.append(("11", "NumbaPerformanceWarning: Host array used in CUDA kernel will incur copy "
                      "overhead to/from device."))

    def plan(problem, verify_capacity, write_capacity):
        vp, wp = allocate_plans(verify_capacity, write_capacity, host=True)
        return _message(launch_canary_plan_kernels_reference, verify_plan_out=vp, write_plan_out=wp,
                        verify_capacity=verify_capacity, **problem.inputs(to_device=False))

    problem = plan_problem([1, 2], [3, 5], [1, 1], max_reqs=3, max_seq_len=16, swa_window_size=4)
    out.append(("12", plan(problem, 16, 4)))
    problem = plan_problem([1, 2, 0], [3, 5, 0], [1, 1, 0], max_reqs=3, max_seq_len=16)
    out.append(("12", plan(problem, 16, 2)))
    return out


@pytest.mark.parametrize("lesson,message", _real_messages(),
                         ids=lambda x: x[:40] if isinstance(x, str) else None)
def test_explain_finds_each_lessons_entry_first(lesson, message):
    best = errors.explain(message)[0]
    assert best.lesson == lesson, (message, best.pattern)


def test_explain_verify_capacity_names_lesson_02():
    for fn in ("launch_canary_plan_kernels", "launch_canary_plan_kernels_reference"):
        msg = (f"kv-canary: {fn} verify_capacity=5 does not match "
               f"verify_plan_out.verify_slot_indices.shape[0]=4")
        assert errors.explain(msg)[0].lesson == "02"


def test_explain_cli_prints_the_entry(capsys):
    from hisparse_numba.cli import main

    assert main(["explain", "ValueError: hot_buffer_size (1024) must be >= num_top_k (2048)"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hot_buffer_size ({hot_buffer_size}) must be >= num_top_k ({num_top_k})")
    assert main(["explain", "something nobody raises"]) == 1


def test_numba_warning_text_is_numbas_own():
    """Lesson 11's message is quoted from Numba; keep it in step with the installed version."""
    from hisparse_numba import device  # noqa: F401  (chooses the world before numba is imported)
    import numba.cuda

    source = (Path(numba.cuda.__file__).parent / "cudadrv" / "devicearray.py").read_text()
    assert '"Host array used in CUDA kernel will incur "' in source
    assert '"copy overhead to/from device."' in source


def quoted_messages() -> dict[str, list[str]]:
    """The messages each lesson quotes at its top (``ValueError: ...`` lines in fenced blocks)."""
    import json
    import re

    out = {}
    for path in sorted(LESSONS.glob("[0-9][0-9]-*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        lines = []
        for cell in cells[:1]:
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL):
                lines += [l.strip() for l in block.splitlines()
                          if re.match(r"^\w+(Error|Warning): ", l.strip())]
        out[path.name[:2]] = lines
    return out


QUOTED = quoted_messages()


@pytest.mark.parametrize("lesson,message", [(k, m) for k, ms in QUOTED.items() for m in ms])
def test_explain_sends_each_quoted_message_to_its_lesson(lesson, message):
    """A lesson's own message leads to that lesson (or to another lesson quoting the same text)."""
    matches = errors.explain(message)
    assert matches, message
    best = matches[0]
    assert best.lesson == lesson or any(best.regex().search(m) for m in QUOTED.get(best.lesson, [])), \
        (lesson, message, best.pattern, best.lesson)


def test_my_lessons_quote_their_message():
    for lesson in ("09", "10", "11", "12"):
        assert QUOTED.get(lesson), f"lesson {lesson} quotes no message"


# ---------------------------------------------------------------------------- a forgiving explain

SEED_2 = ("kv-canary: launch_canary_plan_kernels_torch_reference verify_capacity=3 does not match "
          "verify_plan_out.verify_slot_indices.shape[0]=5")
VERIFY_CAPACITY = "kv-canary: {fn} verify_capacity={verify_capacity} does not match"
MISS_PLAN = "speculative miss_src/miss_dst must have shape [batch, >= steps * top_k]"

FORGIVEN = [
    # (pasted text, the start of the entry it must find first)
    (SEED_2, VERIFY_CAPACITY),
    (SEED_2.removeprefix("kv-canary: "), VERIFY_CAPACITY),
    ("ValueError: " + SEED_2, VERIFY_CAPACITY),
    ("RuntimeError: " + SEED_2 + ".", VERIFY_CAPACITY),
    ("verify_capacity=3 does not match ...", VERIFY_CAPACITY),
    ("verify_capacity=3 does not match \u2026", VERIFY_CAPACITY),
    ("verify_capacity=3 does not match verify_plan_out.verify_slot_indices.shape[0]=5", VERIFY_CAPACITY),
    ("does not match verify_plan_out.verify_slot_indices.sha", VERIFY_CAPACITY),
    ("The pointers must be multiple of 16 bytes", "The pointers must be multiple of 16 bytes."),
    ("  the pointers must be\n   multiple of 16 bytes  ", "The pointers must be multiple of 16 bytes."),
    ("`ValueError: hot_buffer_size (1024) must be >= num_top_k (2048)`", "hot_buffer_size ({hot_buffer_size})"),
    ("speculative miss_src must have shape [batch, >= steps * top_k].", MISS_PLAN),
    ("RuntimeError: speculative miss_dst must have shape [batch, >= steps * top_k]", MISS_PLAN),
    ("speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] (capacity 8192)", MISS_PLAN),
    ("speculative miss_src/miss_dst row strides differ.", "miss_src/miss_dst row strides must match."),
    ("speculative output must have shape [batch, steps, top_k].", "top_k_device_locs must have shape [batch, steps"),
    ("HiSparse MTP swap requires hot_buffer_size >= top_k >= 1024, 2-4 steps, and at most 8192 total "
     "occurrences.", "HiSparse speculative swap requires 2-4 steps"),
    ("HiSparse speculative swap requires positive steps/top-k and steps * top-k <= 8192, got 4 * 4096.",
     "speculative swap needs 0 < steps * top_k"),
    ("seq_lens must provide one length per request and MTP step.", "seq_lens must have shape [batch * steps]"),
    ("ring hash capacity must be a power of two.", "state.cache_index hash_size must be a power of two"),
    ("speculative scratch_state must contain one counter row and one miss-metadata row per request.",
     "state.scratch_state must have shape"),
    ("kv-canary: bs=9 exceeds write_req_capacity=4", "kv-canary: bs={bs} exceeds write_req_capacity"),
    ("bs=9 exceeds write_req_capacity=4", "kv-canary: bs={bs} exceeds write_req_capacity"),
]


@pytest.mark.parametrize("pasted,start", FORGIVEN, ids=[p[:50] for p, _ in FORGIVEN])
def test_explain_forgives_the_way_a_message_is_pasted(pasted, start):
    matches = errors.explain(pasted)
    assert matches, pasted
    assert matches[0].pattern.startswith(start), (pasted, matches[0].pattern)


def test_explain_reads_a_traceback_pasted_whole():
    traceback = f'''Traceback (most recent call last):
  File "/srv/sglang/python/sglang/srt/model_executor/forward_batch_info.py", line 812, in prepare
    launch_canary_plan_kernels(plan_input, verify_plan_out=vp, verify_capacity=cap)
  File "/srv/sglang/python/sglang/jit_kernel/kv_canary/plan_ref.py", line 41, in launch_canary_plan_kernels_torch_reference
    raise ValueError(
ValueError: {SEED_2}
'''
    assert errors.explain(traceback)[0].pattern.startswith(VERIFY_CAPACITY)
    pytest_style = ("    def test_plan():\n>       launch(...)\nE       ValueError: The pointers must be "
                    "multiple of 16 bytes.\n\ntests/test_x.py:12: ValueError")
    assert errors.explain(pytest_style)[0].lesson == "10"


def test_a_chained_traceback_is_read_from_its_last_exception():
    text = ("Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n  File \"b.py\", line 2\n"
            "ValueError: miss_count must be int32.\n")
    assert errors.explain(text)[0].pattern == "miss_count must be int32."


def test_an_exact_prefix_still_beats_a_generic_entry():
    """Stripping ``kv-canary:`` must not let the kv-canary entry outrank the generic one."""
    best = errors.explain("top_k_tokens must have dtype int32, got shape (2, 4) int64")[0]
    assert best.pattern == "{name} must have dtype {dtype}, got {got}"
    best = errors.explain("kv-canary: req_pool_indices must have dtype int64, got (3,) int32")[0]
    assert best.pattern.startswith("kv-canary: {name} must have dtype")


def test_short_or_unrelated_pastes_find_nothing():
    for text in ("must", "got 3", "completely unrelated words here", "", "   "):
        assert errors.explain(text) == [], text


def test_no_match_suggests_the_nearest_entries():
    assert errors.explain("the pointer must be multiples of 16 byte") == []
    nearest = errors.suggest("the pointer must be multiples of 16 byte")
    assert nearest[0].pattern == "The pointers must be multiple of 16 bytes."
    text, status = errors.explain_report("the pointer must be multiples of 16 byte")
    assert status == 1
    assert "did you mean" in text and "The pointers must be multiple of 16 bytes." in text
    text, status = errors.explain_report(SEED_2)
    assert status == 0 and text.startswith(VERIFY_CAPACITY)


def test_headline_1_names_lessons_01_and_08():
    entry = errors.explain("speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] "
                           "(capacity 8192).")[0]
    assert entry.lessons == ("01", "08")
    assert "lessons: 01, 08" in entry.render()


def test_variants_are_sglangs_other_texts_for_an_entry_with_a_lesson():
    with_variants = [e for e in errors.CATALOGUE if e.variants]
    assert len(with_variants) >= 15
    for key in list(errors.VARIANTS) + list(errors.ALSO):
        assert sum(e.pattern.startswith(key) for e in errors.CATALOGUE) == 1, key
    for entry in with_variants:
        for variant in entry.variants:
            assert errors.explain(variant)[0] is entry, variant


def test_lesson_ids_are_the_lessons():
    """00-13 and 16 teach one error each; 14 (kernel puzzles) teaches none."""
    ids = {l for e in errors.CATALOGUE for l in e.lessons}
    assert ids <= {f"{i:02d}" for i in range(14)} | {"16"}
    for lesson in ids:
        assert lesson_file(lesson), lesson
