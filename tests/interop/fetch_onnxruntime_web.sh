#!/usr/bin/env bash
# fetch_onnxruntime_web.sh - installs onnxruntime-web (ONNX Runtime built to
# WebAssembly, which Node.js runs) from the npm registry into nabla's cache,
# for tests/interop/onnx_interop.py to run nabla's ONNX exports where the
# Python onnxruntime package is not installed (Debian has none). Does
# nothing when it is there already. Prints the directory on stdout.
#
# Usage: tests/interop/fetch_onnxruntime_web.sh [DIR]
#   DIR defaults to $XDG_CACHE_HOME/nabla/onnxruntime-web, else
#   ~/.cache/nabla/onnxruntime-web.
set -euo pipefail

PKG=onnxruntime-web@1.20.1
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla/onnxruntime-web}
if [ ! -f "$dir/node_modules/onnxruntime-web/package.json" ]; then
  command -v npm >/dev/null || { echo "fetch_onnxruntime_web: no npm" >&2; exit 1; }
  mkdir -p "$dir"
  # no package scripts run: the runtime ships prebuilt in the package
  (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error "$PKG" >/dev/null)
fi
echo "$dir"
