"""The paper's reference values carry their provenance, and the authors' published theory tables give their own
transition (book/data/paper_reference.csv, book/data/authors_theory_tables.csv)."""
import numpy as np
import pandas as pd
import pytest

from attnlib.book.authors_tables import authors_crossing, authors_tables
from attnlib.book.book_data import book_data_path

SOURCES = {"typed list", "authors' table", "authors' notebook", "paper"}
COLUMNS = {"q": "q", "m": "m", "theta": "theta", "eps_g": "eps_g", "eps_t": "eps_t"}


def _reference():
    return pd.read_csv(book_data_path("paper_reference.csv"), keep_default_na=False, na_values=[""])


def test_every_reference_value_names_its_source():
    ref = _reference()
    assert set(ref.source) <= SOURCES, set(ref.source) - SOURCES
    assert (ref[ref.quantity.isin(["alpha_c", "alpha_l"])].source == "typed list").all()
    named = ref[ref.source != "paper"]
    assert named.source_file.fillna("").str.len().gt(0).all(), "a typed list or table row without its file"
    assert ref[ref.source == "paper"].source_file.isna().all()


def test_table_values_are_the_rows_of_the_authors_tables():
    """Each value marked "authors' table" whose file is in the book's copy is that file's row at its alpha,
    to the four significant digits it is quoted with."""
    ref, tables = _reference(), authors_tables()
    quoted = pd.read_csv(book_data_path("paper_reference.csv"), dtype=str).value  # as written in the file
    checked = 0
    for r in ref[ref.source == "authors' table"].itertuples():
        name = r.source_file.rsplit("/", 1)[-1]
        rows = tables[(tables.source_file == name) & np.isclose(tables.alpha, r.alpha)]
        if rows.empty:
            continue  # a file the copy does not hold (the alternative A)
        assert len(rows) == 1, (r.quantity, r.alpha)
        branch, key = r.quantity.split("_", 1)
        assert rows.branch.iloc[0] == branch
        value = float(rows[COLUMNS[key]].iloc[0])
        unit = 10.0 ** -len(quoted[r.Index].split(".")[1])
        assert abs(value - r.value) < unit, (r.quantity, r.alpha, value, unit)
        checked += 1
    assert checked == 11  # the eleven fixed-point values at omega = 0.3


def test_authors_tables_cross_where_their_losses_change_order():
    """At omega = 0.3 the authors' training losses change order between two grid points; the crossing lies
    between them, above the alpha_c the paper plots (1.241, typed list)."""
    tables = authors_tables().query("omega == 0.3")
    loss = tables.pivot_table(index="alpha", columns="branch", values="eps_t")
    diff = (loss.semantic - loss.positional).to_numpy()
    alphas = loss.index.to_numpy()
    ac = authors_crossing(0.3)
    below, above = alphas[alphas < ac].max(), alphas[alphas > ac].min()
    assert diff[alphas == below][0] > 0 > diff[alphas == above][0]
    # one crossing (the first row, alpha = 0.01, has both losses equal to 1e-8 relative: no sample, no order)
    assert np.all(diff[(alphas > 0.1) & (alphas < ac)] > 0) and np.all(diff[alphas > ac] < 0)
    typed = _reference().query("quantity == 'alpha_c' and omega == 0.3").value.iloc[0]
    assert ac - typed > 0.015
    assert ac == pytest.approx(1.262, abs=1e-3)


def test_authors_crossing_rejects_an_omega_without_tables():
    with pytest.raises(ValueError, match="omega must be one of"):
        authors_crossing(0.2)


def test_histogram_accuracies_agree_with_the_authors_runs():
    """The stored histogram runs (book/data/histogram_summary.csv, 4 seeds each) and the authors' 10 runs
    (paper_reference.csv, "authors' notebook") agree in their mean final validation accuracy within two
    standard errors of the difference, for both restricted layers (chapter 1)."""
    ref = _reference().set_index("quantity")
    rows = ref[ref.index.str.startswith("histogram_")]
    assert set(rows.source) == {"authors' notebook"} and set(rows.source_file) == {"01-histogram.ipynb"}
    summary = pd.read_csv(book_data_path("histogram_summary.csv"))
    for variant, runs in summary.groupby("variant"):
        theirs = ref.loc[f"histogram_val_acc_{variant}", "value"]
        theirs_sd = ref.loc[f"histogram_val_acc_std_{variant}", "value"]   # numpy std over 10 runs (ddof 0)
        assert 0.99 < theirs < 1 and 0 < theirs_sd < 0.01
        se = np.hypot(runs.val_acc.std() / np.sqrt(len(runs)), theirs_sd / np.sqrt(10 - 1))
        assert abs(runs.val_acc.mean() - theirs) < 2 * se, (variant, runs.val_acc.mean(), theirs, se)
