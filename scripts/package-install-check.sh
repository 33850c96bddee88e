#!/usr/bin/env bash
# scripts/package-install-check.sh DEB [RPM]: "a package is done when it installs into a
# clean root" (decisions 440-442). Called by scripts/package-check.sh after the packages are
# built; needs root (chroot, mount) and debootstrap.
#
# The .deb: a minimal Debian root (`debootstrap --variant=minbase`, plus man-db to read the
# pages) is unpacked from a cached tarball, the .deb installed with `dpkg -i` and its
# declared dependencies only, and what the package and its postinst promise is checked:
# files, owners and modes, the conffile, the generated admin token, `svc --version`,
# `svc validate` on the shipped configuration, the man pages through `man`. Then a reinstall
# over a locally edited conffile (kept, token unchanged), `dpkg -r` (binary and unit go,
# conffile and token stay) and `dpkg --purge` (conffile, token and /etc/svc go, the state
# directory with its files stays). Any output on dpkg's standard error fails the check.
# The .rpm: `rpm --root DIR --nodeps --noscripts -i` into an empty root (no shell there for
# the scriptlets), its files, modes and `rpm -V`; then `rpm --root` into the purged Debian
# root, where %post runs and makes the token (decision 442).
#
# Cache: /var/cache/svc-ci/debian-<suite>-minbase.tar (SVC_CI_CACHE overrides the
# directory), rebuilt when missing, older than 30 days or broken (it does not unpack, or
# the unpacked root cannot run dpkg). The first run's debootstrap took about 1 min here
# (31-59 s on the shared 2 cores, from deb.debian.org; a 124 MB root); with the cache the whole
# check, root unpacked, takes about 6 s.
set -euo pipefail

deb=${1:?usage: scripts/package-install-check.sh DEB [RPM]}
rpm=${2:-}
suite=bookworm
mirror=http://deb.debian.org/debian
cache_dir=${SVC_CI_CACHE:-/var/cache/svc-ci}
cache=$cache_dir/debian-$suite-minbase.tar
max_age_days=30

[ -f "$deb" ] || { echo "package-install-check: no package $deb" >&2; exit 1; }
[ -z "$rpm" ] || [ -f "$rpm" ] || { echo "package-install-check: no package $rpm" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "package-install-check: needs root (chroot, mount)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "package-install-check: debootstrap missing" >&2; exit 1; }

started=$SECONDS
step_started=$SECONDS
step() {
    echo "== install check: $1 ($((SECONDS - step_started)) s)"
    step_started=$SECONDS
}
fail() {
    echo "package-install-check: $*" >&2
    exit 1
}

work=$(mktemp -d /tmp/svc-install-check.XXXXXX)
root=$work/root
# Unmount everything below the root before anything is deleted, on success and failure:
# `rm -rf` through a live /proc mount would be the worst way to find a bug here.
cleanup() {
    local m
    for m in $(awk -v r="$work/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount -l "$m" || true
    done
    if awk -v r="$work/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        echo "package-install-check: mounts left under $work; not deleting it" >&2
        return
    fi
    rm -rf "$work"
}
trap cleanup EXIT

in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# A usable root: unpacks, and its dpkg and shell run.
unpack_root() {
    rm -rf "$root"
    mkdir -p "$root"
    tar -xf "$cache" -C "$root" 2>/dev/null && in_root dpkg --audit >/dev/null 2>&1 \
        && [ -x "$root/usr/bin/man" ]
}

build_cache() {
    local tmp_root=$work/bootstrap
    echo "== install check: debootstrap --variant=minbase $suite (cache $cache)"
    rm -rf "$tmp_root"
    debootstrap --variant=minbase --include=man-db "$suite" "$tmp_root" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
    # The downloaded .debs are not needed again.
    rm -rf "$tmp_root"/var/cache/apt/archives/*.deb "$tmp_root"/var/lib/apt/lists/*_Packages
    mkdir -p "$cache_dir"
    tar -cf "$cache.tmp.$$" -C "$tmp_root" --numeric-owner .
    sync "$cache.tmp.$$"
    mv "$cache.tmp.$$" "$cache"
    rm -rf "$tmp_root"
}

if [ ! -f "$cache" ] || [ -n "$(find "$cache" -mtime +"$max_age_days")" ]; then
    build_cache
    step "root built and cached, $(du -m "$cache" | cut -f1) MB"
fi
if ! unpack_root; then
    echo "== install check: cached root $cache is broken; rebuilding it"
    build_cache
    unpack_root || fail "a freshly built root does not unpack or run dpkg"
fi
step "root unpacked"

# The postinst reads /dev/urandom; debootstrap made the device nodes, a tarball keeps them.
for node in null zero random urandom; do
    [ -c "$root/dev/$node" ] || fail "the root lacks /dev/$node"
done
mount -t proc proc "$root/proc"

cp "$deb" "$root/tmp/svc.deb"

# dpkg in the root, its standard error captured: any line there fails the check.
dpkg_clean() {
    local what=$1
    shift
    if ! in_root dpkg "$@" >"$work/dpkg.out" 2>"$work/dpkg.err"; then
        cat "$work/dpkg.out" "$work/dpkg.err" >&2
        fail "dpkg $what failed"
    fi
    if [ -s "$work/dpkg.err" ]; then
        cat "$work/dpkg.err" >&2
        fail "dpkg $what wrote to standard error"
    fi
}

# mode owner:group path, as the root sees it.
expect_stat() {
    local want="$1 $2" path=$3 got
    got=$(stat -c '%a %U:%G' "$root$path" 2>/dev/null) || fail "$path is missing"
    [ "$got" = "$want" ] || fail "$path is $got, expected $want"
}
expect_absent() {
    [ ! -e "$root$1" ] && [ ! -L "$root$1" ] || fail "$1 is still there ($2)"
}
# What both packages install, with its modes; the unit's and zsh's directories differ.
expect_installed_files() {
    local unit_dir=$1 zsh_dir=$2 f
    expect_stat 755 root:root /usr/sbin/svc
    expect_stat 755 root:root /etc/svc
    expect_stat 644 root:root /etc/svc/svc.toml
    expect_stat 700 root:root /etc/svc/conf.d
    expect_stat 700 root:root /var/lib/svc
    for f in "$unit_dir/svc.service" /usr/share/man/man8/svc.8.gz \
        /usr/share/man/man5/svc.toml.5.gz /usr/share/bash-completion/completions/svc \
        "$zsh_dir/_svc" /usr/share/fish/vendor_completions.d/svc.fish; do
        expect_stat 644 root:root "$f"
    done
}
pkg_status() { in_root dpkg-query -W -f '${Status}' svc 2>/dev/null || echo not-installed; }

dpkg_clean install -i /tmp/svc.deb
grep -q 'admin API token is in /etc/svc/conf.d/admin-token.toml' "$work/dpkg.out" \
    || fail "the postinst did not print where the token is"
[ "$(pkg_status)" = "install ok installed" ] || fail "svc is $(pkg_status) after dpkg -i"
step "dpkg -i (dependencies: $(dpkg-deb -f "$deb" Depends))"

expect_installed_files /lib/systemd/system /usr/share/zsh/vendor-completions
expect_stat 600 root:root /etc/svc/conf.d/admin-token.toml
# Outputs are read whole before grep -q looks (pipefail and an early-exiting grep).
conffiles=$(in_root dpkg-query -W -f '${Conffiles}\n' svc)
grep -q '^ /etc/svc/svc.toml [0-9a-f]\{32\}$' <<<"$conffiles" \
    || fail "/etc/svc/svc.toml is not a registered conffile"
grep -qx 'token = "[0-9a-f]\{48\}"' "$root/etc/svc/conf.d/admin-token.toml" \
    || fail "admin-token.toml holds no 48-hex-digit token"
grep -qx 'name = "package-admin"' "$root/etc/svc/conf.d/admin-token.toml" \
    || fail "admin-token.toml does not name the token package-admin"
grep -qx 'scope = "admin"' "$root/etc/svc/conf.d/admin-token.toml" \
    || fail "admin-token.toml's token is not scope admin"
version=$(dpkg-deb -f "$deb" Version)
got_version=$(in_root svc --version)
grep -qF "$version" <<<"$got_version" || fail "svc --version says '$got_version', package is $version"
# The default path and the unit's explicit one; both read the token drop-in.
in_root svc validate >/dev/null || fail "svc validate fails on the shipped configuration"
in_root svc validate -c /etc/svc/svc.toml >/dev/null || fail "svc validate -c /etc/svc/svc.toml fails"
for page in 8:svc 5:svc.toml; do
    section=${page%%:*} name=${page#*:}
    path=$(in_root man -w "$section" "$name") || fail "man -w $section $name finds nothing"
    [ "$path" = "/usr/share/man/man$section/$name.$section.gz" ] || fail "man $section $name is $path"
    in_root env MANWIDTH=80 man "$section" "$name" >"$work/man.out" 2>"$work/man.err" \
        || fail "man $section $name fails"
    grep -q "^NAME" "$work/man.out" || fail "man $section $name renders no NAME section"
    [ ! -s "$work/man.err" ] || { cat "$work/man.err" >&2; fail "man $section $name warns"; }
done
step "installed files, modes, conffile, token, svc --version ($got_version), svc validate, man"

# Reinstall over a locally edited conffile: dpkg keeps the edit and the postinst the token.
sed -i '1s/^#/# edited by package-install-check;/' "$root/etc/svc/svc.toml"
edited=$(sha256sum <"$root/etc/svc/svc.toml")
token=$(sha256sum <"$root/etc/svc/conf.d/admin-token.toml")
dpkg_clean reinstall -i --force-confold /tmp/svc.deb
[ "$(sha256sum <"$root/etc/svc/svc.toml")" = "$edited" ] || fail "the reinstall replaced the edited conffile"
[ "$(sha256sum <"$root/etc/svc/conf.d/admin-token.toml")" = "$token" ] || fail "the reinstall changed the token"
[ "$(pkg_status)" = "install ok installed" ] || fail "svc is $(pkg_status) after the reinstall"
in_root svc validate >/dev/null || fail "svc validate fails after the reinstall"
step "reinstall over an edited conffile (kept, token unchanged)"

# What a daemon leaves in its state directory (store, TLS pair, quarantine) must survive
# remove and purge (decision 334).
printf 'state\n' >"$root/var/lib/svc/store.db"
dpkg_clean remove -r svc
[ "$(pkg_status)" = "deinstall ok config-files" ] || fail "svc is $(pkg_status) after dpkg -r"
expect_absent /usr/sbin/svc "after dpkg -r"
expect_absent /lib/systemd/system/svc.service "after dpkg -r"
expect_absent /usr/share/man/man8/svc.8.gz "after dpkg -r"
[ "$(sha256sum <"$root/etc/svc/svc.toml")" = "$edited" ] || fail "dpkg -r did not keep the conffile"
expect_stat 600 root:root /etc/svc/conf.d/admin-token.toml
expect_stat 644 root:root /var/lib/svc/store.db
step "dpkg -r (binary and unit gone; conffile, token and state kept)"

dpkg_clean purge --purge svc
[ "$(pkg_status)" = not-installed ] || fail "svc is $(pkg_status) after dpkg --purge"
expect_absent /etc/svc/svc.toml "after dpkg --purge"
expect_absent /etc/svc/conf.d/admin-token.toml "after dpkg --purge"
expect_absent /etc/svc "after dpkg --purge"
expect_stat 700 root:root /var/lib/svc
expect_stat 644 root:root /var/lib/svc/store.db
step "dpkg --purge (conffile, token, /etc/svc gone; state directory kept)"

if [ -n "$rpm" ]; then
    # Debian's rpm complains on standard error unless told it is meant (README.Debian).
    rpm_flags=(--nodeps)
    # (The help is read whole: `grep -q` on the pipe would stop rpm with SIGPIPE, which
    # pipefail turns into "no such option" now and then.)
    rpm_help=$(rpm --help 2>&1 || true)
    if grep -q -- --force-debian <<<"$rpm_help"; then rpm_flags+=(--force-debian); fi
    rpm_clean() {
        local what=$1
        shift
        rpm "${rpm_flags[@]}" "$@" >"$work/rpm.out" 2>"$work/rpm.err" \
            || { cat "$work/rpm.out" "$work/rpm.err" >&2; fail "rpm $what failed"; }
        [ ! -s "$work/rpm.err" ] || { cat "$work/rpm.err" >&2; fail "rpm $what wrote to standard error"; }
    }
    check_rpm_files() {
        expect_installed_files /usr/lib/systemd/system /usr/share/zsh/site-functions
        rpm --root "$root" -V --nodeps svc || fail "rpm -V finds installed files that differ from the package"
    }
    debian_root=$root

    # An empty root, as the brief of the check asks: it has no /bin/sh for the scriptlets
    # (rpm runs them chrooted), so --noscripts; the payload must land whole.
    root=$work/rpm-root
    mkdir -p "$root"
    rpm_clean "-i into an empty root" --root "$root" --noscripts -i "$rpm"
    check_rpm_files
    "$root/usr/sbin/svc" validate -c "$root/etc/svc/svc.toml" >/dev/null \
        || fail "the rpm's svc validate fails on its configuration"
    rpm_clean "-e in the empty root" --root "$root" --noscripts -e svc
    expect_absent /usr/sbin/svc "after rpm -e"
    expect_absent /etc/svc/svc.toml "after rpm -e (unedited %config)"
    step "rpm -i --nodeps into an empty root: files, modes, rpm -V, svc validate, rpm -e"

    # The scriptlets run in the purged Debian root, which has a shell (decision 442).
    root=$debian_root
    rpm_clean "-i into the Debian root" --root "$root" -i "$rpm"
    check_rpm_files
    expect_stat 600 root:root /etc/svc/conf.d/admin-token.toml
    grep -qx 'token = "[0-9a-f]\{48\}"' "$root/etc/svc/conf.d/admin-token.toml" \
        || fail "the rpm's %post made no 48-hex-digit token"
    in_root svc validate >/dev/null || fail "svc validate fails after the rpm's install"
    rpm_clean "-e in the Debian root" --root "$root" -e svc
    expect_absent /usr/sbin/svc "after rpm -e"
    step "rpm -i with scriptlets into the Debian root: %post token, svc validate, rpm -e"
fi

echo "install check: done in $((SECONDS - started)) s"
