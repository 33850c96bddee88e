#!/usr/bin/env bash
# Compares the authentication-log detector with fail2ban on the same 1,000,000-line log.
#
# 1. installs fail2ban if fail2ban-regex is missing (Debian: apt-get);
# 2. `cargo bench --bench authlog` generates the log (kept in a private temp dir) and
#    prints our lines/s (tail+parse+detect, one core);
# 3. times `fail2ban-regex LOG /etc/fail2ban/filter.d/sshd.conf` on the same file
#    (fail2ban-regex is single-threaded Python);
# 4. prints both rates and the ratio (goal: ours >= 20x).
#
# Usage: benches/authlog-vs-fail2ban.sh            (from the crate root or anywhere)
# Env:   AUTHLOG_BENCH_LINES (default 1000000), KEEP=1 to keep the temp dir.
set -euo pipefail

cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if ! command -v fail2ban-regex >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "fail2ban-regex missing and not root: install fail2ban first" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fail2ban >/dev/null
fi
filter=/etc/fail2ban/filter.d/sshd.conf
[ -r "$filter" ] || { echo "missing $filter" >&2; exit 1; }

work="$(mktemp -d)"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi
export AUTHLOG_BENCH_FILE="$work/auth.log"

echo "== ours: cargo bench --bench authlog"
cargo bench --quiet --bench authlog | tee "$work/ours.txt"
lines="$(awk '$1=="RESULT" && $2=="lines" {print $3}' "$work/ours.txt")"
ours="$(awk '$1=="RESULT" && $2=="e2e_lines_per_sec" {print $3}' "$work/ours.txt")"
ours_mem="$(awk '$1=="RESULT" && $2=="parse_detect_lines_per_sec" {print $3}' "$work/ours.txt")"

echo
echo "== fail2ban: fail2ban-regex $AUTHLOG_BENCH_FILE $filter"
fail2ban-regex --version | head -1
start="$(date +%s.%N)"
fail2ban-regex "$AUTHLOG_BENCH_FILE" "$filter" >"$work/f2b.txt" 2>&1
end="$(date +%s.%N)"
grep -E '^(Lines|Failregex):' "$work/f2b.txt" || tail -5 "$work/f2b.txt"

awk -v l="$lines" -v s="$start" -v e="$end" -v o="$ours" -v m="$ours_mem" 'BEGIN {
    t = e - s; f = l / t;
    printf "\nfail2ban-regex: %.1f s for %d lines = %.0f lines/s\n", t, l, f;
    printf "ours (tail+parse+detect): %.0f lines/s = %.1fx fail2ban\n", o, o / f;
    printf "ours (parse+detect, memory): %.0f lines/s = %.1fx fail2ban\n", m, m / f;
    if (o / f >= 20) print "goal (>= 20x): met"; else print "goal (>= 20x): NOT met";
}'
