"""A proof group's durable write, with and without other dirty files on the same filesystem.

    python pipelines/bench_group_write.py [--proofs 750] [--dirty 500] [--dirty-mib 2] [--reps 3] [--dir DIR]

Writes ``--proofs`` proof and public file pairs in one ``formats.atomic.write_group`` (what a proof
task's group write does: temporary files, one syncfs of the filesystem, the moves, a directory
fsync), alternately alone and after ``--dirty`` files of ``--dirty-mib`` MiB were written to the
same filesystem without fsync (as scratch witnesses are, under the output's ``.witnesses/``). The
syncfs flushes those too: the difference is what the scratch witnesses cost a batch's writes.
``--dir``: where (default: a temporary folder under the current one; put it on the filesystem
that outputs go to).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distprove.formats.atomic import Target, write_group  # noqa: E402


def one_round(base: Path, proofs: int, dirty: int, blob: bytes, tag: str) -> float:
    """Seconds of one group write of ``proofs`` pairs after ``dirty`` unsynced files of ``blob``."""
    os.sync()  # nothing of an earlier round left dirty
    scratch = base / f"scratch-{tag}"
    scratch.mkdir()
    for j in range(dirty):
        (scratch / f"{j}.wtns").write_bytes(blob)
    out = base / f"out-{tag}"
    out.mkdir()
    proof, public = b'{"pi_a": ["' + b"1" * 700 + b'"]}', b'["3"]'
    entries = [[Target(str(out / f"{i}.proof.json"), proof, True), Target(str(out / f"{i}.public.json"), public, True)]
               for i in range(proofs)]
    t0 = time.perf_counter()
    results = write_group(entries)
    elapsed = time.perf_counter() - t0
    if not all(r is True for r in results):
        sys.exit(f"group write failed: {[r for r in results if r is not True][:3]}")
    shutil.rmtree(scratch)  # the outputs stay until the end: removing them is work for a later sync
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--proofs", type=int, default=750)
    ap.add_argument("--dirty", type=int, default=500)
    ap.add_argument("--dirty-mib", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path.cwd())
    args = ap.parse_args()
    blob = os.urandom(int(args.dirty_mib * (1 << 20)))
    rows: dict[str, list[float]] = {"alone": [], "after dirty files": []}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="group-write-") as tmp:
        for rep in range(args.reps):
            for kind, dirty in (("alone", 0), ("after dirty files", args.dirty)):
                s = one_round(Path(tmp), args.proofs, dirty, blob, f"{rep}-{dirty}")
                rows[kind].append(s)
                print(f"{kind}: {s * 1e3:.0f} ms ({s / args.proofs * 1e3:.3f} ms a proof)", flush=True)
    print(json.dumps({"proofs": args.proofs, "dirty_files": args.dirty, "dirty_mib": args.dirty_mib,
                      "seconds": rows, "ratio_best": min(rows["after dirty files"]) / min(rows["alone"])}))


if __name__ == "__main__":
    main()
