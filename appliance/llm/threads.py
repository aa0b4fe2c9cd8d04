"""How many threads llama.cpp gets: one per physical core, never more than the cores free right now.

Decoding a token is a chain of barriers across all threads. When another process holds a core, the
thread sharing it stalls every barrier, and OpenMP's busy-waiting makes it worse: on a 2-core machine
2 threads fell from 100 to 20 tokens/s, while 1 thread kept 60. (Making OpenMP wait passively
instead helped under contention but cut the idle speed from 100 to 30, so we do not.) So before
each generation the worker counts the cores other processes keep busy (runnable tasks in /proc/stat
minus our own, sampled a few times) and decodes on the rest. Prompt reading is compute-bound and
short, so it keeps every physical core.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

_CORES: dict[frozenset[int], int] = {}  # physical cores by affinity set (the topology does not change)


def physical_cores() -> int:
    """Physical cores this process may run on (SMT siblings counted once).

    Asked before every generation and every embedding; the topology of a set of CPUs never changes, so
    sysfs is read once per affinity set (two files a CPU: ~0.1 ms here, more on a Pi's slower cores).
    """
    try:
        allowed = frozenset(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return max(1, (os.cpu_count() or 2) // 2)
    known = _CORES.get(allowed)
    if known is None:
        known = _CORES[allowed] = _count_cores(sorted(allowed))
    return known


def _count_cores(allowed: list[int]) -> int:
    """Distinct (package, core) pairs of these CPUs, from sysfs."""
    cores = set()
    for cpu in allowed:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{base}/core_id") as c, open(f"{base}/physical_package_id") as p:
                cores.add((p.read().strip(), c.read().strip()))
        except OSError:
            cores.add(("?", str(cpu)))
    return max(1, len(cores))


def _running_tasks() -> int | None:
    """Runnable tasks on the machine, from /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _own_running_tasks() -> int:
    """Runnable threads of this process (llama.cpp's own threads may still be spinning)."""
    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as f:
                # The state follows the parenthesised command name, which may itself hold spaces.
                if f.read().rsplit(")", 1)[1].split()[0] == "R":
                    count += 1
        except (OSError, IndexError):
            continue
    return max(1, count)


def busy_cores_elsewhere(samples: int = 5, interval_s: float = 0.002) -> int:
    """Cores kept busy by other processes now, the median of a few samples."""
    counts = []
    for i in range(samples):
        running = _running_tasks()
        if running is None:
            return 0
        counts.append(max(0, running - _own_running_tasks()))
        if i + 1 < samples:
            time.sleep(interval_s)
    counts.sort()
    return counts[len(counts) // 2]


@dataclass
class ThreadPolicy:
    """Thread counts for decode and prompt reading; None means automatic."""

    decode: int | None = None
    batch: int | None = None

    def choose(self) -> tuple[int, int]:
        """(decode threads, batch threads) for the next generation."""
        cores = physical_cores()
        batch = self.batch or cores
        if self.decode:
            return self.decode, batch
        decode = max(1, min(cores, len(os.sched_getaffinity(0)) - busy_cores_elsewhere()))
        return decode, batch
