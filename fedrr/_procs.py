"""Processes by pid, pid-reuse safe (Linux /proc): find a process tree, tell whether it is still
the same process, stop it (SIGTERM, then SIGKILL). Used to clean up what ``flwr run`` and test
deployments leave running."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time) of a live process, None if it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _live_pids() -> dict[int, tuple[int, int]]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := proc_stat(int(d))) is not None:
            out[int(d)] = st
    return out


def descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start time) of ``root`` and every live process below it."""
    table = _live_pids()
    if root not in table:
        return set()
    found, frontier = {(root, table[root][1])}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and (pid, start) not in found:
                found.add((pid, start))
                frontier.append(pid)
    return found


def alive(procs) -> set[tuple[int, int]]:
    """The (pid, start time) pairs that are still the same live process (pid reuse safe)."""
    return {(pid, start) for pid, start in procs if (st := proc_stat(pid)) is not None and st[1] == start}


def stop(procs, timeout: float = 15.0) -> set[tuple[int, int]]:
    """SIGTERM every process, SIGKILL what is left after ``timeout``; returns survivors (should be empty)."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        for pid, _ in alive(procs):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while alive(procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive(procs):
            return set()
    return alive(procs)


def find_superlinks(port: int) -> list[int]:
    """Live ``flower-superlink`` processes serving ``--port port``."""
    pids = []
    for pid in _live_pids():
        cmd = cmdline(pid)
        if any(c.endswith("flower-superlink") for c in cmd) and "--port" in cmd:
            i = cmd.index("--port")
            if i + 1 < len(cmd) and cmd[i + 1] == str(port):
                pids.append(pid)
    return pids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
