#!/usr/bin/env bash
# packaging/build.sh deb|rpm: builds the .deb or the .rpm from a clean checkout and leaves
# target/packages/svc_<version>_amd64.deb or target/packages/svc-<version>-<release>.x86_64.rpm.
#
# The binary is the release build for glibc 2.28 (RHEL 8, Debian 10, Ubuntu 18.04 era):
# `cargo zigbuild --target x86_64-unknown-linux-gnu.2.28` (ziglang from PyPI, cargo-zigbuild
# from crates.io; installed here when missing). The build fails when the binary needs a
# GLIBC_ symbol above 2.28. It is built with the kernel probes (feature `bpf-vendored`: `bpf`
# with libbpf, libelf and zlib compiled by zig cc from libbpf-sys's vendored sources and
# linked statically, decision 423; needs clang for bpf/*.bpf.c and autoconf, automake,
# autopoint, gettext, libtool, flex, bison, gawk for elfutils).
#
# Environment:
#   SVC_PACKAGE_PROFILE=fast  CI: the release profile without fat LTO (thin local LTO, 16
#                             codegen units), minutes instead of ten (decision 336); the
#                             default is the real release profile.
#   SVC_BIN=path              package this binary instead of building one (it must still
#                             pass the glibc check).
#   CARGO_TARGET_DIR          as for cargo (default target/).
# Debian tools: debhelper, lintian, rpm (apt-get install -y debhelper lintian rpm), and the
# ones above for the vendored libelf (scripts/package-check.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

kind=${1:-}
if [ "$kind" != deb ] && [ "$kind" != rpm ]; then
    echo "usage: packaging/build.sh deb|rpm" >&2
    exit 2
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
release=1
target_dir=${CARGO_TARGET_DIR:-$root/target}
out=$target_dir/packages
work=$out/work-$kind
rm -rf "$work"
mkdir -p "$out" "$work"

glibc_target=x86_64-unknown-linux-gnu.2.28
if [ -n "${SVC_BIN:-}" ]; then
    bin=$SVC_BIN
else
    if ! python3 -c 'import ziglang' 2>/dev/null; then
        python3 -m pip install --quiet ziglang
    fi
    if ! command -v cargo-zigbuild >/dev/null 2>&1; then
        cargo install --locked --quiet cargo-zigbuild
    fi
    profile_args=()
    if [ "${SVC_PACKAGE_PROFILE:-release}" = fast ]; then
        profile_args=(--config 'profile.release.lto=false' --config 'profile.release.codegen-units=16')
    fi
    cargo zigbuild --release --locked --target "$glibc_target" --features bpf-vendored \
        "${profile_args[@]}"
    bin=$target_dir/x86_64-unknown-linux-gnu/release/svc
fi

# The packaged binary must run on glibc 2.28.
glibc_max=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
if [ "$(printf '%s\n' "$glibc_max" GLIBC_2.28 | sort -V | tail -1)" != GLIBC_2.28 ]; then
    echo "packaging/build.sh: $bin needs $glibc_max (above GLIBC_2.28)" >&2
    exit 1
fi
echo "binary: $bin, $(stat -c %s "$bin") bytes, highest symbol version $glibc_max"

# Everything the packages carry, staged once under the names they install as.
stage=$work/stage
mkdir -p "$stage/man" "$stage/bash" "$stage/zsh" "$stage/fish"
install -m 0755 "$bin" "$stage/svc"
strip --strip-unneeded "$stage/svc"
install -m 0644 contrib/svc.service contrib/svc.toml "$stage/"
install -m 0644 man/svc.8 man/svc.toml.5 "$stage/man/"
"$stage/svc" gen completions bash >"$stage/bash/svc"
"$stage/svc" gen completions zsh >"$stage/zsh/_svc"
"$stage/svc" gen completions fish >"$stage/fish/svc.fish"
"$stage/svc" validate -c "$stage/svc.toml" >/dev/null

# The maintainer script shared by both packages, pasted in.
paste_common() {
    awk -v common="$root/packaging/postinst-common.sh" -v mark="$1" '
        index($0, mark) { while ((getline line < common) > 0) print line; next }
        { print }'
}

case $kind in
deb)
    src=$work/svc-$version
    mkdir -p "$src"
    cp -r packaging/debian "$src/debian"
    mv "$stage" "$src/stage"
    rm "$src/debian/svc.postinst.in"
    paste_common '#POSTINST_COMMON#' <packaging/debian/svc.postinst.in >"$src/debian/svc.postinst"
    cp contrib/svc.service "$src/debian/svc.service"
    cat >"$src/debian/changelog" <<EOF
svc ($version) unstable; urgency=medium

  * Release $version.

 -- svc maintainers <svc@example.org>  $(date -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
EOF
    (cd "$src" && dpkg-buildpackage -b -us -uc >"$work/dpkg-buildpackage.log" 2>&1) || {
        tail -40 "$work/dpkg-buildpackage.log" >&2
        exit 1
    }
    mv "$work/svc_${version}_amd64.deb" "$out/"
    echo "$out/svc_${version}_amd64.deb"
    ;;
rpm)
    top=$work/rpmbuild
    mkdir -p "$top/SPECS" "$top/BUILD" "$top/RPMS" "$top/BUILDROOT"
    paste_common '@POSTINST_COMMON@' <packaging/rpm/svc.spec.in |
        sed -e "s|@VERSION@|$version|" -e "s|@RELEASE@|$release|" -e "s|@STAGE@|$stage|" \
            >"$top/SPECS/svc.spec"
    rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" \
        --define '_binary_payload w6.xzdio' "$top/SPECS/svc.spec"
    mv "$top/RPMS/x86_64/svc-$version-$release.x86_64.rpm" "$out/"
    echo "$out/svc-$version-$release.x86_64.rpm"
    ;;
esac
