#!/usr/bin/env bash
# A legitimate client's latency while slow clients flood the server: svc beside nginx, same
# certificate, same loopback machine, same run.
#
# The flood (benches/slow_clients.rs, kept up for the whole measurement): 2,000 connections
# that send nothing, 2,000 that send one byte of a TLS record every 5 s (80 loopback
# addresses, 50 each) and 300 from one address that send the first five bytes of a TLS
# record. Meanwhile the legitimate client alternates a request on its keep-alive connection
# and one on a new connection, every 10 ms, and reports p50/p99/max of each.
# Goal: svc p99 under 50 ms with the flood running.
#
# Needs: nginx (Debian: apt-get install nginx-light). Runs as root or with a hard open-file
# limit of at least 10,000. Usage: benches/slow-clients.sh [seconds per measurement, 20]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
command -v nginx >/dev/null || { echo "install nginx first" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 10000 ] || { echo "open-file limit $(ulimit -n) is too low (need 10000)" >&2; exit 1; }
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
cargo build --release -q
cargo bench -q --bench slow_clients --no-run 2>/dev/null
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
[webui]
listen = "127.0.0.1:19445"
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
TOML
./target/release/svc daemon -c "$work/svc.toml" >/dev/null 2>"$work/svc.log" &
svc_pid=$!
for _ in $(seq 200); do
    curl -skf -H "Authorization: Bearer $token" https://127.0.0.1:19445/api/v1/health -o "$work/health.json" && break
    sleep 0.05
done
mkdir -p "$work/www/api/v1" && cp "$work/health.json" "$work/www/api/v1/health"
cat > "$work/nginx.conf" <<NGINX
user root;
worker_processes 2;
worker_rlimit_nofile 40000;
pid $work/nginx.pid;
error_log $work/nginx-error.log crit;
events { worker_connections 16384; }
http {
  access_log off;
  default_type application/json;
  client_header_timeout 10s;
  keepalive_timeout 30s;
  send_timeout 30s;
  keepalive_requests 1000000;
  open_file_cache max=64;
  server {
    listen 127.0.0.1:19446 ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/state/tls/cert.pem;
    ssl_certificate_key $work/state/tls/key.pem;
    root $work/www;
  }
}
NGINX
nginx -c "$work/nginx.conf"
sleep 0.3
echo "machine: $(nproc) cores (shared: other work may run at the same time); ${secs}s per measurement"
echo "svc: /api/v1/health with a bearer token; nginx: the same bytes as a static file"
run() { # label port flood
    SVC_BENCH_TARGET=127.0.0.1:$2 SVC_BENCH_CERT=$work/state/tls/cert.pem \
    SVC_BENCH_AUTH="Bearer $token" SVC_BENCH_PATH=/api/v1/health \
    SVC_BENCH_SECONDS=$secs SVC_BENCH_FLOOD=$3 SVC_BENCH_LABEL=$1 \
        cargo bench -q --bench slow_clients 2>/dev/null | tee -a "$work/results"
}
run svc 19445 0
run nginx 19446 0
run svc 19445 1
echo "svc after the flood: $(curl -sk -H "Authorization: Bearer $token" https://127.0.0.1:19445/api/v1/status | python3 -c 'import json,sys; h=json.load(sys.stdin)["http"]; print("open", h["open_connections"], "refused", h["refused"], "timeouts", h["timeouts"], "handshake failures", h["handshake_failures_total"])')"
echo "svc RSS: $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$svc_pid/status), log lines: $(wc -l < "$work/svc.log")"
run nginx 19446 1
echo "== p99 with the flood (keep-alive / new connection) =="
awk '/flood=on/ {
    for (i = 1; i <= NF; i++) if ($i == "p99") { v[++n] = $(i + 1) }
    printf "%-6s %8.2f ms / %8.2f ms\n", $1, v[n - 1], v[n]
}' "$work/results"
