"""The write of a batch's checked proofs on this host: ms a proof for a group of proofs.

Writes ``--proofs`` proofs (random affine coordinates < q and ``--public`` public signals, the
sizes of a real proof: the writer never looks at the values) into a fresh folder under each
``--dir``, the way a prove-group task does it after its check: ``output.check_and_write``
(unchecked) then the metrics of each outcome. Prints the median of ``--reps`` runs per folder, wall
and this process's CPU time (user and system, every thread: steadier than the wall on a busy host).

    python3 pipelines/bench_write.py --dir /tmp --dir /dev/shm
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distprove import bn254  # noqa: E402
from distprove.cluster import metrics  # noqa: E402
from distprove.cluster.output import check_and_write  # noqa: E402
from distprove.cluster.tasks import Assembled, ProofSpec  # noqa: E402
from distprove.prover import Proof  # noqa: E402


def synthetic(n: int, n_public: int, out: Path, seed: int = 0) -> list[Assembled]:
    """``n`` proofs to write into ``out``, with the stage seconds a prove-group task reports."""
    rng = random.Random(seed)

    def q() -> int:
        return rng.randrange(bn254.Q)

    items = []
    for i in range(n):
        proof = Proof((q(), q()), ((q(), q()), (q(), q())), (q(), q()), [rng.randrange(bn254.R) for _ in range(n_public)])
        spec = ProofSpec(f"w{i:04d}", f"w{i:04d}.wtns", "bench.zarr", "h", str(out / f"w{i:04d}.proof.json"),
                         str(out / f"w{i:04d}.public.json"))
        seconds = {"witness": 4e-4, "gather": 6e-4, "ntt": 6e-4, "msm": 6e-4, "assemble": 4e-3, "total": 7e-3}
        items.append(Assembled(spec, proof, seconds))
    return items


def run_once(base: Path, n: int, n_public: int) -> tuple[float, float]:
    """Wall and CPU seconds to write ``n`` proofs into a fresh folder under ``base`` (and record their metrics)."""
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-write-") as d:
        items = synthetic(n, n_public, Path(d))
        t0, c0 = time.perf_counter(), time.process_time()
        outcomes = check_and_write(items, {}, False, "bench")
        metrics.record_proofs((a.spec.key_path, o.status == "proved", o.seconds) for a, o in zip(items, outcomes))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if any(o.status != "proved" for o in outcomes):
            raise SystemExit(f"bench_write: {outcomes[0].reason}")
    return seconds, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", action="append", type=Path, help="folder to write under (repeatable; default /tmp)")
    ap.add_argument("--proofs", type=int, default=256)
    ap.add_argument("--public", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for base in args.dir or [Path("/tmp")]:
        runs = [run_once(base, args.proofs, args.public) for _ in range(args.reps)]
        wall, cpu = (1e3 * statistics.median(r[j] for r in runs) / args.proofs for j in (0, 1))
        print(f"{base}: {args.proofs} proofs, {wall:.3f} ms a proof, CPU {cpu:.3f} ms (medians of {args.reps}; "
              f"wall {', '.join(f'{1e3 * r[0] / args.proofs:.3f}' for r in runs)})")

if __name__ == "__main__":
    main()
