#!/usr/bin/env bash
# Firewall figures beside fail2ban's nftables action, in one run, inside network
# namespaces this script creates (the machine's own ruleset is never touched):
#
# 1. fail2ban 1.x with action `nftables-allports` (one `nft add element` per ban) bans
#    2,000 addresses (10.200.0.0 upwards) given in one `fail2ban-client set JAIL banip`;
#    timed until all 2,000 are in its nftables set;
# 2. `cargo bench --bench firewall`: the same 2,000 addresses (one call, and one call per
#    address), 100,000 blocks in one call, single-block latency beside 100,000, memory per
#    block;
# 3. prints the figures side by side. Prints, asserts nothing.
#
# Needs root, iproute2, nftables and fail2ban (Debian: apt-get install nftables iproute2
# fail2ban). Usage: benches/firewall.sh  (FIREWALL_BENCH_BIN=path runs a bench binary built
# earlier instead of `cargo bench`)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, nftables)" >&2; exit 1; }
for p in ip nft fail2ban-server fail2ban-client; do
    command -v "$p" >/dev/null || { echo "missing $p" >&2; exit 1; }
done

ns="svcbench-f2b-$$"
work="$(mktemp -d)"
cleanup() {
    ip netns exec "$ns" fail2ban-client -c "$work/conf" stop >/dev/null 2>&1 || true
    [ -f "$work/f2b.pid" ] && kill "$(cat "$work/f2b.pid")" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up

# fail2ban's own configuration tree, with a jail that bans through nftables-allports.
cp -r /etc/fail2ban "$work/conf"
rm -f "$work/conf/jail.d/"* "$work/conf/jail.local"
touch "$work/empty.log"
cat > "$work/conf/fail2ban.local" <<EOF
[Definition]
socket = $work/f2b.sock
pidfile = $work/f2b.pid
dbfile = :memory:
logtarget = $work/f2b.log
loglevel = WARNING
EOF
cat > "$work/conf/filter.d/svcbench.conf" <<'EOF'
[Definition]
failregex = ^svcbench never matches <HOST>$
EOF
cat > "$work/conf/jail.local" <<EOF
[DEFAULT]
banaction = nftables-allports
banaction_allports = nftables-allports
[svcbench]
enabled = true
filter = svcbench
logpath = $work/empty.log
backend = polling
bantime = 86400
maxretry = 1000
EOF

ip netns exec "$ns" fail2ban-server -c "$work/conf" -b -x >/dev/null
for _ in $(seq 200); do
    ip netns exec "$ns" fail2ban-client -c "$work/conf" ping >/dev/null 2>&1 && break
    sleep 0.1
done
fail2ban-client --version | head -1
ips=()
for i in $(seq 0 1999); do ips+=("10.200.$((i / 256)).$((i % 256))"); done
count() {
    ip netns exec "$ns" nft list set inet f2b-table addr-set-svcbench 2>/dev/null \
        | tr ',{}' '\n\n\n' | grep -cE '^[[:space:]]*10\.200\.' || true
}
start="$(date +%s.%N)"
ip netns exec "$ns" fail2ban-client -c "$work/conf" set svcbench banip "${ips[@]}" >/dev/null
while [ "$(count)" -lt 2000 ]; do sleep 0.2; done
end="$(date +%s.%N)"
f2b="$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')"
echo "fail2ban (nftables-allports): 2,000 bans in ${f2b} s = $(awk -v t="$f2b" 'BEGIN { printf "%.0f", 2000 / t }') addresses/s"

echo
echo "== svc: cargo bench --bench firewall"
if [ -n "${FIREWALL_BENCH_BIN:-}" ]; then
    "$FIREWALL_BENCH_BIN" | tee "$work/ours.txt"   # a bench binary built earlier
else
    cargo bench --quiet --bench firewall | tee "$work/ours.txt"
fi
one="$(awk '$1=="RESULT" && $2=="svc_2000_one_call_seconds" {print $3}' "$work/ours.txt")"
each="$(awk '$1=="RESULT" && $2=="svc_2000_per_address_seconds" {print $3}' "$work/ours.txt")"
echo
awk -v f="$f2b" -v o="$one" -v e="$each" 'BEGIN {
    printf "2,000 addresses: fail2ban %.2f s; svc one call %.3f s (%.0fx); svc one call per address %.2f s (%.0fx)\n",
        f, o, f / o, e, f / e;
}'
