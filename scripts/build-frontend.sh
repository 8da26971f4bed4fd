#!/usr/bin/env bash
# Build the widget front end (js/ -> python/livessb/static/widget.{js,css}).
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm run build
test -s python/livessb/static/widget.js
echo "built python/livessb/static/widget.js"
