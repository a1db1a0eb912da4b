"""A stand-in for systemd's service manager, just the parts gqlmuxd's online restart uses: a
notify socket (NOTIFY_SOCKET) that keeps the descriptors sent with FDSTORE=1 under their
FDNAME, drops them on FDSTOREREMOVE=1, answers BARRIER=1 (by closing the pipe it carries), and
starts the next gqlmuxd with what it holds as LISTEN_FDS / LISTEN_FDNAMES, as systemd does on
`systemctl restart`. No systemd and no root needed: the real binary, the real fd passing.

    store = FDStore(directory)
    process = store.spawn([gqlmuxd, "--config", path], log)   # NOTIFY_SOCKET and FDSTORE set
    os.kill(process.pid, SIGTERM); process.wait()              # gqlmuxd hands over into the store
    process = store.spawn(...)                                 # the next one adopts it all

Like systemd 252, a SIGTERM is a restart when gqlmuxd cannot ask the bus what the job is.
"""

from __future__ import annotations

import array
import fcntl
import os
import socket
import subprocess
import threading
from typing import Dict, List, Optional, Tuple

# The kernel passes at most 253 descriptors in one message.
_MAX_FDS = 253


class FDStore:
    def __init__(self, directory: str, capacity: int = 16384):
        self.path = os.path.join(directory, "notify.sock")
        self.capacity = capacity
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.lock = threading.Lock()
        self.stored: List[Tuple[str, int]] = []
        self.messages: List[str] = []
        self.ready = 0  # READY=1 messages so far
        self.closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        size = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(65536, size)
            except OSError:
                return
            if not data and not ancillary and self.closed:
                return
            fds = array.array("i")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            fields = dict(line.split("=", 1) for line in data.decode(errors="replace").splitlines() if "=" in line)
            with self.lock:
                self.messages.append(data.decode(errors="replace"))
                if fields.get("READY") == "1":
                    self.ready += 1
                if fields.get("FDSTORE") == "1" and len(self.stored) + len(fds) <= self.capacity:
                    name = fields.get("FDNAME", "stored")
                    self.stored += [(name, fd) for fd in fds]
                    continue
                if fields.get("FDSTOREREMOVE") == "1":
                    name = fields.get("FDNAME", "stored")
                    for stored_name, fd in self.stored:
                        if stored_name == name:
                            os.close(fd)
                    self.stored = [(n, fd) for n, fd in self.stored if n != name]
            # BARRIER=1's pipe, READY=1, and anything not kept: closed (systemd's answer to a
            # barrier is closing its copy of the pipe).
            for fd in fds:
                os.close(fd)

    def names(self) -> Dict[str, int]:
        """How many descriptors the store holds, by name."""
        with self.lock:
            counts: Dict[str, int] = {}
            for name, _ in self.stored:
                counts[name] = counts.get(name, 0) + 1
            return counts

    def count(self) -> int:
        with self.lock:
            return len(self.stored)

    def spawn(self, command: List[str], log, env: Optional[dict] = None, prefix: Optional[List[str]] = None) -> subprocess.Popen:
        """Starts `command` as the service's next main process: NOTIFY_SOCKET and FDSTORE set,
        and what the store holds passed as descriptors 3, 4, … with LISTEN_FDS, LISTEN_FDNAMES
        and LISTEN_PID (the child's own pid: a shell sets it and execs)."""
        with self.lock:
            held = list(self.stored)
        # Duplicates above every descriptor the shell might use; the shell moves them to 3… .
        base = max(1000, 3 + len(held) + 64)
        dups = [(name, self._dup_high(fd, base)) for name, fd in held]
        environment = dict(env if env is not None else os.environ)
        environment.update(NOTIFY_SOCKET=self.path, FDSTORE=str(self.capacity))
        for key in ("LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
            environment.pop(key, None)
        moves = " ".join(f"{3 + index}<&{fd} {fd}<&-" for index, (_, fd) in enumerate(dups))
        listen = ""
        if dups:
            environment["LISTEN_FDNAMES"] = ":".join(name for name, _ in dups)
            listen = f"export LISTEN_FDS={len(dups)} LISTEN_PID=$$; "
        script = f'{listen}exec "$@" {moves}'
        try:
            return subprocess.Popen(["/bin/bash", "-c", script, "gqlmuxd", *(prefix or []), *command],
                                    env=environment, stdout=log, stderr=subprocess.STDOUT,
                                    pass_fds=[fd for _, fd in dups])
        finally:
            for _, fd in dups:
                os.close(fd)

    @staticmethod
    def _dup_high(fd: int, base: int) -> int:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base)

    def close(self) -> None:
        """Ends the store: every descriptor it holds is closed, as when a unit stops for good."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self.lock:
            for _, fd in self.stored:
                os.close(fd)
            self.stored = []
