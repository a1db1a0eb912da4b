#!/usr/bin/env bash
# Style check: swift-format (the toolchain's `swift format`) with the project's .swift-format
# (SwiftNIO's style, 4-space indentation, 160 columns). Fails on any finding; fix them with
#   swift format format -i -r Sources Tests Fuzz Package.swift
set -euo pipefail
cd "$(dirname "$0")/.."
swift format lint --strict -r Sources Tests Fuzz Package.swift
echo "lint: swift-format found nothing"
# Each target imports exactly the modules Package.swift declares for it.
python3 scripts/check-imports.py
# The reference docs (docs/configuration.md, cli.md, metrics.md, journal.md, protocol.md,
# graphql-endpoint.md, config/gqlmuxd.toml, systemd/gqlmuxd.catalog) name exactly what the code has.
python3 scripts/check-references.py
