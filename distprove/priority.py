"""Thread priorities: how the package's background work (key store writers, witness pools) yields
cores to the threads on a batch's critical path."""

from __future__ import annotations

import os
import sys
import threading


def nicer(niceness: int) -> None:
    """Make the calling thread ``niceness`` nicer (Linux, where niceness is per thread and the
    threads and processes it starts inherit it; elsewhere, where the call would name a process,
    nothing). Meant as a pool's ``initializer``."""
    if niceness and sys.platform == "linux":
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + niceness)
