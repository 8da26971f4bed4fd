#!/usr/bin/env bash
# Set-up on a fresh Debian machine: system tools, the widget bundle, the wheel, a virtual
# environment with livessb installed from that wheel.
#   LIVESSB_VENV=.venv        where the virtual environment goes
#   LIVESSB_EXTRAS=dev        extras to install with the wheel ("" for the package alone)
#   LIVESSB_FRESH_VENV=1      delete and re-create the virtual environment first
#   LIVESSB_BROWSER=1         also install Debian's chromium (browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${LIVESSB_VENV:-.venv}
EXTRAS=${LIVESSB_EXTRAS-dev}
PY=${PYTHON:-python3}

apt_updated=0
apt_install() {  # apt_install PACKAGE... (root, or sudo when not root)
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ "$apt_updated" = 0 ]; then $sudo apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

command -v npm >/dev/null 2>&1 || { echo "== apt-get install nodejs npm"; apt_install nodejs npm; }
if [ "${LIVESSB_BROWSER:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  echo "== apt-get install chromium"; apt_install chromium
fi
"$PY" -c "import ensurepip, venv" 2>/dev/null || { echo "== apt-get install python3-venv"; apt_install python3-venv; }

if [ -L node_modules ]; then  # a worktree sharing another checkout's packages: never wipe them
  echo "== node_modules is a link to $(readlink node_modules): kept as it is"
else
  echo "== npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

if [ "${LIVESSB_FRESH_VENV:-0}" = 1 ]; then rm -rf "$VENV"; fi
[ -x "$VENV/bin/python" ] || { echo "== python -m venv $VENV"; "$PY" -m venv "$VENV"; }
unset PYTHONPATH  # the installed wheel, never the checkout
"$VENV/bin/python" -m pip install -q --upgrade pip

echo "== wheel (the build hook builds the widget bundle)"
rm -rf dist
"$VENV/bin/python" -m pip wheel -q --no-deps -w dist .
WHEEL=$(ls dist/livessb-*.whl)
"$VENV/bin/python" - "$WHEEL" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"livessb/static/widget.js", "livessb/static/widget.css", "livessb/notebooks/demo.ipynb"}
missing = need - names
sys.exit(f"the wheel lacks {sorted(missing)}" if missing else 0)
PY

echo "== pip install $WHEEL${EXTRAS:+[$EXTRAS]} into $VENV"
# torch (dev extra) is pinned: torch==2.13.0, the CPU build.
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$WHEEL"
# constraints.txt pins what the golden record depends on (see the file).
"$VENV/bin/python" -m pip install -q -c constraints.txt "$WHEEL${EXTRAS:+[$EXTRAS]}"
VENV_PY="$(cd "$VENV" && pwd)/bin/python"
(cd / && "$VENV_PY" -c "import livessb; print('installed', livessb.__version__, 'at', livessb.__file__)")
