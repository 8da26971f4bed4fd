#!/usr/bin/env bash
# The whole test suite: lint, types, front-end unit tests, Python tests (CPU) and browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ruff"; ruff check python tests benchmarks scripts
echo "== mypy"; mypy
echo "== tsc + vitest"; bash scripts/test-frontend.sh
echo "== pytest"; python -m pytest -q -p no:cacheprovider "$@"
