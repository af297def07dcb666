"""What the book's stored tables are, what wrote them, how long that took and which tests check them.

The book reads every result too heavy for a build from ``book/data`` (:func:`attnlib.book.book_data.book_data_dir`).
Each table there has a provenance sidecar written with it by its regeneration script: ``<table>.json`` (one
table), ``histogram.json`` (the three ``histogram_*.csv``) or ``phase_meta.json`` (the phase-diagram tables, one
entry per part of ``scripts/regenerate_phase_data.py``). :func:`data_inventory` reads them all into one table of
runs for the book's appendix on reproducing it; :func:`checking_tests` finds the test files that read a table.
"""
from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pandas as pd

from .book_data import book_data_dir

__all__ = ["PHASE_PARTS", "data_inventory", "checking_tests"]

#: The tables each part of ``scripts/regenerate_phase_data.py`` writes (``phase_meta.json`` keys its parts).
PHASE_PARTS = {
    "standard": ("phase_standard_runs.csv", "phase_standard.csv"),
    "traces": ("branch_traces.csv",),
    "alternative": ("phase_alternative.csv",),
    "slices": ("phase_slices.csv",),
    "validity": ("rs_validity.csv", "free_states.csv"),
    "solver": ("edge_solver_checks.csv", "edge_profile.csv"),
}
#: Sidecars of data taken from the paper and its authors' repository, not computed here.
_SOURCES = ("paper_reference.json", "authors_theory_tables.json")


def _test_texts(tests_dir: Path | str | None) -> dict[str, str]:
    """The sources of the test files (``test_*.py``) of ``tests_dir``, by file name, sorted; empty where
    ``tests_dir`` is None or missing (an installed package has no tests)."""
    if tests_dir is None or not Path(tests_dir).is_dir():
        return {}
    return {p.name: p.read_text() for p in sorted(Path(tests_dir).glob("test_*.py"))}


def _readers(tables, texts: dict[str, str]) -> list[str]:
    """The names in ``texts`` (test file -> source) whose source names any of ``tables`` (see :func:`checking_tests`)."""
    stems = [Path(t).stem for t in tables]
    found = []
    for name, text in texts.items():
        patterns = set(re.findall(r"[\w.*-]*\*[\w.*-]*\.csv", text)) - {"*.csv"}  # a bare *.csv: every table
        if (any(re.search(rf"(?<![\w.]){re.escape(s)}(?![\w])", text) for s in stems)
                or any(fnmatch.fnmatchcase(t, pat) for t in tables for pat in patterns)):
            found.append(name)
    return found


def checking_tests(tables, tests_dir: Path | str | None) -> list[str]:
    """The test files (``test_*.py`` in ``tests_dir``) that name any of ``tables`` (file names): by its stem, or by
    a pattern such as ``finite_d_*.csv`` that matches it; sorted. Empty where ``tests_dir`` is None or missing (an
    installed package has no tests)."""
    return _readers(tables, _test_texts(tests_dir))


def _run(tables, script, part, meta, texts) -> dict:
    wall = meta.get("wall_time_s")
    return {"tables": ", ".join(tables), "script": script, "part": part or "",
            "minutes": round(float(wall) / 60, 1) if wall is not None else float("nan"),
            "workers": meta.get("n_jobs"), "generated": str(meta.get("generated") or "")[:10],
            "tests": ", ".join(_readers(tables, texts))}


def data_inventory(data_dir: Path | str | None = None, tests_dir: Path | str | None = None) -> pd.DataFrame:
    """One row per run that wrote tables of ``data_dir`` (default :func:`book_data_dir`).

    Parameters
    ----------
    data_dir : path, optional
        The folder of the tables and their sidecars.
    tests_dir : path, optional
        The repository's ``tests`` folder, for the ``tests`` column (:func:`checking_tests`); default: the
        ``tests`` folder beside ``data_dir``'s ``book`` folder, if there is one.

    Returns
    -------
    pandas.DataFrame
        Columns ``tables`` (comma-separated file names), ``script``, ``part`` (the ``--parts`` entry for
        ``scripts/regenerate_phase_data.py``, else empty), ``minutes`` (wall time of the run; NaN where not
        recorded), ``workers`` (parallel jobs), ``generated`` (date), ``tests`` (test files that read one of the
        tables), sorted by script and part. Sidecars of the paper's own numbers are left out.

    Raises
    ------
    ValueError
        If a table of ``data_dir`` belongs to no sidecar, or a sidecar cannot be read.
    """
    data = Path(data_dir) if data_dir is not None else book_data_dir()
    texts = _test_texts(data.parent.parent / "tests" if tests_dir is None else tests_dir)  # read once
    rows, covered = [], set()
    for side in sorted(data.glob("*.json")):
        if side.name in _SOURCES:
            covered.add(side.with_suffix(".csv").name)
            continue
        try:
            meta = json.loads(side.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read the sidecar {side.name}: {err}") from err
        if side.name == "phase_meta.json":
            script = meta["provenance"]["script"]
            for part, tables in PHASE_PARTS.items():
                if part in meta:
                    info = {**meta["provenance"], **meta[part]}
                    rows.append(_run(tables, script, part, info, texts))
                    covered.update(tables)
        elif side.name == "histogram.json":
            tables = sorted(p.name for p in data.glob("histogram_*.csv"))
            rows.append(_run(tables, meta["script"], None, meta, texts))
            covered.update(tables)
        else:
            table = f"{meta.get('table', side.stem)}.csv"
            rows.append(_run([table], meta.get("script", ""), None, meta, texts))
            covered.add(table)
    orphans = sorted(p.name for p in data.glob("*.csv") if p.name not in covered)
    if orphans:
        raise ValueError(f"tables without a provenance sidecar in {data}: {orphans}")
    return pd.DataFrame(rows).sort_values(["script", "part", "tables"], ignore_index=True)
