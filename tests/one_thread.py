"""Shared helper of the book-data tests: run a recomputation in a fresh Python process with one BLAS thread,
as the regeneration scripts run it (the thread count changes the rounding of the matrix products)."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def run_one_thread(code: str, *args: str, timeout: float = 900, env: dict | None = None):
    """Run ``python -c code args...`` with ``OMP/OPENBLAS/MKL_NUM_THREADS=1`` (plus ``env``) and return the
    JSON document printed on its last line of output; fail with its error output if it fails."""
    full = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
