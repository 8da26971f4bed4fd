#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the demo: the widget on the embedded demo dataset in
# JupyterLab. `bash scripts/demo.sh --headless` runs the same workflow without a browser.
set -euo pipefail
cd "$(dirname "$0")/.."
export LIVESSB_VENV=${LIVESSB_VENV:-.venv}
LIVESSB_EXTRAS=${LIVESSB_EXTRAS-notebook} bash scripts/setup.sh
exec "$LIVESSB_VENV/bin/livessb" demo "$@"
