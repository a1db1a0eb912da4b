"""The `websockets` test server (interop/websockets_app.py) as a process: started on a port it
chose itself (no port taken and released), stopped by PID, and its transcript of every upgrade
header and client message read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import List, Optional

from interop.harness import ROOT, terminate

PYTHON = os.path.join(ROOT, ".venv-websockets", "bin", "python")


class RecordingPeer:
    def __init__(self, dialect: str = "transport-ws", secrets: Optional[List[str]] = None):
        if not os.path.exists(PYTHON):
            raise RuntimeError(f"{PYTHON} is missing: run scripts/setup-interop.sh")
        self.directory = tempfile.mkdtemp(prefix="gqlmux-peer-")
        self.transcript_path = os.path.join(self.directory, "transcript.jsonl")
        self.secrets_path = os.path.join(self.directory, "secrets")
        with open(self.secrets_path, "w") as f:
            f.write("".join(s + "\n" for s in secrets or []))
        self.log_path = os.path.join(self.directory, "server.log")
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [PYTHON, os.path.join(ROOT, "interop", "websockets_app.py"), "--dialect", dialect,
             "--secrets", self.secrets_path, "--transcript", self.transcript_path],
            stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        line = self.process.stdout.readline()  # "PORT N" once it listens (or EOF if it died)
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"websockets_app did not start: {line!r}")
        self.port = int(line.split()[1])

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def transcript(self) -> List[dict]:
        try:
            with open(self.transcript_path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def raw_transcript(self) -> str:
        """Everything the server was sent, as one text (for "this secret never arrived" checks)."""
        try:
            with open(self.transcript_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is not None and self.process.stdout is None:
            return  # stopped already
        terminate(self.process, 5)
        if self.process.stdout:
            self.process.stdout.close()
            self.process.stdout = None
        shutil.rmtree(self.directory, ignore_errors=True)
