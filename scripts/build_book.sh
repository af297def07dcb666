#!/usr/bin/env bash
# Quick start 1/2: set up .venv from requirements.txt and build the book into _build/html
# (every notebook executed; results cached in _build/.jupyter_cache, re-run when attnlib changes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
jupyter-book build book
echo "Open _build/html/index.html"
