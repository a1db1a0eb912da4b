#!/usr/bin/env bash
# `swift build` as the package is built: release, with the Swift runtime linked statically.
# Every build that shares the package's build folder goes through here, so each reuses the
# others' work (the same flags, so no dependency is compiled twice): the package
# (scripts/build-deb.sh), its test's helpers (scripts/test-deb.sh), an install from source
# (scripts/install.sh) and the fuzz build's dependencies (scripts/fuzz.sh). Arguments go to
# `swift build`. (Building without debug information, which the package's stripped gqlmuxd
# throws away, was tried: the cold build of gqlmuxd took 723 s against 681 and 729 s with it,
# no gain worth crash reports without lines.)
set -euo pipefail
exec swift build -c release --static-swift-stdlib "$@"
