#!/usr/bin/env bash
# The README's test command: installs what the tests need on Debian or Ubuntu, then runs
# `cargo test --locked --features bpf` (extra arguments go to cargo test): one test build,
# with the kernel probes, which CI also lints. Run it as root: the tests change
# file owners and create network namespaces, as the daemon does.
#
#   scripts/test.sh                 install (when something is missing), then the tests
#   scripts/test.sh --install-only  install only (.ci/run does this before its lints)
#
# On a fresh machine it installs the Debian packages below, and a Rust toolchain with rustup
# when `cargo` is missing (Debian's own is older than rust-version in Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

# build-essential: the bundled SQLite and ring compile C; curl: rustup.
# tzdata: date-range tests use real zones; sqlite3 and openssl: handy for diagnostics.
# clamav-daemon, exim4-daemon-light: mail antivirus tests run a real clamd and Exim spool;
# the mail-log reader test runs a real Exim on loopback.
# argon2, apache2-utils, openssl, python3-passlib: the mailbox password audit checks every
# hash scheme against vectors these independent tools compute at test time.
# nftables, iproute2: firewall tests run real nft inside network namespaces they create
# (they need root; with CI=true they fail rather than skip). apache2 and
# libapache2-mod-security2: the WAF test runs a real Apache with ModSecurity on loopback;
# nginx and libnginx-mod-http-modsecurity: the same with nginx and libmodsecurity 3.
# systemd (journalctl) and systemd-journal-remote: the mail-log journal source follows a
# journal directory that systemd-journal-remote writes from export format (no systemd
# running). chromium: the proof-of-work challenge test has headless Chromium run the
# page's own JavaScript (Web Crypto) to solve the challenge; the web console test
# (tests/it/console.rs) walks every console page in it and writes screenshots of each page at
# 1280x800 and 390x844 to target/console-screenshots/, the CI artefact directory.
# nginx also writes the access log the access-log test tails (tests/it/accesslog.rs).
# man-db: the committed man pages must render without a warning (tests/it/lifecycle.rs).
# mariadb-server: the site-database test (tests/it/sitedb.rs) runs mariadb-install-db and
# mariadbd on a socket in its own directory, and the mariadb client to set up and check it.
# clang, libbpf-dev, bpftool, libelf-dev, zlib1g-dev, pkg-config: the `bpf` feature compiles
# bpf/*.bpf.c (clang) and links libbpf with libelf and zlib; the kernel-probe tests
# (tests/it/probes.rs) load the programs as root; bpftool regenerates bpf/vmlinux.h.
packages=(build-essential curl tzdata ca-certificates nftables iproute2
    clamav-daemon exim4-daemon-light apache2 libapache2-mod-security2 nginx
    libnginx-mod-http-modsecurity chromium argon2 apache2-utils openssl python3 python3-passlib
    systemd systemd-journal-remote man-db clang libbpf-dev bpftool libelf-dev zlib1g-dev
    pkg-config mariadb-server)

install_packages() {
    command -v apt-get >/dev/null 2>&1 || return 0
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=()
        [ "$(id -u)" -eq 0 ] || sudo=(sudo)
        export DEBIAN_FRONTEND=noninteractive
        "${sudo[@]}" apt-get update -qq
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

install_rust() {
    command -v cargo >/dev/null 2>&1 && return 0
    [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs |
        sh -s -- -y --profile minimal --component clippy,rustfmt >/dev/null
    export PATH="$HOME/.cargo/bin:$PATH"
}

install_packages
install_rust
# The CrowdSec Local API of the fleet tests: Debian's packages extracted, not installed
# (about 40 MB once, cached in /opt/crowdsec-test).
scripts/crowdsec-test.sh
if [ "${1:-}" = --install-only ]; then
    exit 0
fi
exec cargo test --locked --features bpf "$@"
