"""The package's shape: floors, circles, sizes, documents that stay true.

* The import graph of ``hisparse_numba`` (imports at module level, inside functions, and modules
  named by string for ``importlib``) has no circle, and no import runs up a floor: the floors are
  the table of ``docs/architecture.md``.
* No package module is over 600 lines and no function over 120.
* No tracked file names a machine path, an issue number or a development session.
* Nothing shipped imports ``tests``.
* The checklists of ``docs/architecture.md`` and the shared-module table of ``docs/contributing.md``
  name files, registries and functions that exist, and every lesson has each file and registry
  entry the lesson checklist lists.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hisparse_numba"
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
CONTRIBUTING = (ROOT / "docs" / "contributing.md").read_text()
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 120


# --------------------------------------------------------------------------- the import graph
def package_modules() -> dict:
    """Dotted name relative to the package ('' for its __init__) -> path."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        if "notebooks" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = package_modules()


def _target(name: str) -> str | None:
    """The package module ``hisparse_numba.<name>`` (or the package holding it), relative."""
    name = name.removeprefix("hisparse_numba").removeprefix(".")
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def _from_import(module: str, is_package: bool, node: ast.ImportFrom) -> list:
    if node.level:
        base = module.split(".") if module else []
        base = base if is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        stem = ".".join(base + ([node.module] if node.module else []))
    elif node.module and node.module.split(".")[0] == "hisparse_numba":
        stem = node.module.removeprefix("hisparse_numba").removeprefix(".")
    else:
        return []
    found = []
    for alias in node.names:
        full = f"{stem}.{alias.name}" if stem else alias.name
        found.append(full if full in MODULES else stem)
    return found


def imports_of(module: str) -> list:
    """``(imported module, how)`` for every import of ``module``; how is 'type' for imports under
    ``if TYPE_CHECKING``, else 'runs' (module level, in a function, or a module named by string)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, how):
        for child in ast.iter_child_nodes(node):
            child_how = how
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                child_how = "type"
            if isinstance(child, ast.ImportFrom):
                out.extend((t, how) for t in _from_import(module, path.name == "__init__.py", child))
            elif isinstance(child, ast.Import):
                out.extend((a.name.removeprefix("hisparse_numba").removeprefix("."), how)
                           for a in child.names if a.name.split(".")[0] == "hisparse_numba")
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) \
                    and re.fullmatch(r"hisparse_numba(\.\w+)+", child.value):
                out.append((child.value, how))     # importlib.import_module by name
            visit(child, child_how)

    visit(tree, "runs")
    return [(_target(t), how) for t, how in out if _target(t) is not None and _target(t) != module]


GRAPH = {m: imports_of(m) for m in MODULES}


def floors() -> dict:
    """docs/architecture.md's floor table: module name prefix -> floor number."""
    table = ARCHITECTURE.split("## The floors", 1)[1].split("\n\n", 2)[1]
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            for name in re.findall(r"`([\w.]+)`", cells[2]):
                out[name] = int(cells[0])
    return out


FLOORS = floors()


def floor_of(module: str) -> int | None:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in FLOORS:
            return FLOORS[".".join(parts[:i])]
    return None


def test_the_floor_table_is_read():
    assert FLOORS["errors"] == 0 and FLOORS["device"] == 2 and FLOORS["cli"] == max(FLOORS.values())


def test_every_module_has_a_floor():
    assert [m for m in MODULES if m and floor_of(m) is None] == []


def test_the_package_init_imports_nothing_of_the_package():
    assert GRAPH[""] == []


def test_no_import_runs_up_a_floor():
    up = [f"{m} (floor {floor_of(m)}) imports {t} (floor {floor_of(t)})"
          for m in MODULES if m for t, how in GRAPH[m] if how == "runs" and t
          and floor_of(t) > floor_of(m)]
    assert up == []


def test_no_import_circle_even_through_type_only_imports():
    edges = {m: sorted({t for t, _ in GRAPH[m] if t}) for m in MODULES}
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def connect(v):     # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in edges:
        if v not in index:
            connect(v)
    assert circles == []


def test_only_device_imports_numba_cuda_and_nothing_shipped_imports_tests():
    numba_cuda = re.compile(r"^\s*(from numba import cuda|import numba\.cuda|from numba\.cuda)", re.M)
    tests = re.compile(r"^\s*(from tests\b|import tests\b)", re.M)
    texts = {m: p.read_text() for m, p in MODULES.items()}
    assert [m for m, t in texts.items() if m != "device" and numba_cuda.search(t)] == []
    assert [m for m, t in texts.items() if tests.search(t) or re.search(r"['\"]tests\.\w", t)] == []


# ----------------------------------------------------------------------------------- sizes
def test_no_module_is_over_600_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_120_lines():
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


# ------------------------------------------------------------------ facts, not history
_FORBIDDEN = re.compile("|".join([
    r"\bsessions? [0-9]",                 # a development session
    r"\bissues? [0-9]",                   # an issue number
    r"(?<![:{\w])#[0-9]{2}",               # a number after a hash sign, not a format spec (:#0...)
    "/wo" + "rk/", "/tm" + "p/hisparse", "/ro" + "ot/",   # this machine's paths
]), re.I)


def test_no_tracked_file_names_a_machine_path_an_issue_or_a_session():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.fail(f"git ls-files failed: {listed.stderr}")
    found = []
    for name in filter(None, listed.stdout.split("\0")):
        path = ROOT / name
        if not path.is_file() or path.suffix in (".png", ".svg", ".whl", ".gz"):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _FORBIDDEN.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert found == []


# -------------------------------------------------------------------- documents stay true
def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _registries(section: str) -> list:
    """``(module path, NAME)`` for every "`hisparse_numba/x.py`: `NAME`" a checklist line cites."""
    out = []
    for line in section.splitlines():
        m = re.match(r"- \[ \] `(hisparse_numba/[\w/]+\.py)`(?: and `[\w/.]+`)?: (.*)", line)
        if m:
            out += [(m.group(1), name) for name in re.findall(r"`([A-Z][A-Z_]+)`", m.group(2))]
    return out


def _module(path: str):
    return importlib.import_module(path.removesuffix(".py").removesuffix("/__init__").replace("/", "."))


def test_the_kernel_checklist_names_files_and_registries_that_exist():
    section = _section(ARCHITECTURE, "## To add a kernel")
    paths = [p for p in re.findall(r"`([\w./<>-]+/[\w./<>-]*)`", section) if "<" not in p]
    assert len(paths) >= 8
    assert [p for p in paths if not (ROOT / p).exists()] == []
    registries = _registries(section)
    assert {name for _, name in registries} >= {"FAMILIES", "LESSON_TASKS", "TEST_TASKS", "BENCHMARKS",
                                                "CATALOGUE"}
    assert [f"{p}: {n}" for p, n in registries if not hasattr(_module(p), n)] == []
    from hisparse_numba import compile_check

    for family in compile_check.FAMILIES:      # every family's examples compile its launchers
        assert callable(importlib.import_module(family).compile_examples)


LESSON_IDS = sorted(p.name[:2] for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))


def _lesson_paths(section: str, lesson: str) -> list:
    """The checklist's paths for ``lesson``: NN replaced, ``<name>`` matched by any name."""
    found = []
    for template in re.findall(r"`([\w./<>-]+/[\w./<>-]*)`", section):
        pattern = template.replace("NN", lesson).replace("<name>", "*")
        found.append((template, sorted(ROOT.glob(pattern))))
    return found


@pytest.mark.parametrize("lesson", LESSON_IDS)
def test_every_lesson_has_each_file_of_the_lesson_checklist(lesson):
    section = _section(ARCHITECTURE, "## To add a lesson")
    missing = [t for t, hits in _lesson_paths(section, lesson) if not hits and t != "docs/syllabus.md"]
    assert missing == []
    assert f"| {lesson} |" in (ROOT / "lessons" / "README.md").read_text()


def test_every_lesson_is_in_the_syllabus():
    """docs/syllabus.md names every lesson by its id."""
    syllabus = (ROOT / "docs" / "syllabus.md").read_text()
    assert [lesson for lesson in LESSON_IDS if not re.search(rf"\b{lesson}\b", syllabus)] == []


def test_every_lesson_that_teaches_an_error_has_instructor_notes_and_a_notebook():
    from hisparse_numba.errors import CATALOGUE

    taught = sorted({lesson for entry in CATALOGUE for lesson in entry.lessons if lesson.isdigit()})
    assert taught and set(taught) <= set(LESSON_IDS)
    pages = [ROOT / "docs" / "instructor-notes.md", *sorted((ROOT / "docs" / "instructors").glob("*.md"))]
    headings = [ln for page in pages for ln in page.read_text().splitlines() if ln.startswith("#")]
    assert [lesson for lesson in taught
            if not any(re.search(rf"\b{lesson}\b", h) for h in headings)] == []


def test_the_shared_module_table_of_contributing_names_what_exists():
    table = _section(CONTRIBUTING, "# Shared modules")
    missing, checked = [], 0
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        path = cells[0].strip("`")
        module = importlib.import_module("tests.conftest") if path == "tests/conftest.py" else _module(path)
        for name in re.findall(r"`([A-Za-z_]\w*)`", cells[1]):
            checked += 1
            if not hasattr(module, name):
                missing.append(f"{path}: {name}")
    assert checked > 50 and missing == []


FAMILY_PACKAGES = ("hisparse", "hisparse/single_step", "hisparse/speculative", "kv_canary")


@pytest.mark.parametrize("package", FAMILY_PACKAGES)
def test_each_family_init_is_a_file_map_of_its_package(package):
    """The package docstring names every file of the package, ``reference.py`` (where there is
    one) before any other."""
    folder = PACKAGE / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
    assert "in reading order" in doc
    named = re.findall(r"``(\w+\.py)``", doc.split("in reading order", 1)[1])
    files = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    assert [f for f in files if f not in named] == []
    if "reference.py" in files:
        assert named[0] == "reference.py"


def test_product_code_points_only_at_documents_that_ship():
    """Every ``docs/...`` page (and heading file) the package's code and messages name exists."""
    cited = {m for p in MODULES.values() for m in re.findall(r"\bdocs/[\w./-]+\.md", p.read_text())}
    assert cited and sorted(c for c in cited if not (ROOT / c).is_file()) == []
    assert not [m for m, p in MODULES.items() if re.search(r"\bnotes/|\.final/|\bexp/\w+\.py", p.read_text())]
