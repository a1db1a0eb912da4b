#!/usr/bin/env bash
# Creates .venv-interop with the third-party GraphQL servers the interop tests run
# (strawberry-graphql on uvicorn), from PyPI. Does nothing when it is already current.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-interop
if [ -x "$venv/bin/python" ] && cmp -s interop/requirements.txt "$venv/requirements.txt"; then
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r interop/requirements.txt
cp interop/requirements.txt "$venv/requirements.txt"
echo "interop virtualenv ready: $venv"
