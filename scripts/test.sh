#!/usr/bin/env bash
# Quick start 2/2: set up .venv from requirements.txt, make sure Chromium is there (Debian package, installed
# with apt-get when missing and run as root) and run every test, including the headless-browser test of the
# book (which builds the book itself). Extra arguments are passed to pytest.
#
# The tests run in one pytest-xdist worker per core (PYTEST_WORKERS, default auto; 0 runs them in this process).
# tests/conftest.py groups them: all that need the built book in one worker (one build), the others by module.
#
# Then the replay tests (marker "replay": they recompute committed numbers through numpy/scipy) run a second
# time with OPENBLAS_CORETYPE forcing another OpenBLAS kernel than this CPU's default (scripts/blas_kernel.py),
# so that every run also checks the tolerances against another machine's rounding. SECOND_KERNEL=none skips
# that pass; SECOND_KERNEL=NAME forces kernel NAME.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "Chromium not found at $CHROMIUM; installing the Debian package 'chromium'" >&2
  apt_install chromium
fi
export CHROMIUM
WORKERS=(-n "${PYTEST_WORKERS:-auto}" --dist loadgroup)
python -m pytest tests "${WORKERS[@]}" "$@"

KERNEL="${SECOND_KERNEL:-$(python scripts/blas_kernel.py --alternative)}"
if [ "$KERNEL" = none ] || [ -z "$KERNEL" ]; then
  echo "No second OpenBLAS kernel pass (SECOND_KERNEL=${SECOND_KERNEL:-}, default kernel: $(python scripts/blas_kernel.py))"
  exit 0
fi
GOT="$(OPENBLAS_CORETYPE="$KERNEL" python scripts/blas_kernel.py)"
if [ "${GOT,,}" != "${KERNEL,,}" ]; then
  echo "error: OPENBLAS_CORETYPE=$KERNEL selects the kernel '$GOT'" >&2
  exit 1
fi
echo "Replay tests again under the OpenBLAS kernel $KERNEL (default here: $(python scripts/blas_kernel.py))"
OPENBLAS_CORETYPE="$KERNEL" python -m pytest tests -m replay -p no:cacheprovider -ra "${WORKERS[@]}"
