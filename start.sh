#!/usr/bin/env bash
# Start Limbic Memory from ./.venv (run ./install.sh first).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/limbic-memory ]; then
    echo "start.sh: .venv is missing or incomplete; run ./install.sh first" >&2
    exit 1
fi
exec .venv/bin/limbic-memory serve "$@"
