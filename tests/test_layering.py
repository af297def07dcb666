"""attnlib's layers, read from the imports of its source files (no module is imported here).

Layers, lowest first: the shared ground (``params``, ``cache``, ``parallel``, ``exceptions``), ``theory``,
``finite_d``, ``book``. A module may import from its own layer and the layers below it, never from one above;
``histogram`` (the trained transformer of chapter 1) stands beside ``theory`` and ``finite_d`` on the shared
ground alone. Inside ``theory`` four rooms stand in the same order: ``model`` (what the equations are) <- ``solve``
(how a fixed point is found) <- ``branches`` (continuation, ends, thresholds) <- ``studies``. Nothing in the
library imports from ``book`` except ``attnlib/__init__.py``, which re-exports the
public names. Every import is counted: module level, inside functions, and ``from . import x`` forms.

The chapters, the scripts and the benchmarks import public names only: from ``attnlib``, ``attnlib.book`` and
``attnlib.histogram`` (tests may reach inside; so may a benchmark timing an internal kernel, listed with its reason).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from book_toc import code_cells

PACKAGE = Path(__file__).resolve().parents[1] / "attnlib"
SHARED = ("params", "cache", "parallel", "exceptions", "_version")
#: The rooms of the theory, lowest first: what the equations are, how a fixed point is found, branches and
#: thresholds, studies made with them. Each imports from the rooms below it.
THEORY_ROOMS = ("model", "solve", "branches", "studies")
THEORY = {f"theory.{r}" for r in THEORY_ROOMS}
#: What each unit may import from inside attnlib (besides itself).
ALLOWED = {
    "shared": {"shared"},
    **{f"theory.{r}": {"shared", *(f"theory.{b}" for b in THEORY_ROOMS[:i])} for i, r in enumerate(THEORY_ROOMS)},
    "theory": {"shared"},          # attnlib/theory/__init__.py: a docstring only
    "finite_d": {"shared", *THEORY},
    "book": {"shared", *THEORY, "finite_d"},
    "histogram": {"shared"},
}


def unit_of(parts: tuple[str, ...]) -> str:
    """The layer of the attnlib module ``attnlib.<parts>`` (``parts`` without the leading ``attnlib``)."""
    if not parts:
        return "package"
    head = parts[0]
    if head == "theory" and len(parts) > 1:
        if parts[1] not in THEORY_ROOMS:
            raise AssertionError(f"attnlib.{'.'.join(parts)} lies in no room of the theory {THEORY_ROOMS}")
        return f"theory.{parts[1]}"
    if head in ("theory", "finite_d", "book"):
        return head
    if head in SHARED or head == "__version__":
        return "shared"
    if head == "histogram":
        return "histogram"
    raise AssertionError(f"attnlib.{'.'.join(parts)} belongs to no layer: add it to tests/test_layering.py")


def module_parts(path: Path) -> tuple[str, ...]:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, tuple[str, ...]]]:
    """``(line, parts)`` of every attnlib module that the file ``path`` (or ``source``, as if it were that file)
    imports, absolute or relative."""
    here = module_parts(path)
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = tuple(alias.name.split("."))
                if parts[0] == "attnlib":
                    found.append((node.lineno, parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                assert node.level - 1 <= len(package), f"{path}:{node.lineno}: relative import above attnlib"
                target = base + tuple(node.module.split(".")) if node.module else base
            elif node.module and node.module.split(".")[0] == "attnlib":
                target = tuple(node.module.split("."))[1:]
            else:
                continue
            if PACKAGE.joinpath(*target).is_dir():
                # ``from . import x`` / ``from ..theory.model import x``: each name is a module (or a package
                # attribute) of that package
                for alias in node.names:
                    found.append((node.lineno, target + (alias.name,)))
            else:
                found.append((node.lineno, target))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_package_is_shipped():
    """A non-editable install (a downloaded notebook's ``pip install attnlib @ git+...``) holds exactly the packages
    that pyproject.toml lists: every folder of attnlib with an ``__init__.py`` must be there."""
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {".".join(("attnlib", *p.parent.relative_to(PACKAGE).parts)) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_every_module_belongs_to_a_layer():
    for path in SOURCES:
        parts = module_parts(path)
        if parts:
            unit_of(parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_respect_the_layers(path: Path):
    parts = module_parts(path)
    if not parts:
        return  # attnlib/__init__.py re-exports from every layer
    unit = unit_of(parts)
    bad = []
    for line, target in imported_modules(path):
        if not target:
            if unit != "shared":
                bad.append((line, "attnlib"))
            continue
        other = unit_of(target)
        if other != unit and other not in ALLOWED[unit]:
            bad.append((line, "attnlib." + ".".join(target)))
    assert not bad, f"{path.relative_to(PACKAGE)} ({unit}) imports from a higher or separate layer: {bad}"


def test_the_reader_sees_every_kind_of_import():
    """Relative, absolute and function-level imports are all read (so the layering test can fail)."""
    probe = PACKAGE / "theory" / "model" / "probe.py"     # not written: the source is passed as text
    src = ("from ...finite_d.data import make_task\nfrom .quadrature import Quadrature\nfrom ...params import check_int\n"
           "def f():\n    from attnlib.book import style\n    from ... import finite_d\n    import attnlib.cache\n"
           "    from ..solve import newton\n")
    targets = [t for _, t in imported_modules(probe, src)]
    assert targets == [("finite_d", "data"), ("theory", "model", "quadrature"), ("params",), ("book", "style"),
                       ("finite_d",), ("cache",), ("theory", "solve", "newton")]
    assert [unit_of(t) for t in targets] == ["finite_d", "theory.model", "shared", "book", "finite_d", "shared",
                                             "theory.solve"]
    assert "theory.solve" not in ALLOWED["theory.model"] and "theory.model" in ALLOWED["theory.solve"]


def import_graph() -> dict[str, set[str]]:
    """attnlib's import graph: each module (dotted, without ``attnlib.``; the package itself is ``""``) mapped to
    the attnlib modules it imports, at any level (a name imported from a package resolves to the package when it
    is not a module of its own)."""
    modules = {module_parts(p): p for p in SOURCES}
    graph = {}
    for parts, path in modules.items():
        edges = set()
        for _, target in imported_modules(path):
            while target and target not in modules:
                target = target[:-1]
            if target != parts:
                edges.add(".".join(target))
        graph[".".join(parts)] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    """No two attnlib modules import each other, directly or through others, at module or function level."""
    found = cycles(import_graph())
    assert not found, f"import cycles in attnlib: {found}"


def test_the_cycle_check_can_fail():
    graph = {"theory.a": {"theory.b"}, "theory.b": {"theory.c"}, "theory.c": {"theory.a"}, "params": set()}
    assert cycles(graph) == [["theory.a", "theory.b", "theory.c"]]
    assert cycles({"theory.a": {"theory.b"}, "theory.b": {"params"}}) == []


#: Longest module, in lines, and longest function body, in lines without its docstring.
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: What is still over those limits, at its length when the limits were set: each entry may only shrink, and goes
#: when it fits (a split of these is the next step of the layering work).
OVER_LONG_MODULES = {"theory/branches/continuation.py": 622, "theory/branches/pooled_end.py": 668,
                     "finite_d/simulation.py": 710, "histogram.py": 636}
OVER_LONG_FUNCTIONS = {("book/explorer.py", "_draw_panels"): 96,
                       ("theory/branches/pooled_end.py", "pooled_end"): 84,
                       ("theory/branches/pooled_end.py", "agreement_end"): 109}


def function_lengths(source: str) -> dict[str, int]:
    """Lines of every function (methods and nested functions included, keyed by name) without its docstring."""
    lengths = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                n -= first.end_lineno - first.lineno + 1
            lengths[node.name] = max(n, lengths.get(node.name, 0))
    return lengths


def test_modules_and_functions_stay_short():
    modules, functions = {}, {}
    for path in SOURCES:
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        modules[rel] = len(text.splitlines())
        functions.update({(rel, name): n for name, n in function_lengths(text).items()})
    too_long = {m: n for m, n in modules.items() if n > OVER_LONG_MODULES.get(m, MAX_MODULE_LINES)}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (or longer than their entry): {too_long}"
    fits = [m for m, n in OVER_LONG_MODULES.items() if modules.get(m, 0) <= MAX_MODULE_LINES]
    assert not fits, f"these modules fit now: drop them from OVER_LONG_MODULES: {fits}"
    too_long = {f: n for f, n in functions.items() if n > OVER_LONG_FUNCTIONS.get(f, MAX_FUNCTION_LINES)}
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines without docstring: {too_long}"
    fits = [f for f, n in OVER_LONG_FUNCTIONS.items() if functions.get(f, 0) <= MAX_FUNCTION_LINES]
    assert not fits, f"these functions fit now: drop them from OVER_LONG_FUNCTIONS: {fits}"


def test_function_lengths_leave_out_the_docstring():
    src = 'def f():\n    """one\n    two"""\n    a = 1\n    return a\n\n\ndef g():\n    return 1\n'
    assert function_lengths(src) == {"f": 3, "g": 2}


# --- the chapters, scripts and benchmarks use public names only ---------------------------------------------------

REPO = PACKAGE.parent
#: the namespaces a chapter, script or benchmark may import from (``attnlib.histogram`` needs JAX and is apart)
PUBLIC = ("attnlib", "attnlib.book", "attnlib.histogram")
#: benchmarks that time an internal kernel against its public caller, and may reach inside for that kernel only
INTERNAL_BENCHMARKS = {
    "bench_theory.py": "the compiled proximal kernel with and without its early stop, on the map's own nodes",
    "bench_general.py": "the general engine's map, proximal kernel and solver modules, each timed apart",
    "bench_simulation.py": "the per-column overlaps of a finite-d minimiser",
}


def _code_of(path: Path) -> str:
    """The Python of a script, or the code cells of a MyST chapter."""
    return code_cells(path) if path.suffix == ".md" else path.read_text()


def imported_from(code: str) -> set[str]:
    """Every attnlib module a piece of code imports from (module- and function-level)."""
    found = set()
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith((":", "%", "!"))]
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "attnlib":
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "attnlib"}
    return found


READERS = sorted([*(REPO / "book").glob("*.md"), *(REPO / "scripts").glob("*.py"), *(REPO / "benchmarks").glob("*.py")])


@pytest.mark.parametrize("path", READERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_chapters_scripts_and_benchmarks_import_public_names(path: Path):
    if path.parent.name == "benchmarks" and path.name in INTERNAL_BENCHMARKS:
        pytest.skip(f"times an internal kernel: {INTERNAL_BENCHMARKS[path.name]}")
    inside = sorted(m for m in imported_from(_code_of(path)) if m not in PUBLIC)
    assert not inside, f"{path.name} imports from {inside}: use the names of {PUBLIC}"


def test_the_public_import_check_can_fail():
    assert imported_from("from attnlib.theory.studies.sweeps import alpha_sweep\nimport attnlib") == {
        "attnlib.theory.studies.sweeps", "attnlib"}
    assert imported_from("def f():\n    from attnlib.book import style\n") == {"attnlib.book"}
