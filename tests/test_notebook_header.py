"""The first cell of every chapter tells a reader of the downloaded notebook how to install attnlib.

The cell is written by ``scripts/notebook_header.py``; its ``pip install`` line is built from
``repository.url`` in ``_config.yml``. Whether the executed notebook of the download menu keeps the cell (and
the HTML page hides it) is checked on the built book in ``tests/test_reader_environments.py``.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]-*.md"))


def load_script():
    spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "scripts" / "notebook_header.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HEADER = load_script()


def test_install_line_comes_from_config():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert HEADER.install_line() == f'pip install "attnlib[notebooks] @ git+{url.rstrip("/")}"'
    assert "notebooks" in _optional_dependencies()


def _optional_dependencies() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_notebooks_extra_covers_what_chapters_import():
    """Everything a chapter imports is attnlib's dependency, in its notebooks extra, or the standard library."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {re.split(r"[<>=\[ ]", d)[0].lower().replace("-", "_")
              for d in project["dependencies"] + project["optional-dependencies"]["notebooks"]}
    provides = {"myst_nb": "myst_nb", "ipywidgets": "ipywidgets", "IPython": "ipykernel", "attnlib": "attnlib"}
    for path in CHAPTERS:
        nb = jupytext.read(path)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for mod in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", cell.source, flags=re.M):
                if mod in sys.stdlib_module_names:
                    continue
                need = provides.get(mod, mod.lower())
                assert need in wanted | {"attnlib"}, f"{path.name} imports {mod}, not installed by the pip line"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_first_cell_is_the_header(path: Path):
    text = path.read_text()
    nb = jupytext.read(path)
    first = nb.cells[0]
    assert first.cell_type == "code", f"{path.name}: the first cell must be the install note (code cell)"
    assert "remove-cell" in first.metadata.get("tags", []), "the install note must not clutter the HTML page"
    assert HEADER.install_line() in first.source
    assert first.source.splitlines()[0].startswith(HEADER.MARK)
    assert ("attnlib.use_book_data()" in first.source) == HEADER.reads_data(text), \
        f"{path.name}: use_book_data() must be called exactly when the chapter reads data/ files"
    assert HEADER.with_header(text) == text, f"{path.name}: run python scripts/notebook_header.py"


def test_check_mode_passes():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_header.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)   # takes ~1 s
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_with_header_is_idempotent_and_replaces_an_old_header():
    body = "---\njupytext: {}\n---\n\n# T\n\n```{code-cell} ipython3\nx = open('data/a.csv')\n```\n"
    once = HEADER.with_header(body)
    assert HEADER.with_header(once) == once
    assert once.count(HEADER.MARK) == 1 and "use_book_data" in once
    stale = once.replace("attnlib[notebooks]", "attnlib-old")
    assert HEADER.with_header(stale) == once


def test_every_typed_install_line_matches():
    """The pip line quoted in README and in the chapters' prose is the one built from _config.yml."""
    files = [ROOT / "README.md", *CHAPTERS]
    quoted = [(p.name, m) for p in files for m in re.findall(r'pip install "attnlib[^"]*"', p.read_text())]
    assert quoted, "no install line found"
    for name, line in quoted:
        assert line == HEADER.install_line(), f"{name}: {line}"
