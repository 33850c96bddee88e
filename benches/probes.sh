#!/usr/bin/env bash
# Kernel probes (issue 29): events/s each backend takes with no record lost, and the
# execution backend's cost in a fork/exec storm of 10,000 /bin/true (wall time without the
# daemon, then with only the execution backend, then with all four). Figures only.
#
# Needs root, a build with the feature (`cargo build --features bpf`; SVC=path to use
# another binary), curl, perl. Losses are read from /api/v1/status: `<backend>.kernel`
# dropped_total (the kernel's per-CPU drop counter) and `bpf.<backend>.output`.
#
# Usage: benches/probes.sh [events-per-step]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
svc=${SVC:-target/debug/svc}
[ -x "$svc" ] || cargo build --features bpf
dir=$(mktemp -d /tmp/svc-probes-bench.XXXXXX)
chmod 755 "$dir"
token=bench-read-token-0123456789abcdef
secret=$dir/probe-bench.key
echo x >"$secret"
chmod 644 "$secret"
daemon=

start() { # $1: backends (TOML array)
    rm -rf "$dir/state"
    cat >"$dir/svc.toml" <<TOML
state_path = "$dir/state"
[probes]
backends = $1
allowed_out_ports = [80]
sensitive_files = ["$secret"]
[firewall]
enabled = false
[webui]
listen = "127.0.0.1:0"
[[webui.tokens]]
name = "bench"
token = "$token"
scope = "read"
TOML
    "$svc" daemon -c "$dir/svc.toml" >"$dir/out.log" 2>"$dir/err.log" &
    daemon=$!
    for _ in $(seq 300); do
        addr=$(grep -o 'listening on https://[^ ]*' "$dir/out.log" | head -1 | sed 's|.*https://||') || true
        [ -n "$addr" ] && return 0
        sleep 0.1
    done
    echo "daemon did not start: $(cat "$dir/err.log")" >&2
    exit 1
}
stop() { kill "$daemon"; wait "$daemon" 2>/dev/null || true; }
status() { curl -sk -H "Authorization: Bearer $token" "https://$addr/api/v1/status"; }
# events_total of probe.$1, and the losses of its rows.
count() {
    curl -sk -H "Authorization: Bearer $token" "https://$addr/api/v1/components" |
        perl -MJSON::PP -e '$j=decode_json(join("",<STDIN>)); for (@{$j->{items}}) { print $_->{events_total} if $_->{name} eq "probe.'"$1"'" }'
}
losses() {
    status | perl -MJSON::PP -e '$q=decode_json(join("",<STDIN>))->{queues}; print(($q->{"'"$1"'.kernel"}{dropped_total}//0)+($q->{"bpf.'"$1"'.output"}{dropped_total}//0))'
}
storm() {
    local t0 t1
    t0=$(date +%s.%N)
    for _ in $(seq 10000); do /bin/true; done
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}

echo "== fork/exec storm: 10,000 /bin/true from bash"
echo "without the daemon: $(storm) s"
start '["execution"]'
echo "with the execution backend: $(storm) s (lost $(losses execution))"
stop
start '["execution", "connection", "sensitive_files", "af_alg"]'
echo "with all four backends: $(storm) s (lost $(losses execution))"

# Load generators, each as nobody: $n events at $rate events/s (paced in steps of 100).
port=$(perl -MIO::Socket::INET -e '$s=IO::Socket::INET->new(Listen=>1,LocalAddr=>"127.0.0.1:0"); print $s->sockport')
pace='use Time::HiRes qw(time sleep); $t0 = time; sub pace { my $i = shift; return if $i % 100; my $due = $t0 + $i / '"'"'$RATE'"'"'; my $d = $due - time; sleep($d) if $d > 0 }'
gen() { # $1 backend, $2 rate
    local p=${pace//\$RATE/$2}
    case $1 in
    execution) perl -e "$p"'; for $i (1..'"$n"') { system("/bin/true"); pace($i) }' ;;
    connection) setpriv --reuid=65534 --regid=65534 --clear-groups perl -MSocket -e "$p"'; for $i (1..'"$n"') { socket(my $s, PF_INET, SOCK_STREAM, 0); connect($s, pack_sockaddr_in('"$port"', inet_aton("127.0.0.1"))); pace($i) }' ;;
    sensitive_files) setpriv --reuid=65534 --regid=65534 --clear-groups perl -e "$p"'; for $i (1..'"$n"') { open(my $f, "<", "'"$secret"'") or die; close $f; pace($i) }' ;;
    af_alg) setpriv --reuid=65534 --regid=65534 --clear-groups perl -e "$p"'; for $i (1..'"$n"') { socket(my $s, 38, 5, 0); close $s; pace($i) }' ;;
    esac
}
echo "== events/s per backend with no record lost ($n events a step, all four backends running)"
for b in execution connection sensitive_files af_alg; do
    best=0
    for rate in 1000 2000 5000 10000 20000 50000; do
        before=$(count "$b")
        lost0=$(losses "$b")
        t0=$(date +%s.%N)
        gen "$b" "$rate"
        t1=$(date +%s.%N)
        # Until the consumer has handled them all (or 30 s).
        for _ in $(seq 300); do [ "$(count "$b")" -ge $((before + n)) ] && break; sleep 0.1; done
        lost=$(( $(losses "$b") - lost0 ))
        got=$(( $(count "$b") - before ))
        achieved=$(echo "$n / ($t1 - $t0)" | bc)
        echo "  $b at $rate/s asked, $achieved/s generated: $got handled, $lost lost"
        [ "$lost" -eq 0 ] || break
        best=$achieved
    done
    echo "$b: $best events/s with 0 lost"
done
stop
rm -rf "$dir"
echo "(machine shared with other builds: figures are indicative)"
