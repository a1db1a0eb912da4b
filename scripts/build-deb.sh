#!/usr/bin/env bash
# Builds the Debian package gqlmux_<version>_amd64.deb from a release build:
#   /usr/sbin/gqlmuxd and /usr/bin/gqlmuxctl, one binary (the Swift runtime linked statically,
#   see below; gqlmuxctl is a symbolic link to gqlmuxd, which runs the CLI under that name),
#   /lib/systemd/system/gqlmuxd.{service,socket}, the journal catalog, sysusers.d and
#   tmpfiles.d entries, /etc/gqlmux/gqlmuxd.toml (a conffile), gqlmuxd(8) and gqlmuxctl(1)
#   generated from the argument parser, and bash/zsh/fish completions.
#
#   scripts/build-deb.sh [OUTDIR]       (default OUTDIR: .build/deb)
#
# Why the Swift runtime is linked statically, and why one binary (release builds, stripped,
# measured on this machine kind):
#   one static binary, no swift-corelibs-foundation linked (own GraphQL syntax check and JSON;
#   FoundationEssentials only): ~25 MB installed, `gqlmuxd --version` starts in a few ms;
#   before (two static binaries, both with Foundation and ICU): 72 + 63 MB installed, 33 MB .deb;
#   shared runtime: 12 + 4 MB binaries + 62 MB of runtime libraries (Foundation, ICU, dispatch,
#           …), ~20 MB .deb, slower start, and an RPATH into a private library folder.
# Static and self-contained wins (no clash with a Swift toolchain on the host).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(mkdir -p "${1:-.build/deb}" && cd "${1:-.build/deb}" && pwd)

scripts/prerequisites.sh build
if ! command -v dpkg-shlibdeps >/dev/null; then
    if (( EUID == 0 )); then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >&2
    else
        echo "build-deb.sh needs dpkg-shlibdeps: sudo apt-get install dpkg-dev" >&2
        exit 1
    fi
fi

version=$(sed -n 's/.*static let release = "\(.*\)".*/\1/p' Sources/LocalProtocol/LocalMessages.swift)
[[ -n $version ]] || { echo "build-deb.sh: cannot read the release from LocalProtocol" >&2; exit 1; }

echo "==> swift build -c release --static-swift-stdlib (scripts/release-build.sh)"
scripts/release-build.sh --product gqlmuxd
bin=$(swift build -c release --show-bin-path)

echo "==> man pages from the argument parser (swift-argument-parser's generate-manual)"
# The tool the generate-manual plugin runs, built in the same configuration (it reuses the
# argument parser compiled for gqlmuxd; the plugin would build every product of the package
# again, in release, first). It reads each command's --experimental-dump-help; gqlmuxctl is
# gqlmuxd under that name, as the package installs it.
scripts/release-build.sh --product generate-manual
manuals=$(mktemp -d /tmp/gqlmux-manuals.XXXXXX)
ln -s "$bin/gqlmuxd" "$manuals/gqlmuxctl"
authors="gqlmux developers<maintainers@gqlmux.invalid>"
"$bin/generate-manual" "$bin/gqlmuxd" --section 8 --authors "$authors" --output-directory "$manuals"
"$bin/generate-manual" "$manuals/gqlmuxctl" --section 1 --authors "$authors" --output-directory "$manuals"
cp "$manuals/gqlmuxd.8" "$out/gqlmuxd.8"
cp "$manuals/gqlmuxctl.1" "$out/gqlmuxctl.1"
rm -rf "$manuals"

stage=$(mktemp -d /tmp/gqlmux-deb.XXXXXX)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/gqlmux
install -d "$pkg/DEBIAN" "$pkg/usr/sbin" "$pkg/usr/bin" "$pkg/lib/systemd/system" \
    "$pkg/usr/lib/systemd/catalog" "$pkg/usr/lib/sysusers.d" "$pkg/usr/lib/tmpfiles.d" "$pkg/etc/gqlmux" \
    "$pkg/usr/share/man/man8" "$pkg/usr/share/man/man1" "$pkg/usr/share/doc/gqlmux" \
    "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
    "$pkg/usr/share/fish/vendor_completions.d"

install -m 0755 -s "$bin/gqlmuxd" "$pkg/usr/sbin/gqlmuxd"
ln -s ../sbin/gqlmuxd "$pkg/usr/bin/gqlmuxctl"

# The shipped units, with the package's paths.
sed -e 's#/usr/local/bin/gqlmuxd#/usr/sbin/gqlmuxd#' \
    -e 's#^Documentation=.*#Documentation=man:gqlmuxd(8) file:///usr/share/doc/gqlmux/README.md#' \
    -e 's#(made by scripts/install.sh)#(made by the package: /usr/lib/sysusers.d/gqlmux.conf)#' \
    systemd/gqlmuxd.service >"$pkg/lib/systemd/system/gqlmuxd.service"
install -m 0644 systemd/gqlmuxd.socket "$pkg/lib/systemd/system/gqlmuxd.socket"
install -m 0644 systemd/gqlmuxd-graphql.socket "$pkg/lib/systemd/system/gqlmuxd-graphql.socket"
chmod 0644 "$pkg/lib/systemd/system/gqlmuxd.service"
install -m 0644 systemd/gqlmuxd.catalog "$pkg/usr/lib/systemd/catalog/gqlmuxd.catalog"
install -m 0644 packaging/debian/gqlmux.sysusers "$pkg/usr/lib/sysusers.d/gqlmux.conf"
install -m 0644 packaging/debian/gqlmux.tmpfiles "$pkg/usr/lib/tmpfiles.d/gqlmux.conf"
install -m 0644 config/gqlmuxd.toml "$pkg/etc/gqlmux/gqlmuxd.toml"

gzip -9n <"$out/gqlmuxd.8" >"$pkg/usr/share/man/man8/gqlmuxd.8.gz"
gzip -9n <"$out/gqlmuxctl.1" >"$pkg/usr/share/man/man1/gqlmuxctl.1.gz"
chmod 0644 "$pkg"/usr/share/man/man*/*.gz
rm -f "$out/gqlmuxd.8" "$out/gqlmuxctl.1"

# A bash completion is sourced, not run: no #! line (lintian bash-completion-with-hashbang).
"$pkg/usr/bin/gqlmuxctl" --generate-completion-script bash | sed '1{/^#!/d}' >"$pkg/usr/share/bash-completion/completions/gqlmuxctl"
"$pkg/usr/bin/gqlmuxctl" --generate-completion-script zsh >"$pkg/usr/share/zsh/vendor-completions/_gqlmuxctl"
"$pkg/usr/bin/gqlmuxctl" --generate-completion-script fish >"$pkg/usr/share/fish/vendor_completions.d/gqlmuxctl.fish"
chmod 0644 "$pkg"/usr/share/*/*completion*/* "$pkg"/usr/share/zsh/vendor-completions/*

install -m 0644 README.md "$pkg/usr/share/doc/gqlmux/README.md"
# The pages the README and the shipped configuration link to (docs/NAME.md).
install -d "$pkg/usr/share/doc/gqlmux/docs"
install -m 0644 docs/*.md "$pkg/usr/share/doc/gqlmux/docs/"
install -m 0644 packaging/debian/copyright "$pkg/usr/share/doc/gqlmux/copyright"
sed "s/@VERSION@/$version/" packaging/debian/changelog | gzip -9n >"$pkg/usr/share/doc/gqlmux/changelog.gz"
chmod 0644 "$pkg/usr/share/doc/gqlmux/changelog.gz"

install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$pkg/DEBIAN/"
echo /etc/gqlmux/gqlmuxd.toml >"$pkg/DEBIAN/conffiles"

# Shared-library dependencies as Debian computes them (dpkg-shlibdeps wants a source tree).
mkdir -p "$stage/debian"
printf 'Source: gqlmux\n\nPackage: gqlmux\nArchitecture: amd64\n' >"$stage/debian/control"
depends=$(cd "$stage" && dpkg-shlibdeps -O "$pkg/usr/sbin/gqlmuxd" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "build-deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@INSTALLED_SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    packaging/debian/control.in >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

deb="$out/gqlmux_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "==> $deb ($(du -h "$deb" | cut -f1))"
