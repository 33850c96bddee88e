#!/usr/bin/env bash
# CI step of issue 25: builds the .deb and the .rpm (packaging/build.sh), runs lintian (no
# error allowed; warnings are printed), checks both packages list the binary, unit, both
# man pages, the conffile and the completions, unpacks the .deb into a temp root and runs
# the unpacked binary's `svc validate` on the shipped configuration, renders the man pages,
# runs `systemd-analyze verify` on the unit and prints its `systemd-analyze security` exposure
# (fails above 3.0), prints the figures: package and binary sizes, highest GLIBC_ symbol, and
# then installs both into clean roots (scripts/package-install-check.sh: the .deb with dpkg
# into a cached Debian minbase root, install, reinstall, remove, purge; the .rpm with
# `rpm --root`). Last,
# scripts/systemd-boot-check.sh boots the .deb in a Debian root under systemd. Each step
# prints its time.
#
# SVC_PACKAGE_PROFILE defaults to `fast` here (CI time; decision 336); set it to `release`
# for the real release profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export SVC_PACKAGE_PROFILE=${SVC_PACKAGE_PROFILE:-fast}

# debhelper, lintian, rpm, devscripts, binutils: the packages and their checks. autoconf,
# automake, autopoint, gettext, libtool, flex, bison, gawk: the `bpf-vendored` build of the
# packaged binary configures and compiles elfutils' libelf from source (decision 423).
# debootstrap: the clean root the .deb is installed into (decision 440).
tools=(debhelper lintian rpm devscripts binutils autoconf automake autopoint gettext libtool
    flex bison gawk debootstrap)
missing=()
for p in "${tools[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if command -v apt-get >/dev/null 2>&1 && [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

started=$SECONDS
deb=$(packaging/build.sh deb | tail -1)
echo "== built $deb ($((SECONDS - started)) s)"
built=$SECONDS
rpm=$(packaging/build.sh rpm | tail -1)
echo "== built $rpm ($((SECONDS - built)) s)"
checked=$SECONDS

echo "== lintian $deb"
lintian --tag-display-limit 0 "$deb" | tee /tmp/svc-lintian.$$ || true
if grep -q '^E:' /tmp/svc-lintian.$$; then
    echo "lintian reports errors" >&2
    exit 1
fi
rm -f /tmp/svc-lintian.$$

need_deb=(./usr/sbin/svc ./lib/systemd/system/svc.service ./usr/share/man/man8/svc.8.gz
    ./usr/share/man/man5/svc.toml.5.gz ./etc/svc/svc.toml
    ./usr/share/bash-completion/completions/svc ./usr/share/zsh/vendor-completions/_svc
    ./usr/share/fish/vendor_completions.d/svc.fish)
listed=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in "${need_deb[@]}"; do
    grep -qx "$f" <<<"$listed" || { echo "$deb lacks $f" >&2; exit 1; }
done
dpkg-deb -f "$deb" Package >/dev/null
dpkg-deb -I "$deb" conffiles | grep -qx /etc/svc/svc.toml || {
    echo "$deb: /etc/svc/svc.toml is not a conffile" >&2
    exit 1
}
need_rpm=(/usr/sbin/svc /usr/lib/systemd/system/svc.service /usr/share/man/man8/svc.8.gz
    /usr/share/man/man5/svc.toml.5.gz /etc/svc/svc.toml
    /usr/share/bash-completion/completions/svc /usr/share/zsh/site-functions/_svc
    /usr/share/fish/vendor_completions.d/svc.fish /var/lib/svc)
listed=$(rpm -qlp "$rpm" 2>/dev/null)
for f in "${need_rpm[@]}"; do
    grep -qx "$f" <<<"$listed" || { echo "$rpm lacks $f" >&2; exit 1; }
done
rpm -qcp "$rpm" 2>/dev/null | grep -qx /etc/svc/svc.toml || {
    echo "$rpm: /etc/svc/svc.toml is not %config" >&2
    exit 1
}

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
"$root/usr/sbin/svc" validate -c "$root/etc/svc/svc.toml"
for page in man8/svc.8.gz man5/svc.toml.5.gz; do
    warnings=$(MANWIDTH=80 man --warnings -l "$root/usr/share/man/$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || { echo "$page: $warnings" >&2; exit 1; }
done

# verify runs ExecStart's binary check and `man` for Documentation=: point both at the
# unpacked tree.
sed "s|/usr/sbin/svc|$root/usr/sbin/svc|g" "$root/lib/systemd/system/svc.service" >"$root/svc.service"
MANPATH="$root/usr/share/man" systemd-analyze verify "$root/svc.service"
exposure=$(systemd-analyze security --offline=yes "$root/svc.service" 2>&1 | tail -1)
echo "$exposure"
score=$(grep -o 'level for svc.service: [0-9.]*' <<<"$exposure" | awk '{print $NF}')
awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || { echo "exposure $score is above 3.0" >&2; exit 1; }

bin=$root/usr/sbin/svc
echo "figures: .deb $(stat -c %s "$deb") bytes, .rpm $(stat -c %s "$rpm") bytes," \
    "binary $(stat -c %s "$bin") bytes (stripped)," \
    "highest $(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1), exposure $score"
echo "== package checks ($((SECONDS - checked)) s)"

installed=$SECONDS
scripts/package-install-check.sh "$deb" "$rpm"
echo "== clean-root install checks ($((SECONDS - installed)) s)"

# The .deb installed into a Debian root with systemd and booted (decision 449).
booted=$SECONDS
scripts/systemd-boot-check.sh "$deb"
echo "== systemd boot check ($((SECONDS - booted)) s); package-check total $((SECONDS - started)) s"
