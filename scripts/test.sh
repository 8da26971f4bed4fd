#!/usr/bin/env bash
# Set up and run the whole test suite against livessb installed from its wheel in a fresh
# virtual environment: lint, types, front-end unit tests, Python tests (CPU), browser tests.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/test_cli.py`).
set -euo pipefail
cd "$(dirname "$0")/.."
export LIVESSB_VENV=${LIVESSB_VENV:-.venv-test}
LIVESSB_FRESH_VENV=${LIVESSB_FRESH_VENV:-1} LIVESSB_EXTRAS=dev LIVESSB_BROWSER=1 \
  bash scripts/setup.sh
unset PYTHONPATH
export PATH="$PWD/$LIVESSB_VENV/bin:$PATH"
export LIVESSB_EXPECT_INSTALLED=1  # tests/test_install.py: livessb comes from the venv
echo "== ruff"; ruff check python tests benchmarks scripts hatch_build.py
echo "== mypy"; mypy
echo "== tsc + vitest"; bash scripts/test-frontend.sh
echo "== pytest"; python -m pytest -q -p no:cacheprovider "$@"
