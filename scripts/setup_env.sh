# Sourced by build_book.sh and test.sh: create (or reuse) the virtual environment .venv at the repository
# root from requirements.txt and put it first on PATH. Re-installs only when requirements.txt or
# pyproject.toml changed since the last successful install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "error: need root to run: $*" >&2; return 1; fi; }

apt_install() {  # apt_install PACKAGE... (Debian/Ubuntu; non-interactive)
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" </dev/null
}

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    echo "python3 -m venv failed; installing python3-venv" >&2
    rm -rf "$VENV"
    apt_install python3-venv
    "$PYTHON" -m venv "$VENV"
  fi
fi

STAMP="$VENV/.requirements.sha256"
WANT="$(cat "$ROOT/requirements.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
  echo "Installing requirements into $VENV ..." >&2
  (cd "$ROOT" && "$VENV/bin/python" -m pip install -q --upgrade pip \
     && "$VENV/bin/python" -m pip install -q -r requirements.txt)
  echo "$WANT" > "$STAMP"
fi

export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
