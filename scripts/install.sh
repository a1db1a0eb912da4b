#!/usr/bin/env bash
# Installs gqlmux system-wide (run as root): release binaries with a static Swift runtime,
# the systemd units, the journald catalog, an example config and an empty token file.
#   scripts/install.sh [PREFIX]      PREFIX defaults to /usr/local
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }

scripts/release-build.sh --product gqlmuxd
bin=$(swift build -c release --show-bin-path)

install -d "$prefix/bin" "$prefix/lib/systemd/catalog" "$prefix/share/doc/gqlmux" /etc/systemd/system /etc/gqlmux
# One binary: run as gqlmuxctl it is the CLI.
install -m 0755 "$bin/gqlmuxd" "$prefix/bin/"
ln -sf gqlmuxd "$prefix/bin/gqlmuxctl"
sed "s#/usr/local/bin/gqlmuxd#$prefix/bin/gqlmuxd#; s#/usr/local/share/doc#$prefix/share/doc#" systemd/gqlmuxd.service >/etc/systemd/system/gqlmuxd.service
install -m 0644 systemd/gqlmuxd.socket /etc/systemd/system/gqlmuxd.socket
install -m 0644 systemd/gqlmuxd-graphql.socket /etc/systemd/system/gqlmuxd-graphql.socket
install -m 0644 systemd/gqlmuxd.catalog "$prefix/lib/systemd/catalog/gqlmuxd.catalog"
install -m 0644 README.md "$prefix/share/doc/gqlmux/README.md"
# The socket's group: members may use gqlmuxd. The service runs as this static user.
getent group gqlmux >/dev/null || groupadd --system gqlmux
getent passwd gqlmux >/dev/null || useradd --system --gid gqlmux --no-create-home --shell /usr/sbin/nologin gqlmux
# Its configuration and token: the service's user reads them, nobody else (not even the members
# of group gqlmux, who may use the socket). LoadCredential= needs the token file to exist; "{}"
# is an empty connecting payload. (docs/secrets.md)
# An earlier install made gqlmuxd.toml root:gqlmux 0640: the modes are set whatever was there.
[ -e /etc/gqlmux/gqlmuxd.toml ] || install -m 0600 config/gqlmuxd.toml /etc/gqlmux/gqlmuxd.toml
[ -e /etc/gqlmux/token.json ] || (umask 077 && echo '{}' >/etc/gqlmux/token.json)
chown gqlmux:root /etc/gqlmux/gqlmuxd.toml /etc/gqlmux/token.json
chmod 0600 /etc/gqlmux/gqlmuxd.toml /etc/gqlmux/token.json

journalctl --update-catalog
systemctl daemon-reload
cat <<MSG
gqlmux installed. Next:
  edit /etc/gqlmux/gqlmuxd.toml ([upstream] url, credentials)
  systemctl enable --now gqlmuxd.socket
  usermod -aG gqlmux USER            # lets USER's processes use the socket
  systemctl status gqlmuxd; journalctl -u gqlmuxd -f
MSG
