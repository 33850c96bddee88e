#!/usr/bin/env bash
# CI step (called by scripts/package-check.sh): the .deb on a Debian host that boots with
# systemd. A Debian bookworm root with systemd (debootstrap; cached as a tarball in
# /var/cache/svc-ci/, rebuilt after 30 days) gets the package with `dpkg -i` and the unit
# enabled, then boots under systemd-nspawn with its own network namespace (the firewall
# never touches this machine's ruleset), every capability, and nspawn's own system-call
# filter off, so that the unit's sandbox (CapabilityBoundingSet, SystemCallFilter, ...) is
# what limits the daemon. Checks: the unit becomes active (Type=notify) after its
# `svc validate`; the firewall engine runs; the file watcher uses fanotify; all four kernel
# probes attach; a webshell written to /var/www/html and an AF_ALG socket are findings in
# the API; `systemctl reload` succeeds; `systemctl stop` ends with Result=success.
#
#   scripts/systemd-boot-check.sh PATH/TO/svc.deb
set -euo pipefail
deb=$(realpath "$1")
cache_dir=/var/cache/svc-ci
cache=$cache_dir/bookworm-systemd.tar
start=$(date +%s)

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
        --no-install-recommends "${need[@]}" >/dev/null
fi

# The root: about 110 s to download and unpack the first time, a few seconds from the cache.
if [ ! -s "$cache" ] || [ -n "$(find "$cache" -mtime +30)" ]; then
    mkdir -p "$cache_dir"
    fresh=$(mktemp -d /var/tmp/svc-debootstrap.XXXXXX)
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,ca-certificates,nftables \
        bookworm "$fresh" http://deb.debian.org/debian >"$fresh.log" 2>&1 || {
        tail -20 "$fresh.log" >&2
        rm -rf "$fresh" "$fresh.log"
        exit 1
    }
    tar -C "$fresh" -cf "$cache.tmp" .
    mv "$cache.tmp" "$cache"
    rm -rf "$fresh" "$fresh.log"
    echo "systemd root: built the cache in $(($(date +%s) - start)) s"
fi

root=$(mktemp -d /var/tmp/svc-boot.XXXXXX)
machine=svc-ci-$$
nspawn_pid=
cleanup() {
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        kill "$nspawn_pid" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 1; done
        kill -9 "$nspawn_pid" 2>/dev/null || true
    fi
    # Never remove a tree that is still mounted somewhere.
    if findmnt -rn -o TARGET | grep -q "^$root"; then
        umount -R "$root" 2>/dev/null || umount -lR "$root" 2>/dev/null || true
    fi
    rm -rf "$root" "$root.log"
}
trap cleanup EXIT
tar -C "$root" -xf "$cache"
cp "$deb" "$root/tmp/svc.deb"
chroot "$root" dpkg -i /tmp/svc.deb >/dev/null
chroot "$root" systemctl enable svc.service 2>/dev/null
mkdir -p "$root/var/www/html"

SYSTEMD_SECCOMP=0 systemd-nspawn -D "$root" --boot --machine="$machine" --register=no \
    --keep-unit --private-network --capability=all --console=read-only \
    >"$root.log" 2>&1 &
nspawn_pid=$!
init=
for _ in $(seq 60); do
    init=$(pgrep -P "$nspawn_pid" | head -1 || true)
    [ -n "$init" ] && break
    sleep 1
done
[ -n "$init" ] || { cat "$root.log" >&2; echo "the container did not start" >&2; exit 1; }
inside() { nsenter -t "$init" -a "$@"; }

fail() {
    echo "systemd boot check: $*" >&2
    inside journalctl -b -u svc --no-pager -o cat 2>/dev/null | tail -40 >&2 || true
    exit 1
}

state=
for _ in $(seq 120); do
    state=$(inside systemctl is-active svc.service 2>/dev/null || true)
    case $state in active | failed) break ;; esac
    sleep 1
done
[ "$state" = active ] || fail "svc.service is '$state', not active"

journal() { inside journalctl -b -u svc --no-pager -o cat; }
for want in "firewall engine running" "file watcher: using fanotify" \
    "kernel probe execution attached" "kernel probe connection attached" \
    "kernel probe sensitive_files attached" "kernel probe af_alg attached"; do
    journal | grep -qF "$want" || fail "the unit's daemon never logged '$want'"
done

token=$(sed -n 's/^token = "\(.*\)"$/\1/p' "$root/etc/svc/conf.d/admin-token.toml")
# Waits up to 60 s for a finding of check $1 in the API; fails with $2.
await_finding() {
    for _ in $(seq 60); do
        if inside curl -sk -H "Authorization: Bearer $token" \
            https://127.0.0.1:9443/api/v1/findings | grep -q "\"check\":\"$1\""; then
            return 0
        fi
        sleep 1
    done
    fail "$2"
}

printf '<?php @eval($_POST["cmd"]); ?>\n' >"$root/var/www/html/shell.php"
await_finding webshell "no webshell finding for /var/www/html/shell.php"

# An AF_ALG socket (family 38, SOCK_SEQPACKET) asked for by a process of the container (the
# call itself may fail where the kernel lacks af_alg; the probe sees the attempt): the
# kernel probe, its ring and the process context all work under the unit's sandbox.
inside perl -e 'socket(my $s, 38, 5, 0)' || true
await_finding af_alg_socket "no af_alg_socket finding for an AF_ALG socket"

inside systemctl reload svc.service || fail "systemctl reload failed"
inside systemctl stop svc.service
result=$(inside systemctl show -p Result --value svc.service)
[ "$result" = success ] || fail "stopped with Result=$result"
rm -f "$root.log"
echo "systemd boot check: svc.service active under systemd $(inside systemctl --version |
    awk 'NR == 1 { print $2 }') with fanotify, the firewall and 4 kernel probes; webshell" \
    "and AF_ALG socket found, reload and stop clean ($(($(date +%s) - start)) s)"
