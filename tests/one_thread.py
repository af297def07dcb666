"""Shared helper of the book-data tests: run a recomputation in a fresh Python process with one BLAS thread,
as the regeneration scripts run it (the thread count changes the rounding of the matrix products)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one_thread(code: str, *args: str, timeout: float = 900, env: dict | None = None):
    """Run ``python -c code args...`` with ``OMP/OPENBLAS/MKL_NUM_THREADS=1`` (plus ``env``) and return the
    JSON document printed on its last line of output; fail with its error output if it fails."""
    full = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The thread-count variables that the regeneration scripts pin to one when they are imported.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def load_script(filename: str, module_name: str):
    """Import ``scripts/<filename>`` as the module ``module_name`` (for its functions and constants), leaving this
    process's thread-count variables as they were.

    Each regeneration script pins ``THREAD_VARIABLES`` to one at import, for its own runs. In the test process that
    pinning outlived the import: numba launched its thread pool with one thread, and a later compilation, reading
    another count from the environment, failed with "Cannot set NUMBA_NUM_THREADS to a different value once the
    threads have been launched"."""
    saved = {v: os.environ.get(v) for v in THREAD_VARIABLES}
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "scripts" / filename)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
    return module
