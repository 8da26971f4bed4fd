#!/usr/bin/env bash
# Type-check and unit-test the front end (needs `npm ci` first; build-frontend.sh does it).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run typecheck
npm run test
