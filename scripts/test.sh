#!/usr/bin/env bash
# Quick start 2/2: set up .venv from requirements.txt, make sure Chromium is there (Debian package, installed
# with apt-get when missing and run as root) and run every test, including the headless-browser test of the
# book (which builds the book itself). Extra arguments are passed to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "Chromium not found at $CHROMIUM; installing the Debian package 'chromium'" >&2
  apt_install chromium
fi
export CHROMIUM
python -m pytest tests "$@"
