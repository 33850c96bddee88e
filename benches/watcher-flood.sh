#!/usr/bin/env bash
# File watcher under a flood (issue 9, item 2), on the release binary, per backend:
# 8 shell processes write 100,000 small .php files into a watched root, one of them writes a
# webshell halfway through. Prints how long the flood took, when the webshell was reported
# relative to the end of the flood, whether the kernel queue overflowed, the losses of
# fanotify.analyzer, the peak of fanotify.reconcile, and the scan rate from the end of the
# flood until the reconcile walk went idle. Asserts nothing.
#
# Needs root (fanotify), curl and jq. Usage: benches/watcher-flood.sh [files-per-process]
# Env: KEEP=1 keeps the temp dir; SKIP_BUILD=1 uses target/release/svc as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
per=${1:-12500}
procs=8
command -v curl >/dev/null && command -v jq >/dev/null || { echo "install curl and jq" >&2; exit 1; }
[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release -q
work=$(mktemp -d)
svc_pid=
cleanup() {
    [ -n "$svc_pid" ] && kill "$svc_pid" 2>/dev/null && wait "$svc_pid" 2>/dev/null || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
token=bench-read-token-0123456789
shell='<?php
// innocent looking header
@eval($_POST["cmd"]);
?>'
now() { date +%s.%N; }
api() { curl -skf -H "Authorization: Bearer $token" "https://127.0.0.1:19445$1"; }

for backend in auto inotify; do
    run="$work/$backend"
    mkdir -p "$run/www/flood" "$run/fixture"
    cat > "$run/svc.toml" <<TOML
state_path = "$run/state"
[webui]
listen = "127.0.0.1:19445"
[[webui.tokens]]
name = "bench"
token = "$token"
scope = "read"
[files]
watch = ["$run/www"]
backend = "$backend"
[logs]
auth = []
[checks]
critical_interval_min = 0
deep_interval_min = 0
root = "$run/fixture"
TOML
    ./target/release/svc daemon -c "$run/svc.toml" >"$run/out.log" 2>"$run/err.log" &
    svc_pid=$!
    for _ in $(seq 200); do api /api/v1/status >/dev/null 2>&1 && break; sleep 0.05; done
    detail=$(api /api/v1/components | jq -r '.items[] | select(.name=="files") | .detail')
    start=$(now)
    pids=()
    for p in $(seq 0 $((procs - 1))); do
        mkdir -p "$run/www/flood/p$p"
        mid=""
        [ "$p" = 3 ] && mid="if [ \$i -eq $((per / 2)) ]; then printf '%s' \"\$SHELLCODE\" > shell.php; fi; "
        SHELLCODE="$shell" sh -c "cd \"\$1\"; i=0; while [ \$i -lt $per ]; do ${mid}echo '<?php echo \"hello\";' > f\$i.php; i=\$((i+1)); done" flood "$run/www/flood/p$p" &
        pids+=($!)
    done
    wait "${pids[@]}"
    end=$(now)
    scanned0=$(api /api/v1/components | jq '.items[] | select(.name=="files") | .events_total')
    target="$run/www/flood/p3/shell.php"
    found=""
    peak=0
    idle=""
    for _ in $(seq 3600); do
        t=$(now)
        if [ -z "$found" ]; then
            first=$(api /api/v1/findings | jq -r --arg p "$target" '[.items[] | select(.path==$p)][0].first_seen // empty')
            [ -n "$first" ] && found=$(date -d "$first" +%s.%N)
        fi
        row=$(api /api/v1/status | jq -c '.queues["fanotify.reconcile"]')
        w=$(jq '.waiting' <<<"$row"); r=$(jq '.running' <<<"$row")
        [ "$w" -gt "$peak" ] && peak=$w
        if [ -n "$found" ] && [ "$w" = 0 ] && [ "$r" = 0 ]; then idle=$t; break; fi
        sleep 0.1
    done
    scanned1=$(api /api/v1/components | jq '.items[] | select(.name=="files") | .events_total')
    losses=$(api /api/v1/status | jq '.queues["fanotify.analyzer"].dropped_total')
    rlosses=$(jq '.dropped_total' <<<"$row")
    overflows=$(grep -c "queue overflowed" "$run/err.log" || true)
    awk -v b="$backend" -v d="$detail" -v n=$((procs * per)) -v s="$start" -v e="$end" \
        -v f="${found:-0}" -v i="${idle:-0}" -v a="$scanned0" -v z="$scanned1" -v l="$losses" \
        -v pk="$peak" -v rl="$rlosses" -v o="$overflows" 'BEGIN {
        printf "%s (%s)\n", b, d;
        printf "  flood: %d files in %.1f s; kernel overflow logged: %s; fanotify.analyzer losses: %d\n", n, e - s, (o > 0 ? "yes" : "no"), l;
        if (f > 0) printf "  webshell reported %+.1f s after the end of the flood\n", f - e;
        else printf "  webshell NOT reported\n";
        printf "  fanotify.reconcile: peak %d directory tasks, %d losses\n", pk, rl;
        if (i > 0) printf "  after the flood: %d files scanned in %.1f s until the walk was idle (%.0f files/s)\n", z - a, i - e, (z - a) / (i - e);
    }'
    kill "$svc_pid"; wait "$svc_pid" 2>/dev/null || true; svc_pid=
done
