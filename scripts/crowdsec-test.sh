#!/usr/bin/env bash
# The CrowdSec Local API for the fleet tests (tests/it/fleet.rs) and the fleet benchmark
# (scripts/fleet-bench.sh): Debian's crowdsec and crowdsec-firewall-bouncer packages,
# downloaded with apt-get and extracted with dpkg -x into /opt/crowdsec-test/root (not
# installed: crowdsec's postinst registers with the Central API over the Internet and
# fails without it). Idempotent: nothing is done when the binaries are there.
set -euo pipefail
dest=${CROWDSEC_TEST_DIR:-/opt/crowdsec-test}
if [ -x "$dest/root/usr/bin/crowdsec" ] && [ -x "$dest/root/usr/bin/cscli" ] &&
    [ -x "$dest/root/usr/bin/crowdsec-firewall-bouncer" ]; then
    exit 0
fi
mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
apt-get download crowdsec crowdsec-firewall-bouncer >/dev/null 2>&1 || {
    "${sudo[@]}" apt-get update -qq
    apt-get download crowdsec crowdsec-firewall-bouncer >/dev/null
}
rm -rf root
for f in ./*.deb; do
    dpkg -x "$f" root
done
rm -f ./*.deb
