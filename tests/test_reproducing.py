"""The inventory of the book's stored tables (attnlib.book.reproducing, the appendix "Reproducing this book"):
every table of book/data belongs to exactly one run with a script that exists, a wall time and the tests that
read it; a table without provenance or an unreadable provenance file is an error, not a silent gap."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attnlib.book.reproducing import PHASE_PARTS, checking_tests, data_inventory

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"


def test_every_table_in_one_run():
    runs = data_inventory(DATA)
    listed = [t for ts in runs.tables for t in ts.split(", ")]
    sources = {"paper_reference.csv", "authors_theory_tables.csv"}  # the paper's numbers, not computed here
    assert sorted(listed) == sorted(p.name for p in DATA.glob("*.csv") if p.name not in sources)
    assert len(listed) == len(set(listed))
    for script in runs.script.unique():
        assert (ROOT / script).is_file(), script
    # a wall time is recorded for every run (a table derived from others in well under a minute shows 0.0)
    assert runs.minutes.notna().all() and (runs.minutes >= 0).all() and (runs.workers >= 1).all()
    phase = runs[runs.script == "scripts/regenerate_phase_data.py"]
    assert set(phase.part) == set(PHASE_PARTS)


def test_tests_are_found_by_name_and_by_pattern(tmp_path):
    (tmp_path / "test_a.py").write_text('df = load("phase_slices.csv")\n')
    (tmp_path / "test_b.py").write_text('"""Checks book/data/finite_d_*.csv."""\n')
    (tmp_path / "test_c.py").write_text('"""Every *.csv and my_phase_slices_x."""\n')
    assert checking_tests(["phase_slices.csv"], tmp_path) == ["test_a.py"]
    assert checking_tests(["finite_d_rank2.csv"], tmp_path) == ["test_b.py"]
    assert checking_tests(["phase_slices.csv"], tmp_path / "missing") == []
    runs = data_inventory(DATA)
    row = runs[runs.tables == "finite_d_rank2.csv"].iloc[0]
    assert "test_book_data_finite_d.py" in row.tests


def test_missing_or_corrupt_provenance_is_an_error(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("gamp_tracking.csv", "gamp_tracking.json"):
        shutil.copy(DATA / name, data / name)
    assert data_inventory(data, tests_dir=None).tables.tolist() == ["gamp_tracking.csv"]
    shutil.copy(DATA / "gamp_fixed_points.csv", data / "gamp_fixed_points.csv")
    with pytest.raises(ValueError, match="gamp_fixed_points.csv"):
        data_inventory(data)
    (data / "gamp_fixed_points.json").write_text("{not json")
    with pytest.raises(ValueError, match="gamp_fixed_points.json"):
        data_inventory(data)
    (data / "gamp_fixed_points.json").write_text(json.dumps({"table": "gamp_fixed_points", "script": "s.py"}))
    runs = data_inventory(data)
    assert runs.minutes.isna().tolist() == [True, False]
