"""attnlib's layers, read from the imports of its source files (no module is imported here).

Layers, lowest first: the shared ground (``params``, ``cache``, ``parallel``, ``exceptions``), ``theory``,
``finite_d``, ``book``. A module may import from its own layer and the layers below it, never from one above;
``histogram`` (the trained transformer of chapter 1) stands beside ``theory`` and ``finite_d`` on the shared
ground alone. Nothing in the library imports from ``book`` except ``attnlib/__init__.py``, which re-exports the
public names. Every import is counted: module level, inside functions, and ``from . import x`` forms.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnlib"
SHARED = ("params", "cache", "parallel", "exceptions")
#: What each unit may import from inside attnlib (besides itself).
ALLOWED = {
    "shared": {"shared"},
    "theory": {"shared"},
    "finite_d": {"shared", "theory"},
    "book": {"shared", "theory", "finite_d"},
    "histogram": {"shared"},
}


def unit_of(parts: tuple[str, ...]) -> str:
    """The layer of the attnlib module ``attnlib.<parts>`` (``parts`` without the leading ``attnlib``)."""
    if not parts:
        return "package"
    head = parts[0]
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
            if node.module is None or not target or target[0] in ("theory", "finite_d", "book") and len(target) == 1:
                # ``from . import x`` / ``from ..theory import x``: each name is a module (or a package attribute)
                for alias in node.names:
                    found.append((node.lineno, target + (alias.name,)))
            else:
                found.append((node.lineno, target))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


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
    probe = PACKAGE / "theory" / "probe.py"            # not written: the source is passed as text
    src = ("from ..finite_d.data import make_task\nfrom .quadrature import Quadrature\nfrom ..params import check_int\n"
           "def f():\n    from attnlib.book import style\n    from .. import finite_d\n    import attnlib.cache\n")
    targets = [t for _, t in imported_modules(probe, src)]
    assert targets == [("finite_d", "data"), ("theory", "quadrature"), ("params",), ("book", "style"),
                       ("finite_d",), ("cache",)]
    assert [unit_of(t) for t in targets] == ["finite_d", "theory", "shared", "book", "finite_d", "shared"]
