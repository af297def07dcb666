"""Results as tables: a sweep reads left to right as a researcher reads it (the task's parameters, where on the
branch, the verdict, the overlaps, the errors), whether it was computed now or read back from the disk cache."""
from attnlib import TaskParams, alpha_sweep


def test_sweep_columns_in_reading_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    params = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    for _ in range(2):   # computed, then read back from the cache (stored with sorted keys)
        df = alpha_sweep(params, [1.5], branches="semantic")
        assert list(df.columns[:17]) == ["sigma", "lam", "omega", "A11", "A12", "A21", "A22", "alpha", "branch",
                                         "status", "converged", "q", "m", "V", "theta", "test_error", "train_loss"]
        assert list(df.columns[17:23]) == ["q_err", "m_err", "V_err", "theta_err", "test_error_err",
                                           "train_loss_err"]
        assert df.status.iloc[0] == "on-branch"
