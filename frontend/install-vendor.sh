#!/usr/bin/env bash
# Install the web UI's browser libraries (htmx and its SSE extension) from the npm registry
# into frontend/static/vendor/. Versions are pinned in package.json and package-lock.json;
# nothing is built. Idempotent: does nothing when the pinned versions are already there.
#
#   frontend/install-vendor.sh          install (or check) the vendor files
#   frontend/install-vendor.sh --force  reinstall even if they look up to date
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '==> %s\n' "$*"; }
fail() { printf 'install-vendor.sh: %s\n' "$*" >&2; exit 1; }

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
        *) fail "unknown option '$arg' (use --force or --help)" ;;
    esac
done

vendor=static/vendor
# npm package → the file it ships that the pages load, and the name it gets in vendor/.
files=(
    "htmx.org:dist/htmx.min.js:htmx.min.js"
    "htmx-ext-sse:dist/sse.js:htmx-ext-sse.js"
)

command -v node >/dev/null 2>&1 \
    || fail "node not found: install Node.js 18 or newer with npm (Debian/Ubuntu: apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 \
    || fail "npm not found: install npm (Debian/Ubuntu: apt-get install npm)"

# Up to date when every file is there and the manifest names the pinned versions.
up_to_date() {
    local entry
    for entry in "${files[@]}"; do
        [ -s "$vendor/${entry##*:}" ] || return 1
    done
    [ -f "$vendor/manifest.json" ] || return 1
    node -e '
        const pinned = require("./package.json").dependencies;
        const got = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        process.exit(Object.keys(pinned).every((p) => got[p] === pinned[p]) ? 0 : 1);
    ' "$vendor/manifest.json"
}

if [ "$force" = 0 ] && up_to_date; then
    say "web UI vendor files are up to date ($vendor)"
    exit 0
fi

say "installing htmx and htmx-ext-sse from the npm registry (pinned in frontend/package-lock.json)"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error \
    || fail "npm ci failed (is the npm registry reachable? see npm's output above)"

mkdir -p "$vendor"
for entry in "${files[@]}"; do
    IFS=: read -r package source target <<<"$entry"
    [ -s "node_modules/$package/$source" ] || fail "node_modules/$package/$source is missing after npm ci"
    cp "node_modules/$package/$source" "$vendor/$target"
    if [ -f "node_modules/$package/LICENSE" ]; then
        cp "node_modules/$package/LICENSE" "$vendor/$target.LICENSE"
    fi
done
node -e '
    const fs = require("fs");
    const out = {};
    for (const p of Object.keys(require("./package.json").dependencies)) {
        out[p] = JSON.parse(fs.readFileSync(`node_modules/${p}/package.json`, "utf8")).version;
    }
    fs.writeFileSync(process.argv[1], JSON.stringify(out, null, 2) + "\n");
' "$vendor/manifest.json" || fail "could not write $vendor/manifest.json"

up_to_date || fail "the installed versions do not match package.json (see $vendor/manifest.json)"
say "installed $(tr -d '\n ' <"$vendor/manifest.json") into frontend/$vendor"
