"""Which OpenBLAS kernel numpy's OpenBLAS runs, and which other one a second test pass should force.

numpy's wheel bundles OpenBLAS built for many CPU types (DYNAMIC_ARCH); at start-up it picks the kernel for
the CPU, or the one named by ``OPENBLAS_CORETYPE``. Each kernel rounds matrix products differently, so a
second pass of the replay tests under another kernel exercises another machine's rounding on this one.

    python scripts/blas_kernel.py                 # the active kernel, e.g. Haswell
    python scripts/blas_kernel.py --alternative   # a kernel this CPU can run other than the active one
                                                  # (empty when there is none, or no OpenBLAS is found)
"""
from __future__ import annotations

import ctypes
import glob
import os
import platform
import sys


def active_kernel() -> str:
    """The kernel that numpy's bundled OpenBLAS runs in this process ('' if none is found)."""
    import numpy as np

    root = os.path.dirname(np.__file__)
    for lib in sorted(glob.glob(os.path.join(root, os.pardir, "numpy.libs", "*openblas*"))
                      + glob.glob(os.path.join(root, ".dylibs", "*openblas*"))):
        handle = ctypes.CDLL(lib)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                     "openblas_get_corename"):
            f = getattr(handle, name, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                return f().decode()
    return ""


def alternative_kernel(active: str) -> str:
    """A kernel other than ``active`` that this CPU executes: Sandybridge (AVX, any x86-64 CPU of the last
    decade) or, from Sandybridge or without AVX, Nehalem (SSE4.2); ARMV8 (generic) on 64-bit ARM."""
    if not active:
        return ""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as features
        except ImportError:  # numpy < 2
            from numpy.core._multiarray_umath import __cpu_features__ as features
        if active.lower() != "sandybridge" and features.get("AVX", False):
            return "Sandybridge"
        return "Nehalem" if active.lower() != "nehalem" else ""
    if machine in ("aarch64", "arm64"):
        return "ARMV8" if active.upper() != "ARMV8" else ""
    return ""


if __name__ == "__main__":
    kernel = active_kernel()
    print(alternative_kernel(kernel) if "--alternative" in sys.argv[1:] else kernel)
