"""Cores used by each role of a local batch's processes over time (Linux), to see what bounds it.

    python pipelines/sample_cpu.py record cpu.txt.gz &      # every 0.1 s: each process's CPU ticks
    python pipelines/bench_input_batch.py ... ; kill %1
    python pipelines/sample_cpu.py report cpu.txt.gz [--root-comm python3]

``record`` reads ``/proc/*/stat`` (pid, parent, niceness, user+system ticks) every ``--every``
seconds into a gzip file until killed. ``report`` prints one line per interval with any activity:
the cores each role used in it. Roles follow the process tree of the outermost process whose name
is ``--root-comm``: ``main`` (that process: the client, and the scheduler of a LocalCluster),
``worker`` (its children: the Dask workers), ``witness pool`` (their children running nicer than
0, distprove.witness.niceness) and ``check pool`` (their other children). A batch bound by one
worker's Python thread shows as ``worker`` near 1.0 while the pools idle; one bound by witness
calculation shows the witness pool at the host's cores.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import signal
import sys
import time
from pathlib import Path

Snapshot = tuple[float, dict[int, tuple[int, int, int, str]]]  # time, pid -> (ppid, nice, ticks, comm)


def record(path: Path, every: float) -> None:
    """Append snapshots of every process's CPU ticks to ``path`` until killed (SIGTERM or SIGINT
    closes the file whole)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with gzip.open(path, "wt") as out:
        while True:
            rows = [f"T {time.time():.3f}"]
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    s = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                r = s.rfind(")")
                comm = s[s.find("(") + 1 : r].replace(" ", "_")
                f = s[r + 2 :].split()  # from field 3 (state) on
                rows.append(f"{d} {f[1]} {f[16]} {int(f[11]) + int(f[12])} {comm}")
            out.write("\n".join(rows) + "\n")
            out.flush()
            time.sleep(every)


def load(path: Path) -> list[Snapshot]:
    """The snapshots ``record`` wrote (up to a cut-off end, if it was killed hard)."""
    snaps: list[Snapshot] = []
    try:
        for line in gzip.open(path, "rt"):
            if line.startswith("T "):
                snaps.append((float(line.split()[1]), {}))
                continue
            pid, ppid, nice, ticks, comm = line.split()
            snaps[-1][1][int(pid)] = (int(ppid), int(nice), int(ticks), comm)
    except (EOFError, ValueError):
        snaps.pop()  # the last snapshot may be partial
    return snaps


def role(pid: int, procs: dict[int, tuple[int, int, int, str]], root_comm: str) -> str | None:
    """``pid``'s role by its depth under the outermost ``root_comm`` process (None: not under one)."""
    chain, p = [], pid
    while p in procs and p > 1:
        chain.append(p)
        p = procs[p][0]
    roots = [i for i, c in enumerate(chain) if procs[c][3] == root_comm]
    if not roots:
        return None
    depth = roots[-1]
    if depth == 0:
        return "main"
    if depth == 1:
        return "worker"
    return "witness pool" if procs[pid][1] > 0 else "check pool"


def report(path: Path, root_comm: str) -> None:
    """Print the cores each role used in each interval with any activity."""
    snaps = load(path)
    tick = os.sysconf("SC_CLK_TCK")
    t_start = snaps[0][0]
    roles = ("main", "worker", "witness pool", "check pool")
    print(f"{'s':>7} " + "".join(f"{r:>14}" for r in roles))
    for (t0, before), (t1, after) in zip(snaps, snaps[1:]):
        used: collections.Counter[str] = collections.Counter()
        for pid, (_, _, ticks, _) in after.items():
            r = role(pid, after, root_comm)
            if r is not None:
                used[r] += (ticks - before.get(pid, (0, 0, 0, ""))[2]) / tick / (t1 - t0)
        if sum(used.values()) >= 0.5:
            print(f"{t1 - t_start:7.2f} " + "".join(f"{used[r]:14.2f}" for r in roles))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("record", "report"))
    ap.add_argument("path", type=Path)
    ap.add_argument("--every", type=float, default=0.1, help="record: seconds between snapshots")
    ap.add_argument("--root-comm", default="python3", help="report: the batch's outermost process name")
    args = ap.parse_args()
    if args.action == "record":
        record(args.path, args.every)
    else:
        report(args.path, args.root_comm)


if __name__ == "__main__":
    main()
