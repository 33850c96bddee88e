#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 30), one after another,
# and prints one line per target:
#
#   TARGET: N runs, cov C, ok
#   TARGET: N runs, cov C, CRASH fuzz/artifacts/TARGET/crash-...
#
# Exits non-zero when any target crashed, timed out (an input slower than 10 s) or ran out
# of memory (2 GiB). Not part of CI: the 33 targets take SECONDS x 33 plus one build.
# Installs cargo-fuzz from crates.io when it is missing. cargo-fuzz needs nightly flags;
# RUSTC_BOOTSTRAP=1 lets the stable toolchain accept them. FUZZ_SANITIZER (default
# address) picks the sanitizer; `none` if the address sanitizer does not link here.
# Corpora (fuzz/corpus/) and crash inputs (fuzz/artifacts/) stay out of git.
#
#   scripts/fuzz-all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
shift || true
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

# One build of all targets first, so a compile error stops the run before any fuzzing.
cargo fuzz build -s "$sanitizer"

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
failed=0
for target in "${targets[@]}"; do
    log="$logs/$target.log"
    status=0
    cargo fuzz run -s "$sanitizer" "$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1 || status=$?
    # libFuzzer's status lines: "#123 NEW cov: 45 ft: 67 ..." and "#123 DONE cov: ...".
    last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
    runs="$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")"
    cov="$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")"
    done_runs="$(sed -nE 's/^Done ([0-9]+) runs.*/\1/p' "$log" | tail -n 1)"
    runs="${done_runs:-${runs:-0}}"
    if [ "$status" -eq 0 ]; then
        echo "$target: $runs runs, cov ${cov:-?}, ok"
    else
        failed=1
        artifact="$(sed -nE 's/.*Test unit written to (\S+).*/\1/p' "$log" | tail -n 1)"
        echo "$target: $runs runs, cov ${cov:-?}, CRASH ${artifact:-(no artifact; exit $status)}"
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY' "$log" | head -n 3 | sed 's/^/    /'
    fi
done
exit "$failed"
