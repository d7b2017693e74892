"""How much memory this machine has free: what resource checks compare their estimates with."""

from __future__ import annotations

import os


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (else the physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
