#!/usr/bin/env bash
# Memory amplification (issue 9, item 3): 32 clients at once each POST a 1 MiB suppression
# body of ~111,800 unknown keys, five rounds, against the real daemon. Prints RSS idle, at the
# peak of the bursts, and each second for 10 s after, for the build's allocator settings
# (mmap threshold frozen at 128 KiB, malloc_trim after large requests) and, in the same run,
# with glibc tunables added on top (MALLOC_ARENA_MAX=2). Figures only, nothing asserted here
# (the regression test itself asserts RSS is back near idle 10 s after).
#
# Usage: benches/api-memory.sh           release build (slow to compile)
#        PROFILE=dev benches/api-memory.sh   debug build
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
profile=(--release)
[ "${PROFILE:-release}" = dev ] && profile=()
test_name=apisec::suppression_floods_do_not_keep_memory
for variant in "" "MALLOC_ARENA_MAX=2"; do
    echo "== daemon env: [${variant}]"
    SVC_MEM_DAEMON_ENV="$variant" cargo test --quiet "${profile[@]}" --test it -- \
        --ignored --exact "$test_name" --nocapture 2>&1 | grep -E '^RESULT|panicked' || true
done
echo "(machine shared with other builds: figures are indicative)"
