#!/usr/bin/env bash
# GET /api/v1/status over keep-alive TLS on loopback (wrk, 2 threads) beside nginx serving
# the same bytes as a static file over TLS, same certificate, same run. Both negotiate
# TLS 1.3 (printed). Three rounds at 32 connections and three at 200, svc and nginx
# alternating (who goes first alternates too); one line per round with both figures and
# the ratio, then the median ratio per concurrency.
# Goals: >= 0.8x nginx's requests/s at 32 connections, 1.0x at 200. Each line also gives the
# server CPU time per request (user + system, all its processes): on a shared machine the
# request rates follow each side's share of the CPU (svc runs more threads than nginx has
# processes), the CPU cost per request does not.
# Needs: wrk, nginx, openssl (Debian: apt-get install wrk nginx-light openssl).
# Usage: benches/http-vs-nginx.sh [seconds per measurement, 10]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
for tool in wrk nginx openssl curl python3; do
    command -v $tool >/dev/null || { echo "install $tool first" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
cargo build --release -q
work=$(mktemp -d)
svc_pid=
cleanup() {
    [ -n "$svc_pid" ] && kill "$svc_pid" 2>/dev/null && wait "$svc_pid" 2>/dev/null || true
    [ -f "$work/nginx.pid" ] && nginx -c "$work/nginx.conf" -s stop 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
token=bench-read-token-0123456789
cat > "$work/svc.toml" <<TOML
state_path = "$work/state"
# Never touch the host's nftables ruleset from a benchmark.
[firewall]
enabled = false
[webui]
listen = "127.0.0.1:19443"
[[webui.tokens]]
name = "bench"
token = "$token"
scope = "read"
[logs]
auth = []
[files]
watch = []
[checks]
critical_interval_min = 0
deep_interval_min = 0
# wrk opens every connection from 127.0.0.1: the per-address limit (64) would refuse most
# of the 200 (nginx has no such limit by default).
[webui.limits]
max_connections_per_address = 1024
TOML
./target/release/svc daemon -c "$work/svc.toml" >/dev/null 2>"$work/svc.log" &
svc_pid=$!
svc_url=https://127.0.0.1:19443/api/v1/status
nginx_url=https://127.0.0.1:19444/api/v1/status
# binary_hash appears once a background thread has hashed the executable: wait for the
# complete answer before copying it for nginx.
for _ in $(seq 400); do
    curl -skf -H "Authorization: Bearer $token" $svc_url -o "$work/status.json" \
        && grep -q binary_hash "$work/status.json" && break
    sleep 0.05
done
mkdir -p "$work/www/api/v1" && cp "$work/status.json" "$work/www/api/v1/status"
cat > "$work/nginx.conf" <<NGINX
user root;
worker_processes auto;
worker_rlimit_nofile 40000;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/json;
  keepalive_requests 1000000;
  open_file_cache max=64;
  server {
    listen 127.0.0.1:19444 ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/state/tls/cert.pem;
    ssl_certificate_key $work/state/tls/key.pem;
    root $work/www;
  }
}
NGINX
nginx -c "$work/nginx.conf"
sleep 0.3

proto() { openssl s_client -connect "$1" -servername localhost </dev/null 2>/dev/null | grep -m1 -oE 'TLSv1\.[0-9]' || echo unknown; }
echo "machine: $(nproc) cores (shared: other work may run at the same time); ${secs}s per measurement"
echo "svc: webui.limits.max_connections_per_address = 1024 (wrk connects from one address)"
echo "negotiated: svc $(proto 127.0.0.1:19443), nginx $(proto 127.0.0.1:19444)"
# The bodies: nginx serves a copy of svc's answer; svc's own answer changes (uptime,
# counters) but must keep the same keys and about the same size.
check_bodies() {
    curl -skf -H "Authorization: Bearer $token" $svc_url -o "$work/svc-now.json"
    curl -skf $nginx_url -o "$work/nginx-now.json"
    python3 - "$work/svc-now.json" "$work/nginx-now.json" <<'PY'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
ka, kb = sorted(json.load(open(a))), sorted(json.load(open(b)))
sa, sb = os.path.getsize(a), os.path.getsize(b)
ok = ka == kb and abs(sa - sb) <= sb // 20
print(f"bodies: svc {sa} bytes, nginx {sb} bytes, same keys: {ka == kb} -> {'match' if ok else 'MISMATCH'}")
PY
}
check_bodies
echo "svc idle RSS: $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$svc_pid/status)"
# CPU seconds (user + system) used so far by the processes given.
cpu_of() { local t=0 p; for p in "$@"; do t=$(awk -v t="$t" '{print t + $14 + $15}' "/proc/$p/stat"); done; awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'; }
nginx_pids() { local m; m=$(cat "$work/nginx.pid"); echo "$m $(pgrep -P "$m" | tr '\n' ' ')"; }
bench() { # url conns pids... -> "req/s p99 cpu-us-per-request"
    local url=$1 conns=$2; shift 2
    local out c0 c1
    c0=$(cpu_of "$@")
    out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -H "Authorization: Bearer $token" "$url")
    c1=$(cpu_of "$@")
    if echo "$out" | grep -qE 'Non-2xx|Socket errors'; then
        echo "$out" | grep -E 'Non-2xx|Socket errors' | sed 's/^/    /' >&2
    fi
    local rps p99 n
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    echo "$rps $p99 $(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')"
}
for c in 32 200; do
    ratios=()
    for round in 1 2 3; do
        if [ $((round % 2)) -eq 1 ]; then
            read -r s_rps s_p99 s_cpu <<<"$(bench $svc_url "$c" $svc_pid)"
            read -r n_rps n_p99 n_cpu <<<"$(bench $nginx_url "$c" $(nginx_pids))"
        else
            read -r n_rps n_p99 n_cpu <<<"$(bench $nginx_url "$c" $(nginx_pids))"
            read -r s_rps s_p99 s_cpu <<<"$(bench $svc_url "$c" $svc_pid)"
        fi
        ratio=$(awk -v s="$s_rps" -v n="$n_rps" 'BEGIN { printf "%.2f", s / n }')
        ratios+=("$ratio")
        printf -- "-c%-3s round %d: svc %10s req/s (p99 %8s, %6s us CPU/req)   nginx %10s req/s (p99 %8s, %6s us CPU/req)   ratio %sx\n" \
            "$c" "$round" "$s_rps" "$s_p99" "$s_cpu" "$n_rps" "$n_p99" "$n_cpu" "$ratio"
    done
    median=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)
    goal=$([ "$c" = 32 ] && echo 0.8 || echo 1.0)
    echo "-c$c median ratio: ${median}x (goal ${goal}x)"
done
check_bodies
echo "svc RSS after load: $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$svc_pid/status)"
echo "svc log lines for the whole run: $(wc -l < "$work/svc.log") (wrk sends the IP address as SNI on every handshake)"
