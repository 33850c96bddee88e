#!/usr/bin/env bash
# Compares the authentication-log detector with fail2ban on the same 1,000,000-line log, in
# the same run, two ways:
#
# 1. Parser vs parser: `cargo bench --bench authlog` (svc's tail+parse+detect in one process,
#    best of 3) against `fail2ban-regex LOG /etc/fail2ban/filter.d/sshd.conf` (single-threaded
#    Python), in lines/s.
# 2. Daemon vs daemon: the same lines appended at once to a log that a running daemon
#    follows, in 128 KiB writes for both (`cat >>` for fail2ban, the logtail bench's
#    default for svc), each timed from the start of the append. svc: `cargo bench --bench
#    logtail -- --skip-latency --log LOG` starts the real daemon and times until every
#    line's findings and the log's position are committed.
#    fail2ban: fail2ban-server with the stock sshd filter and jail (backend polling, no
#    actions, findtime 30 days so the log's timestamps count, in-memory database), timed
#    until `fail2ban-client status sshd` "Total failed" settles (polled every 0.5 s;
#    settled when unchanged for 3 s; the time of the last change is reported). Peak RSS
#    (VmHWM) of both daemons.
#
# Each round runs both tools (alternating which goes first) and prints one line with both
# figures and the ratio; the script ends with the median ratio of each case.
#
# Usage: benches/authlog-vs-fail2ban.sh [parse|daemon|all]   (default all)
# Env:   ROUNDS (default 3), AUTHLOG_BENCH_LINES (default 1000000), KEEP=1 keeps the temp dir.
set -euo pipefail

cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
what="${1:-all}"
rounds="${ROUNDS:-3}"

if ! command -v fail2ban-regex >/dev/null 2>&1 || ! command -v fail2ban-server >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "fail2ban missing and not root: install fail2ban first" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fail2ban >/dev/null
fi
filter=/etc/fail2ban/filter.d/sshd.conf
[ -r "$filter" ] || { echo "missing $filter" >&2; exit 1; }

work="$(mktemp -d)"
f2b_conf=""
cleanup() {
    if [ -n "$f2b_conf" ] && [ -S "$work/f2b.sock" ]; then
        fail2ban-client -c "$f2b_conf" stop >/dev/null 2>&1 || true
    fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
export AUTHLOG_BENCH_FILE="$work/auth.log"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

ours_parse() { # -> lines/s of tail+parse+detect (best of 3 inside the bench)
    cargo bench --quiet --bench authlog >"$work/ours.txt" 2>&1
    awk '$1=="RESULT" && $2=="e2e_lines_per_sec" {print $3}' "$work/ours.txt"
}
theirs_parse() { # -> lines/s of fail2ban-regex
    local lines t0 t1
    lines="$(wc -l <"$AUTHLOG_BENCH_FILE")"
    t0="$(now)"
    fail2ban-regex "$AUTHLOG_BENCH_FILE" "$filter" >"$work/f2b-regex.txt" 2>&1
    t1="$(now)"
    awk -v l="$lines" -v s="$(sub "$t0" "$t1")" 'BEGIN { printf "%.0f", l / s }'
}

if [ "$what" = parse ] || [ "$what" = all ]; then
    echo "== parser vs parser: svc tail+parse+detect (in process) vs fail2ban-regex, $rounds rounds"
    cargo bench --quiet --bench authlog --no-run 2>/dev/null || cargo bench --bench authlog --no-run
    fail2ban-regex --version | head -1
    : >"$work/ratio-parse"
    for round in $(seq 1 "$rounds"); do
        if [ $((round % 2)) = 1 ]; then o="$(ours_parse)"; t="$(theirs_parse)"; else t="$(theirs_parse)"; o="$(ours_parse)"; fi
        r="$(awk -v o="$o" -v t="$t" 'BEGIN { printf "%.1f", o / t }')"
        echo "$r" >>"$work/ratio-parse"
        printf 'round %d: svc %.0f lines/s  fail2ban-regex %.0f lines/s  ratio %sx\n' "$round" "$o" "$t" "$r"
    done
    grep -E '^(Lines|Failregex):' "$work/f2b-regex.txt" || true
    echo "median ratio (parser): $(median <"$work/ratio-parse")x (goal >= 20x)"
fi

if [ "$what" = daemon ] || [ "$what" = all ]; then
    echo
    echo "== daemon vs daemon: 1,000,000 lines appended at once to a followed log, $rounds rounds"
    [ -s "$AUTHLOG_BENCH_FILE" ] || cargo bench --quiet --bench authlog >/dev/null 2>&1
    lt="$(cargo bench --bench logtail --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*logtail[^"]*\)".*/\1/p' | tail -1)"
    [ -x "$lt" ] || { echo "cannot find the logtail bench executable" >&2; exit 1; }

    f2b_conf="$work/f2b-conf"
    mkdir -p "$f2b_conf"
    cp -r /etc/fail2ban/filter.d "$f2b_conf/"
    cp /etc/fail2ban/paths-common.conf /etc/fail2ban/paths-debian.conf "$f2b_conf/"
    cat >"$f2b_conf/fail2ban.conf" <<EOF
[Definition]
loglevel = WARNING
logtarget = $work/f2b.log
syslogsocket = auto
socket = $work/f2b.sock
pidfile = $work/f2b.pid
allowipv6 = auto
dbfile = :memory:
dbpurgeage = 1d
EOF
    cat >"$f2b_conf/jail.conf" <<EOF
[INCLUDES]
before = paths-debian.conf
[DEFAULT]
backend = polling
findtime = 30d
bantime = 1h
maxretry = 5
banaction =
action =
[sshd]
enabled = true
filter = sshd
logpath = $work/f2b-auth.log
EOF
    total_failed() {
        fail2ban-client -c "$f2b_conf" status sshd 2>/dev/null | awk -F'\t' '/Total failed/ {print $2}'
    }

    ours_daemon() { # -> "seconds peak_kib"
        "$lt" --skip-latency --log "$AUTHLOG_BENCH_FILE" --summary "$work/lt.txt" >"$work/lt.out" 2>&1
        local complete
        complete="$(sed -n 's/^drain_complete=//p' "$work/lt.txt")"
        [ "$complete" = true ] || echo "svc drain incomplete: $(cat "$work/lt.out")" >&2
        echo "$(sed -n 's/^drain_secs=//p' "$work/lt.txt") $(sed -n 's/^peak_rss_kib=//p' "$work/lt.txt")"
    }
    theirs_daemon() { # -> "seconds peak_kib total_failed"
        : >"$work/f2b-auth.log"
        fail2ban-client -c "$f2b_conf" start >/dev/null 2>&1
        local t0 last n prev=-1 changed stable=0 pid peak
        until [ -n "$(total_failed)" ]; do sleep 0.2; done
        pid="$(cat "$work/f2b.pid")"
        t0="$(now)"
        cat "$AUTHLOG_BENCH_FILE" >>"$work/f2b-auth.log"
        changed="$t0"
        while :; do
            sleep 0.5
            n="$(total_failed)"
            if [ "$n" != "$prev" ]; then prev="$n"; changed="$(now)"; stable=0; else stable=$((stable + 1)); fi
            if [ "$n" != 0 ] && [ "$stable" -ge 6 ]; then break; fi
        done
        peak="$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
        fail2ban-client -c "$f2b_conf" stop >/dev/null
        while [ -S "$work/f2b.sock" ]; do sleep 0.1; done
        echo "$(sub "$t0" "$changed") $peak $prev"
    }

    : >"$work/ratio-daemon"
    for round in $(seq 1 "$rounds"); do
        if [ $((round % 2)) = 1 ]; then o="$(ours_daemon)"; t="$(theirs_daemon)"; else t="$(theirs_daemon)"; o="$(ours_daemon)"; fi
        read -r os orss <<<"$o"
        read -r ts trss tfailed <<<"$t"
        r="$(awk -v o="$os" -v t="$ts" 'BEGIN { printf "%.1f", t / o }')"
        echo "$r" >>"$work/ratio-daemon"
        printf 'round %d: svc drained in %.3f s (peak RSS %.1f MiB)  fail2ban-server settled in %.1f s (peak RSS %.1f MiB, %s failures counted)  ratio %sx\n' \
            "$round" "$os" "$(awk -v k="$orss" 'BEGIN { print k / 1024 }')" "$ts" \
            "$(awk -v k="$trss" 'BEGIN { print k / 1024 }')" "$tfailed" "$r"
    done
    grep -E '^drain round' "$work/lt.out" | sed 's/^/last svc round: /' || true
    echo "median ratio (daemon drain, fail2ban time / svc time): $(median <"$work/ratio-daemon")x"
fi
