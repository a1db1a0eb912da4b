#!/usr/bin/env bash
# Creates .venv-interop with the third-party GraphQL servers the interop tests run
# (strawberry-graphql on uvicorn), from PyPI, and .venv-aws with gql and botocore (AWS's own
# signing, for AppSync's IAM mode; botocore pins python-dateutil below what .venv-interop
# holds, so it gets a virtualenv of its own), and .venv-websockets (a `websockets` server as an
# upstream). Does nothing when all are current.
set -euo pipefail
cd "$(dirname "$0")/.."
make_venv() {
    local venv=$1 requirements=$2
    if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$venv/requirements.txt"; then
        return 0
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
    echo "virtualenv ready: $venv"
}
make_venv .venv-interop interop/requirements.txt
make_venv .venv-aws interop/requirements-aws.txt
# Python's `websockets` server as an upstream, at the release that refuses an upgrade with a body header.
make_venv .venv-websockets interop/requirements-websockets.txt
