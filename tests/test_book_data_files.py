"""attnlib.book.book_data: a chapter finds its data files next to the notebook or in the installed copy."""
from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

import attnlib
from attnlib.book import book_data

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"


def test_checkout_uses_book_data():
    assert attnlib.book_data_dir() == DATA.resolve()
    names = book_data.book_data_files()
    assert names == sorted(p.name for p in DATA.iterdir() if p.suffix in (".csv", ".json"))
    assert "phase_standard.csv" in names


def test_path_prefers_the_file_next_to_the_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert attnlib.book_data_path("phase_standard.csv") == DATA.resolve() / "phase_standard.csv"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "phase_standard.csv").write_text("omega\n0.1\n")
    assert attnlib.book_data_path("phase_standard.csv") == Path("data") / "phase_standard.csv"
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        attnlib.book_data_path("nope.csv")
    for bad in ("../phase_standard.csv", "data/phase_standard.csv", ""):
        with pytest.raises(ValueError, match="bare file name"):
            attnlib.book_data_path(bad)


def test_use_book_data_copies_only_missing_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    mine = tmp_path / "data" / "phase_meta.json"
    mine.write_text("{}")                       # a file of the user's: left alone
    assert attnlib.use_book_data() == Path("data")
    for name in book_data.book_data_files():
        if name != "phase_meta.json":
            assert filecmp.cmp(tmp_path / "data" / name, DATA / name, shallow=False), name
    assert mine.read_text() == "{}"


def test_use_book_data_in_the_repository_is_a_no_op(monkeypatch):
    monkeypatch.chdir(ROOT / "book")
    before = {p.name: p.stat().st_mtime_ns for p in DATA.iterdir()}
    attnlib.use_book_data()
    assert {p.name: p.stat().st_mtime_ns for p in DATA.iterdir()} == before


def test_package_data_maps_book_data():
    """pyproject ships book/data as the package attnlib._book_data (what an installed attnlib reads)."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert book_data.DATA_PACKAGE in conf["packages"]
    assert conf["package-dir"][book_data.DATA_PACKAGE] == "book/data"
    assert set(conf["package-data"][book_data.DATA_PACKAGE]) == {"*.csv", "*.json"}


def test_installed_copy_is_found_without_a_checkout(tmp_path, monkeypatch):
    """An installed attnlib (no book/data beside it) reads attnlib/_book_data."""
    installed = tmp_path / "_book_data"
    installed.mkdir()
    (installed / "phase_standard.csv").write_text("omega\n0.0\n")
    monkeypatch.setattr(book_data, "_CHECKOUT_DATA", tmp_path / "no-checkout")
    monkeypatch.setattr(book_data, "_INSTALLED_DATA", installed)
    assert attnlib.book_data_dir() == installed
    monkeypatch.chdir(tmp_path)
    assert attnlib.use_book_data() == Path("data") and (tmp_path / "data" / "phase_standard.csv").is_file()
    monkeypatch.setattr(book_data, "_INSTALLED_DATA", tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="book data are missing"):
        attnlib.book_data_dir()
