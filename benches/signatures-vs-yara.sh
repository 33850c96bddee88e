#!/usr/bin/env bash
# Compares svc's content-signature scanner with YARA on the same corpus in the same run.
#
# 1. Installs yara from Debian if missing (apt-get update once, apt-get install -y yara).
# 2. Runs `cargo bench --bench signatures`, which writes the 10,000-file PHP corpus, measures
#    scan_file over it, and writes the same rules (literals and regexes) as YARA source.
# 3. Times `yara -r` over the same corpus (page cache warm, best of 3, 1 and 2 threads).
#
# Usage: benches/signatures-vs-yara.sh [--files N]     (KEEP=1 keeps the work dir)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if ! command -v yara >/dev/null 2>&1; then
    apt-get update
    apt-get install -y yara
fi

work="$(mktemp -d)"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi

cargo bench --bench signatures -- --corpus "$work/corpus" --yara-out "$work/rules.yar" \
    --summary "$work/ours.txt" "$@"

bytes="$(sed -n 's/^bytes=//p' "$work/ours.txt")"
files="$(sed -n 's/^files=//p' "$work/ours.txt")"
ours_1t="$(sed -n 's/^mbps_1t=//p' "$work/ours.txt")"
ours_2t="$(sed -n 's/^mbps_2t=//p' "$work/ours.txt")"
ours_flagged="$(sed -n 's/^flagged=//p' "$work/ours.txt")"

echo "yara $(yara --version)"
yara -w -r -p 1 "$work/rules.yar" "$work/corpus" >/dev/null # warm-up and syntax check

best_secs() { # threads
    local best="" t0 t1 s
    for _ in 1 2 3; do
        t0="$(date +%s.%N)"
        yara -w -r -p "$1" "$work/rules.yar" "$work/corpus" >"$work/yara.out"
        t1="$(date +%s.%N)"
        s="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')"
        if [ -z "$best" ] || awk -v s="$s" -v b="$best" 'BEGIN { exit !(s < b) }'; then best="$s"; fi
    done
    echo "$best"
}
mbps() { awk -v n="$bytes" -v s="$1" 'BEGIN { printf "%.1f", n / s / 1e6 }'; }

y1="$(best_secs 1)"
y2="$(best_secs 2)"
# YARA cannot see paths, so the php_in_uploads rule (SVC-UP-0001) matches every PHP file
# there; count files flagged by the content rules only.
yara_flagged="$(grep -v '^svc_SVC_UP_0001 ' "$work/yara.out" | awk '{print $2}' | sort -u | wc -l)"

echo
echo "corpus: $files files, $bytes bytes"
printf '%-28s %10s %10s %s\n' "scanner" "1 thread" "2 threads" "files flagged"
printf '%-28s %7s MB/s %7s MB/s %s\n' "svc scan_file" "$ours_1t" "$ours_2t" "$ours_flagged"
printf '%-28s %7s MB/s %7s MB/s %s\n' "yara -r" "$(mbps "$y1")" "$(mbps "$y2")" "$yara_flagged"
