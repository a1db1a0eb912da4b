#!/usr/bin/env bash
# `swift build` as the package is built: release, the Swift runtime linked statically, and no
# debug information (the package installs gqlmuxd stripped, so it would be thrown away; a cold
# build spends less time without it; an install from source has none either). Every build that
# shares the package's build folder goes through here, so each reuses the others' work: the
# package (scripts/build-deb.sh), its test's helpers (scripts/test-deb.sh), an install from
# source (scripts/install.sh) and the fuzz build's dependencies (scripts/fuzz.sh). Arguments go
# to `swift build`. A target's own flags come before these in each compile, so none can take
# its debug information back.
set -euo pipefail
exec swift build -c release --static-swift-stdlib -Xswiftc -gnone -Xcc -g0 "$@"
