#!/usr/bin/env bash
# GET /api/v1/status over keep-alive TLS on loopback (wrk, 2 threads, 32 connections) beside
# nginx serving a static JSON file of the same size over TLS, in the same run.
# Needs: wrk, nginx (Debian: apt-get install wrk nginx-light). Goal: >= 50% of nginx's
# requests/s and p99 < 5 ms. Usage: benches/http-vs-nginx.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
command -v wrk >/dev/null && command -v nginx >/dev/null || { echo "install wrk and nginx first" >&2; exit 1; }
cargo build --release -q
work=$(mktemp -d)
trap 'kill $svc_pid 2>/dev/null || true; nginx -c "$work/nginx.conf" -s stop 2>/dev/null || true; rm -rf "$work"' EXIT
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
TOML
./target/release/svc daemon -c "$work/svc.toml" >/dev/null 2>&1 &
svc_pid=$!
for _ in $(seq 100); do curl -skf -H "Authorization: Bearer $token" https://127.0.0.1:19443/api/v1/status -o "$work/status.json" && break; sleep 0.05; done
size=$(stat -c %s "$work/status.json")
mkdir -p "$work/www/api/v1" && cp "$work/status.json" "$work/www/api/v1/status"
cat > "$work/nginx.conf" <<NGINX
user root;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  default_type application/json;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:19444 ssl;
    ssl_certificate $work/state/tls/cert.pem;
    ssl_certificate_key $work/state/tls/key.pem;
    root $work/www;
  }
}
NGINX
nginx -c "$work/nginx.conf"
sleep 0.3
echo "body size: $size bytes (svc status JSON; nginx serves the same bytes)"
echo "svc idle RSS: $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$svc_pid/status)"
echo "== svc =="
wrk -t2 -c32 -d"${secs}s" --latency -H "Authorization: Bearer $token" https://127.0.0.1:19443/api/v1/status | grep -E 'Requests/sec|50%|99%|Non-2xx|Socket errors'
echo "svc RSS after load: $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$svc_pid/status)"
echo "== nginx =="
wrk -t2 -c32 -d"${secs}s" --latency -H "Authorization: Bearer $token" https://127.0.0.1:19444/api/v1/status | grep -E 'Requests/sec|50%|99%|Non-2xx|Socket errors'
