"""Where the book's data files are, inside the repository and outside it.

Some chapters read precomputed tables as ``data/<name>`` relative to the notebook (``book/data/`` in the
repository, written by the ``scripts/regenerate_*`` scripts). Those files are also shipped with the package
(``attnlib._book_data``, mapped from ``book/data`` in ``pyproject.toml``), so an installed ``attnlib`` carries
the data of its own version. A chapter notebook downloaded from the published book and run elsewhere finds
its files like this:

1. ``data/<name>`` next to the notebook (the working directory of its kernel) when it exists: in the
   repository, and wherever the user put the files;
2. else the copy installed with ``attnlib`` (:func:`book_data_dir`).

:func:`use_book_data`, called in the first cell of every chapter that reads data, copies any file that is
missing in ``./data`` from the installed copy, so that the chapter's own ``data/<name>`` paths work unchanged;
:func:`book_data_path` resolves one name by the same rule without copying. Nothing is downloaded: the
installed copy always matches the installed library, whereas the repository's current files need not.
"""
from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["DATA_PACKAGE", "book_data_dir", "book_data_files", "book_data_path", "use_book_data"]

#: Subpackage holding the installed copy of ``book/data`` (see ``[tool.setuptools]`` in pyproject.toml).
DATA_PACKAGE = "attnlib._book_data"
#: ``book/data`` of the repository this module lives in (a checkout or an editable install), if any.
_CHECKOUT_DATA = Path(__file__).resolve().parents[2] / "book" / "data"
#: Where a (non-editable) installation puts the package data: ``attnlib/_book_data`` (a folder without
#: ``__init__.py``, so it is located by path rather than through importlib.resources).
_INSTALLED_DATA = Path(__file__).resolve().parents[1] / "_book_data"
_SUFFIXES = (".csv", ".json")


def book_data_dir() -> Path:
    """The folder of the book's data files that belongs to this ``attnlib``: ``book/data`` of the checkout
    (repository or editable install), else the copy installed with the package.

    Raises
    ------
    FileNotFoundError
        If neither exists (an installation without its package data).
    """
    for folder in (_CHECKOUT_DATA, _INSTALLED_DATA):
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"attnlib's book data are missing: neither {_CHECKOUT_DATA} nor the package data {DATA_PACKAGE} exist; "
        "reinstall attnlib from the repository (pip install \"attnlib @ git+<repository URL>\")")


def book_data_files() -> list[str]:
    """Names of the book's data files (``*.csv``, ``*.json``) in :func:`book_data_dir`, sorted."""
    return sorted(p.name for p in book_data_dir().iterdir() if p.suffix in _SUFFIXES and p.is_file())


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(f"name must be a bare file name such as 'phase_standard.csv', got {name!r}")
    return name


def book_data_path(name: str, folder: Path | str = "data") -> Path:
    """Path of the data file ``name``: ``folder/name`` (relative to the working directory, i.e. next to the
    notebook) if it exists, else the installed copy in :func:`book_data_dir`.

    Raises
    ------
    ValueError
        If ``name`` is not a bare file name.
    FileNotFoundError
        If the file is in neither place.
    """
    name = _check_name(name)
    local = Path(folder) / name
    if local.is_file():
        return local
    installed = book_data_dir() / name
    if installed.is_file():
        return installed
    raise FileNotFoundError(f"book data file {name!r} is neither at {local} nor in {book_data_dir()}")


def use_book_data(folder: Path | str = "data") -> Path:
    """Make ``folder/<name>`` (default ``data/``, next to the notebook) exist for every book data file.

    Files already there are left alone (in the repository nothing happens: ``book/data`` is the source); the
    missing ones are copied from the installed copy (:func:`book_data_dir`). Returns ``folder``.
    """
    folder = Path(folder)
    source = book_data_dir()
    if folder.resolve() == source.resolve():
        return folder
    missing = [n for n in book_data_files() if not (folder / n).is_file()]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        for n in missing:
            shutil.copy2(source / n, folder / n)
    return folder
