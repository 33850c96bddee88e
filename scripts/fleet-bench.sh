#!/usr/bin/env bash
# Fleet benchmark (issue 30): 10,000 ban decisions imported with `cscli decisions import`
# into a real CrowdSec LAPI, applied by one svc daemon (fleet bouncer, nftables) and, in the
# same run, by crowdsec-firewall-bouncer (nftables mode); time until each has all 10,000
# addresses in its nftables set, and each process's peak RSS (VmHWM).
#
#   sudo scripts/fleet-bench.sh [SVC_BINARY]     (default target/release/svc)
#
# Needs root, nftables and iproute2, and the extracted packages of scripts/crowdsec-test.sh.
# Everything runs in two network namespaces the script makes and deletes: `svcbench-s`
# (the LAPI on 192.0.2.1 and the svc daemon) and `svcbench-b` (crowdsec-firewall-bouncer),
# joined by a veth pair. Addresses are 2001:db8:f1ee:N::1 (documentation space; one per /64,
# so no two are adjacent and the bouncer's interval sets cannot merge them).
set -euo pipefail
cd "$(dirname "$0")/.."
svc=$(realpath "${1:-target/release/svc}")
n=${FLEET_BENCH_DECISIONS:-10000}
root=${CROWDSEC_TEST_DIR:-/opt/crowdsec-test}/root
scripts/crowdsec-test.sh
work=$(mktemp -d /tmp/svc-fleet-bench.XXXXXX)
S=svcbench-s
B=svcbench-b
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 1
    ip netns del $S 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add $S
ip netns add $B
ip -n $S link set lo up
ip -n $B link set lo up
ip -n $S link add v0 type veth peer name v1 netns $B
ip -n $S addr add 192.0.2.1/24 dev v0
ip -n $B addr add 192.0.2.2/24 dev v1
ip -n $S link set v0 up
ip -n $B link set v1 up

# The LAPI: API only, no Central API, SQLite in $work.
l=$work/lapi
mkdir -p "$l/data" "$l/hub" "$l/notifications" "$l/plugins"
echo '{}' >"$l/hub/.index.json"
printf 'simulation: false\nexclusions: []\n' >"$l/simulation.yaml"
: >"$l/acquis.yaml"
cp "$root/etc/crowdsec/profiles.yaml" "$l/profiles.yaml"
port=18088
cat >"$l/config.yaml" <<EOF
common:
  daemonize: false
  log_media: stdout
  log_level: warning
  working_dir: .
config_paths:
  config_dir: $l/
  data_dir: $l/data/
  simulation_path: $l/simulation.yaml
  hub_dir: $l/hub/
  index_path: $l/hub/.index.json
  notification_dir: $l/notifications/
  plugin_dir: $l/plugins/
crowdsec_service:
  acquisition_path: $l/acquis.yaml
cscli:
  output: human
db_config:
  log_level: warning
  type: sqlite
  db_path: $l/data/crowdsec.db
  use_wal: true
api:
  client:
    credentials_path: $l/local_api_credentials.yaml
  server:
    log_level: warning
    listen_uri: 0.0.0.0:$port
    profiles_path: $l/profiles.yaml
    online_client:
    trusted_ips:
      - 127.0.0.1
prometheus:
  enabled: false
EOF
cscli() { ip netns exec $S "$root/usr/bin/cscli" -c "$l/config.yaml" "$@"; }
cscli machines add -a -f "$l/local_api_credentials.yaml" >/dev/null 2>&1
sed -i "s|^url: .*|url: http://127.0.0.1:$port|" "$l/local_api_credentials.yaml"
cscli bouncers add svc-bench -k svc-bench-key-0123456789 >/dev/null 2>&1
cscli bouncers add fw-bench -k fw-bench-key-0123456789 >/dev/null 2>&1
ip netns exec $S "$root/usr/bin/crowdsec" -c "$l/config.yaml" -no-cs >"$work/lapi.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    ip netns exec $S bash -c "echo >/dev/tcp/127.0.0.1/$port" 2>/dev/null && break
    sleep 0.1
done

# svc: fleet bouncer only, firewall on, blocks take effect.
st=$work/svc-state
cat >"$work/svc.toml" <<EOF
state_path = "$st"
[webui]
listen = "127.0.0.1:0"
[firewall]
enabled = true
[files]
watch = []
[checks]
critical_interval_min = 0
deep_interval_min = 0
[auto_response]
dry_run = false
[fleet]
lapi_url = "http://127.0.0.1:$port"
bouncer_key = "svc-bench-key-0123456789"
poll_seconds = 1
EOF
ip netns exec $S "$svc" daemon -c "$work/svc.toml" >"$work/svc.log" 2>&1 &
svc_pid=$!
pids+=($svc_pid)

# crowdsec-firewall-bouncer: nftables mode in its own namespace.
cat >"$work/fw.yaml" <<EOF
mode: nftables
pid_dir: $work/
update_frequency: 1s
daemonize: false
log_mode: file
log_dir: $work/
log_level: warning
api_url: http://192.0.2.1:$port/
api_key: fw-bench-key-0123456789
disable_ipv6: false
deny_action: DROP
deny_log: false
supported_decisions_types:
  - ban
nftables:
  ipv4:
    enabled: true
    set-only: false
    table: crowdsec
    chain: crowdsec-chain
  ipv6:
    enabled: true
    set-only: false
    table: crowdsec6
    chain: crowdsec6-chain
prometheus:
  enabled: false
EOF
ip netns exec $B "$root/usr/bin/crowdsec-firewall-bouncer" -c "$work/fw.yaml" >"$work/fw.out" 2>&1 &
fw_pid=$!
pids+=($fw_pid)
sleep 5

count_svc() { ip netns exec $S nft list set inet svc block6 2>/dev/null | grep -o '2001:db8:f1ee:' | wc -l; }
count_fw() { ip netns exec $B nft list ruleset 2>/dev/null | grep -o '2001:db8:f1ee:' | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
echo "before: svc RSS $(rss $svc_pid) KiB, crowdsec-firewall-bouncer RSS $(rss $fw_pid) KiB"

{
    echo "duration,scope,value"
    for i in $(seq 1 "$n"); do
        printf '4h,ip,2001:db8:f1ee:%x::1\n' "$i"
    done
} >"$work/decisions.csv"

t0=$(date +%s.%N)
cscli decisions import -i "$work/decisions.csv" >"$work/import.log" 2>&1 || { cat "$work/import.log" >&2; exit 1; }
t_import=$(date +%s.%N)
svc_done=""
fw_done=""
limit=${FLEET_BENCH_WAIT:-60}
while [ -z "$svc_done" ] || [ -z "$fw_done" ]; do
    now=$(date +%s.%N)
    if [ -z "$svc_done" ] && [ "$(count_svc)" -ge "$n" ]; then svc_done=$now; fi
    if [ -z "$fw_done" ] && [ "$(count_fw)" -ge "$n" ]; then fw_done=$now; fi
    if awk -v a="$now" -v b="$t0" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then
        break
    fi
    sleep 0.2
done
since() { awk -v a="$1" -v b="$t0" 'BEGIN {printf "%.1f", a - b}'; }
report() { # name done count pid
    if [ -n "$2" ]; then
        echo "$1: all $n in nftables $(since "$2") s after the import started; peak RSS $(hwm "$4") KiB"
    else
        echo "$1: only $3 of $n in nftables after ${limit} s; peak RSS $(hwm "$4") KiB"
    fi
}
echo "decisions: $n; cscli decisions import took $(since "$t_import") s"
report svc "$svc_done" "$(count_svc)" "$svc_pid"
report crowdsec-firewall-bouncer "$fw_done" "$(count_fw)" "$fw_pid"
