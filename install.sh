#!/usr/bin/env bash
# Install Limbic Memory into ./.venv (created or reused). Idempotent: run it again any time.
#
#   ./install.sh          the app
#   ./install.sh --dev    the app plus test and benchmark tools
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    cat <<'TXT'
usage: ./install.sh [--dev]

  --dev     also install the test and benchmark extras (pytest, hypothesis, ruff, divsel)

Environment: PYTHON=/path/to/python3.11+ picks the interpreter used to create .venv.
TXT
}

dev=0
for arg in "$@"; do
    case "$arg" in
        --dev) dev=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install.sh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
    esac
done

say() { printf '==> %s\n' "$*"; }
fail() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || fail "'$python' not found; install Python 3.11 or newer, or set PYTHON"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "Python 3.11 or newer is required ($("$python" --version 2>&1) found); set PYTHON"

if [ -x .venv/bin/python ]; then
    say "reusing .venv ($(.venv/bin/python --version))"
else
    say "creating .venv with $("$python" --version)"
    "$python" -m venv .venv || fail "could not create .venv (on Debian/Ubuntu: apt-get install python3-venv)"
fi

say "upgrading pip"
.venv/bin/python -m pip install --quiet --upgrade pip || fail "pip upgrade failed"

target="."
[ "$dev" = 1 ] && target=".[dev]"
say "installing limbic-memory ($target)"
.venv/bin/python -m pip install --quiet --editable "$target" || fail "installing the project failed (see pip's output above)"

if [ ! -f config.json ]; then
    cp config.example.json config.json
    say "created config.json from config.example.json (edit it to use remote providers)"
else
    say "keeping your config.json"
fi

say "done. Start the app with ./start.sh"
[ "$dev" = 1 ] && say "run the tests with .venv/bin/python -m pytest"
exit 0
