#!/usr/bin/env bash
# Compares svc's content-signature scanner with YARA on the same corpus in the same run,
# with the same rules and timed the same way.
#
# 1. Installs yara from Debian if missing (apt-get update once, apt-get install -y yara).
# 2. `cargo bench --bench signatures` writes the 10,000-file PHP corpus, prints its in-process
#    figures, and writes as YARA source exactly the rules svc applies to the corpus's files
#    (generated from the same definitions in rules/signatures/: svc applies 22 of its 27
#    rules to .php files; YARA gets those 22, not all 27), and the list of files svc flags.
# 3. Times both as processes, the same way: start, rule compile, directory walk and scan,
#    page cache warm. svc runs the same bench binary in scan-only mode
#    (`--scan-dir DIR --threads N`); YARA runs `yara -r -p N`. Rounds alternate which tool
#    goes first; each round prints both times and the ratio, then the best of the rounds
#    and the median ratio, for 1 and 2 threads.
# 4. Checks that both flag the same files (YARA cannot see paths, so rules with path
#    conditions are not in its file when they do not apply to the corpus: none are needed).
#
# Usage: benches/signatures-vs-yara.sh [--files N]     (ROUNDS=3, KEEP=1 keeps the work dir)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
rounds="${ROUNDS:-3}"

if ! command -v yara >/dev/null 2>&1; then
    apt-get update
    apt-get install -y yara
fi

work="$(mktemp -d)"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi

cargo bench --bench signatures -- --corpus "$work/corpus" --yara-out "$work/rules.yar" \
    --flagged-out "$work/svc-flagged-inproc.txt" --summary "$work/ours.txt" "$@"
bin="$(cargo bench --bench signatures --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*signatures[^"]*\)".*/\1/p' | tail -1)"
[ -x "$bin" ] || { echo "cannot find the signatures bench executable" >&2; exit 1; }

bytes="$(sed -n 's/^bytes=//p' "$work/ours.txt")"
files="$(sed -n 's/^files=//p' "$work/ours.txt")"
applied="$(sed -n 's/^rules_applied=//p' "$work/ours.txt")"
shipped="$(sed -n 's/^rules_shipped=//p' "$work/ours.txt")"

echo
echo "yara $(yara --version); rules given to YARA: $(grep -c '^rule ' "$work/rules.yar") (svc applies $applied of its $shipped to these files)"
yara -w -r -p 1 "$work/rules.yar" "$work/corpus" >/dev/null # warm-up and syntax check
"$bin" --scan-dir "$work/corpus" >/dev/null                  # warm-up

secs() { # command...: wall seconds of one run
    local t0 t1
    t0="$(date +%s.%N)"
    "$@" >/dev/null
    t1="$(date +%s.%N)"
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
mbps() { awk -v n="$bytes" -v s="$1" 'BEGIN { printf "%.1f", n / s / 1e6 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
best() { sort -g | head -1; }

echo
echo "corpus: $files files, $bytes bytes; times include process start, rule compile and walk"
for threads in 1 2; do
    echo
    echo "== $threads thread(s), $rounds rounds (ratio = YARA time / svc time; > 1 means svc is faster)"
    : >"$work/svc-$threads" ; : >"$work/yara-$threads" ; : >"$work/ratio-$threads"
    for round in $(seq 1 "$rounds"); do
        if [ $((round % 2)) = 1 ]; then
            s="$(secs "$bin" --scan-dir "$work/corpus" --threads "$threads" --flagged-out "$work/svc-flagged.txt")"
            y="$(secs yara -w -r -p "$threads" "$work/rules.yar" "$work/corpus")"
        else
            y="$(secs yara -w -r -p "$threads" "$work/rules.yar" "$work/corpus")"
            s="$(secs "$bin" --scan-dir "$work/corpus" --threads "$threads" --flagged-out "$work/svc-flagged.txt")"
        fi
        r="$(awk -v s="$s" -v y="$y" 'BEGIN { printf "%.2f", y / s }')"
        echo "$s" >>"$work/svc-$threads"; echo "$y" >>"$work/yara-$threads"; echo "$r" >>"$work/ratio-$threads"
        printf 'round %d: svc %.3f s (%s MB/s)  yara %.3f s (%s MB/s)  ratio %sx\n' \
            "$round" "$s" "$(mbps "$s")" "$y" "$(mbps "$y")" "$r"
    done
    bs="$(best <"$work/svc-$threads")"; by="$(best <"$work/yara-$threads")"
    printf 'best of %d: svc %.3f s (%s MB/s)  yara %.3f s (%s MB/s)  ratio %.2fx\n' "$rounds" \
        "$bs" "$(mbps "$bs")" "$by" "$(mbps "$by")" "$(awk -v s="$bs" -v y="$by" 'BEGIN { print y / s }')"
    echo "median ratio ($threads thread(s)): $(median <"$work/ratio-$threads")x"
done

# Same files flagged? YARA prints "rule path" per match.
yara -w -r -p 1 "$work/rules.yar" "$work/corpus" | awk '{ $1 = ""; sub(/^ /, ""); print }' |
    sort -u >"$work/yara-flagged.txt"
sort -u "$work/svc-flagged.txt" >"$work/svc-flagged.sorted"
only_svc="$(comm -23 "$work/svc-flagged.sorted" "$work/yara-flagged.txt" | wc -l)"
only_yara="$(comm -13 "$work/svc-flagged.sorted" "$work/yara-flagged.txt" | wc -l)"
echo
echo "files flagged: svc $(wc -l <"$work/svc-flagged.sorted"), yara $(wc -l <"$work/yara-flagged.txt"), only svc $only_svc, only yara $only_yara"
if [ "$only_svc" = 0 ] && [ "$only_yara" = 0 ]; then
    echo "both flag the same files"
else
    echo "the tools disagree on these files (first 5 each):"
    comm -23 "$work/svc-flagged.sorted" "$work/yara-flagged.txt" | head -5 | sed 's/^/  only svc:  /'
    comm -13 "$work/svc-flagged.sorted" "$work/yara-flagged.txt" | head -5 | sed 's/^/  only yara: /'
fi
