"""What a file read costs a thread while another thread holds the GIL.

``np.fromfile`` releases the GIL for the read; getting it back waits for the thread that took it.
This times reads of 128 KB files (a 2^12 witness) alone, beside a thread spinning in Python, and
beside a thread holding the GIL in bursts (``--hold`` ms every ``--hold + --sleep`` ms).

    python pipelines/gil_read_probe.py --dir /dev/shm
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def reads(files: list[Path], n: int) -> float:
    """Mean microseconds of ``np.fromfile`` over ``n`` reads cycling through ``files``."""
    t = time.perf_counter()
    for k in range(n):
        np.fromfile(files[k % len(files)], dtype=np.uint8)
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="folder for the files (default: the temporary folder)")
    ap.add_argument("--bytes", type=int, default=131072 + 76)
    ap.add_argument("--reads", type=int, default=256)
    ap.add_argument("--hold", type=float, default=1.0, help="ms the bursty thread holds the GIL")
    ap.add_argument("--sleep", type=float, default=2.5, help="ms the bursty thread sleeps between bursts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        files = [Path(tmp) / f"w{i}.bin" for i in range(64)]
        for f in files:
            f.write_bytes(os.urandom(args.bytes))
        print(f"alone: {reads(files, args.reads):.1f} us a file")
        stop = threading.Event()

        def spin() -> None:
            x = 0
            while not stop.is_set():
                for i in range(1000):
                    x += i * i

        def bursts() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                while time.perf_counter() - t < args.hold / 1e3:
                    pass
                time.sleep(args.sleep / 1e3)

        for name, fn in (("beside a thread spinning in Python", spin),
                         (f"beside {args.hold} ms GIL bursts every {args.hold + args.sleep} ms", bursts)):
            stop.clear()
            other = threading.Thread(target=fn)
            other.start()
            try:
                print(f"{name} (switch interval {sys.getswitchinterval() * 1e3:.1f} ms): "
                      f"{reads(files, max(8, args.reads // 16) if fn is spin else args.reads):.1f} us a file")
            finally:
                stop.set()
                other.join()


if __name__ == "__main__":
    main()
