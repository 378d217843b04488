#!/usr/bin/env bash
# Start Limbic Memory from ./.venv (run ./install.sh first).
#
#   ./start.sh        in the foreground (Ctrl-C stops it; in-flight turns finish first)
#   ./start.sh -d     in the background, logs in .runtime/limbic-memory.log
#
# The port comes from config.json (server.port) or LM_PORT; the default is 8000.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/limbic-memory ]; then
    echo "start.sh: .venv is missing or incomplete; run ./install.sh first" >&2
    exit 1
fi
if [ "${1:-}" = "-d" ]; then
    shift
    mkdir -p .runtime
    nohup .venv/bin/limbic-memory serve "$@" >> .runtime/limbic-memory.log 2>&1 &
    echo $! > .runtime/limbic-memory.pid
    echo "limbic-memory started in the background (pid $!); logs: .runtime/limbic-memory.log"
    echo "stop it with: kill \$(cat .runtime/limbic-memory.pid)"
    exit 0
fi
exec .venv/bin/limbic-memory serve "$@"
