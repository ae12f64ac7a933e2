"""``distprove serve`` under load against ``distprove batch``, and its idle latency against an in-process proof.

Three measurements of one key and a folder of its .wtns witnesses, each in processes of its own:

1. **Batch baseline**: ``distprove batch KEY FOLDER --backend B --workers W`` in a fresh process
   over ``-N`` witnesses (the folder's ``*.wtns`` in turn, hard-linked or copied into a temporary
   folder, as pipelines/bench_batch.py and pipelines/first_batch.sh stage them). Its proofs/s is
   the batch report's own (``--report`` JSON, else the summary line "proved N, failed F, ... (R
   proofs/s ...)"): proofs over the seconds from the start of the batch's run (the local cluster
   already up; the key's opening on the worker and the first, cold proofs included). Beside it
   the *steady* rate, (proofs - 1) over the span from the first result to the last, which leaves
   that start out.
2. **Service under load**: ``distprove serve bench=KEY --backend B --workers W --port P`` in a
   process session of its own (its local cluster goes with it), state in a temporary folder,
   bound to 127.0.0.1 without a token. Once /healthz answers: a warm-up (one request, then
   ``--warmup`` at once), then ``-C`` concurrent clients post the same ``-N`` witnesses, each
   client keeping ``--depth`` requests outstanding (POST the .wtns, then GET ?wait= long-polls
   until done or failed; a 429 waits its Retry-After). The clients are asyncio tasks spread over
   ``--client-procs`` processes, each task on a keep-alive connection of its own through a minimal
   HTTP/1.1 client (:class:`RawClient`; ``--http httpx``: one shared ``httpx.AsyncClient`` a
   process, which costs some 25 times the CPU a request), so that the posting and polling side
   (two or more HTTP requests a proof; > 2,000 a second at 2^12 on an H100) is not what is
   measured; each process's CPU share is reported, and a share near 100% is flagged. Reported: sustained proofs/s (N over the seconds from the first POST to the last
   done), its ratio to the batch's proofs/s, latency (POST -> done seen) p50/p90/p99/max, the
   429s and the failures (there must be none). ``--keep K`` keeps K results' proof.json and
   public.json (with the served verification key) under ``--out``/proofs for snarkjs elsewhere;
   nothing is verified here beyond the service's own pairing check.
3. **Idle latency**: on the same service, now idle, ``-R`` requests one after the other (POST,
   then GET ?wait=30): median and min. After the service stops, the same witness proved warm in
   one fresh Python process through ``distprove.prove`` (the key opened once, two warm-up proofs,
   then ``-R`` timed ones: prove, the pairing check when ``distprove.verify`` is on, as the
   service does, and the write, as ``distprove prove`` does them). Reported: idle service median
   minus in-process median, in ms (the goal: within +10 ms at 2^16). A request to an idle service
   goes to a worker at once; the gathering window (``distprove.serve.gather-window``) holds
   requests only while every worker thread has a task.

Service settings are dask config ``distprove.serve.*`` (distprove/distprove.yaml documents them):
``--set NAME=VALUE`` (repeatable, e.g. ``--set gather-window=5ms --set group-cap=32``) reaches
the service as ``DASK_DISTPROVE__SERVE__NAME``; the settings in force are printed and recorded.
The summary says when ``max-queue`` or ``group-cap`` holds the clients back.

Every phase has a time limit (``--batch-timeout``, ``--start-timeout``, ``--load-timeout``,
``--inprocess-timeout``) inside ``--time-limit`` for the whole run; a phase cut short is recorded
as such and the next one runs. The JSON (``--json``) is rewritten after each phase, so a run cut
short still leaves what it measured. Logs of the batch and the service go to ``--out`` (default: a
temporary folder, removed).

On the GPU machine pipelines/device_run.sh would run it as a step of its own after the keys step
(which makes /tmp/distprove-keys/chain_k12), under the step's timeout and with its JSON and the
kept proofs under $OUT, e.g.::

    timeout 560 python3 pipelines/bench_serve.py --key /tmp/distprove-keys/chain_k12/key.zarr \\
        --witnesses /tmp/distprove-keys/chain_k12 --backend gpu -N 4096 -C 64 --time-limit 540 \\
        --json $RES/serve.json --out $RES/serve --keep 8 $SERVE_ARGS 2>&1 | tee $RES/serve.log

Here, on the CPU backend and the small fixtures::

    python3 pipelines/bench_serve.py --key tests/data/mini/mini_0001.zkey --witnesses tests/data/mini \\
        --backend cpu -N 300 -C 16 --json /tmp/serve.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_batch import stage  # noqa: E402
from benchlib import GpuBusy, git_commit  # noqa: E402

KEY_NAME = "bench"
"""The key's name in the service's API."""
WTNS = {"Content-Type": "application/octet-stream"}
SUMMARY = re.compile(r"^proved (\d+), failed (\d+), skipped (\d+) in ([\d.]+) s \(([\d.]+) proofs/s; mode ([^,]*), (\d+) workers", re.M)
"""The first line of ``distprove batch``'s summary (BatchReport.summary)."""
CLIENT_BUSY = 0.8
"""A client process busier than this share of its wall time may be what limits the load."""


# --- small helpers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentiles(values: list[float], qs: tuple[float, ...] = (50, 90, 99)) -> dict[str, float]:
    """Nearest-rank percentiles (and max, min, mean) of ``values``; empty for none."""
    if not values:
        return {}
    v = sorted(values)
    out = {f"p{q:g}": v[min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))] for q in qs}
    out.update(max=v[-1], min=v[0], mean=sum(v) / len(v))
    return out


def ms(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {1e3 * x:.1f}" for k, x in d.items()) + " ms" if d else "-"


def gpu_names() -> list[str]:
    """The GPUs by nvidia-smi (no CUDA context in this process); empty without one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("distprove", "dask", "distributed", "httpx", "uvicorn", "starlette", "anyio", "numpy", "cupy-cuda12x"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


class Session:
    """A child process in a process session of its own (so that a local Dask cluster it starts goes
    with it), its output into ``log``."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log_path = log
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)

    def wait(self, timeout: float) -> int | None:
        """The exit status, or None when it ran past ``timeout`` (then it is killed)."""
        try:
            return self.proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def stop(self, grace: float = 30.0) -> None:
        """SIGINT, then after ``grace`` seconds SIGKILL to the whole session."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGINT)
                self.proc.wait(grace)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def service_cpu(svc: "Service") -> float:
    """CPU seconds (user + system) the service's own process has used so far: its HTTP server,
    journal and dispatcher, without its local cluster's worker processes (its children)."""
    import psutil

    try:
        t = psutil.Process(svc.session.proc.pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


# --- 1. the batch ----------------------------------------------------------------------------------


def batch_phase(args: argparse.Namespace, witnesses: list[Path], work: Path, logs: Path, timeout: float) -> dict[str, Any]:
    """``distprove batch`` in a fresh process over ``-N`` staged witnesses; its report's proofs/s."""
    folder = stage(witnesses, args.proofs, work / "batch-witnesses")
    out, report = work / "batch-proofs", work / "batch-report.json"
    cmd = [sys.executable, "-m", "distprove.cli", "batch", str(args.key), str(folder), "--out", str(out),
           "--backend", args.backend, "--workers", str(args.workers), "--report", str(report)]
    if args.workers_per_gpu is not None:
        cmd += ["--workers-per-gpu", str(args.workers_per_gpu)]
    cmd += args.batch_arg
    print(f"[batch] {' '.join(cmd[1:])} (limit {timeout:.0f} s)", flush=True)
    t0 = time.perf_counter()
    with GpuBusy() as busy:
        run = Session(cmd, logs / "batch.log", service_env(args, serve=False))
        rc = run.wait(timeout)
    seconds = time.perf_counter() - t0
    res: dict[str, Any] = {"command": cmd[1:], "rc": rc, "timed_out": rc is None, "process_s": seconds,
                           "gpu_busy_percent": busy.percent}
    text = (logs / "batch.log").read_text(errors="replace")
    m = None
    for m in SUMMARY.finditer(text):  # the last summary (there is one)
        pass
    if m:
        res["summary"] = text[m.start():].splitlines()[0]
    if report.exists():
        rep = json.loads(report.read_text())
        res.update(proved=rep["proved"], failed=rep["failed"], wall_s=rep["wall_seconds"], proofs_per_s=rep["proofs_per_second"],
                   mode=rep["mode"], workers=rep["workers"], checked=rep["checked"], source="report json")
        lat = sorted(r["latency"] for r in rep["results"] if r["status"] == "proved")
        if len(lat) > 1 and lat[-1] > lat[0]:
            res["steady_proofs_per_s"] = (len(lat) - 1) / (lat[-1] - lat[0])
            res["first_result_s"] = lat[0]
    elif m:
        res.update(proved=int(m.group(1)), failed=int(m.group(2)), wall_s=float(m.group(4)), proofs_per_s=float(m.group(5)),
                   mode=m.group(6), workers=int(m.group(7)), source="summary line")
    else:  # no report: the process's seconds, cluster start included (a lower bound of the rate)
        res.update(proofs_per_s=args.proofs / seconds if rc == 0 else 0.0, source="process wall time (cluster start included)")
    if rc != 0:
        res["error"] = "timed out" if rc is None else f"exit status {rc}"
        print(f"[batch] {res['error']}; its log ends:\n{run.tail()}", flush=True)
    print(f"[batch] {res.get('summary', '')} -> {res['proofs_per_s']:.2f} proofs/s ({res['source']})"
          + (f", steady {res['steady_proofs_per_s']:.2f} proofs/s (first result after {res['first_result_s']:.2f} s)"
             if "steady_proofs_per_s" in res else "") + f"; process {seconds:.1f} s", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return res


# --- 2. the service --------------------------------------------------------------------------------


def env_name(setting: str) -> str:
    return "DASK_DISTPROVE__SERVE__" + setting.replace("-", "_").upper()


def service_env(args: argparse.Namespace, serve: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if serve:
        env.update({env_name(k): v for k, v in args.settings.items()})
    if args.workers_per_gpu is not None:
        env["DASK_DISTPROVE__CLUSTER__WORKERS_PER_GPU"] = str(args.workers_per_gpu)
    return env


def serve_settings(settings: dict[str, str]) -> dict[str, Any]:
    """The ``distprove.serve`` settings the service will run with (``settings`` read as dask reads
    its environment variables); SystemExit for an unknown name or a bad value."""
    import dataclasses

    import dask.config

    import distprove.config  # noqa: F401  (registers distprove's defaults with dask)
    from distprove.errors import FormatError
    from distprove.service.service import ServeSettings

    known = {k.replace("_", "-") for k in dask.config.get("distprove.serve")}
    flat = {}
    for name, value in settings.items():
        if name.replace("_", "-") not in known:
            raise SystemExit(f"--set {name}: not a distprove.serve setting (known: {', '.join(sorted(known))})")
        parsed = dask.config.collect_env({env_name(name): value})  # {"distprove": {"serve": {name: value}}}
        flat[f"distprove.serve.{name.replace('-', '_')}"] = parsed["distprove"]["serve"][name.replace("-", "_").lower()]
    with dask.config.set(flat):
        try:
            s = ServeSettings.read()
        except FormatError as exc:
            raise SystemExit(f"--set: {exc}") from None
        raw = {k: dask.config.get(f"distprove.serve.{k}") for k in sorted(known)}
    return {"effective": dataclasses.asdict(s), "config": raw, "overridden": dict(settings)}


class Service:
    """``distprove serve bench=KEY`` on a free local port with its state in ``state``."""

    def __init__(self, args: argparse.Namespace, state: Path, logs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "distprove.cli", "serve", f"{KEY_NAME}={args.key}", "--backend", args.backend,
                    "--workers", str(args.workers), "--port", str(self.port), "--state-dir", str(state)]
        print(f"[serve] {' '.join(self.cmd[1:])}" + "".join(f" {env_name(k)}={v}" for k, v in args.settings.items()), flush=True)
        self.session = Session(self.cmd, logs / "serve.log", service_env(args))

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until /healthz answered; RuntimeError when the service died or ``timeout`` passed."""
        import httpx

        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            if self.session.proc.poll() is not None:
                raise RuntimeError(f"the service exited with status {self.session.proc.returncode}; its log ends:\n{self.session.tail()}")
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"no /healthz answer in {timeout:.0f} s; its log ends:\n{self.session.tail()}")
            time.sleep(0.3)

    def stop(self) -> None:
        self.session.stop()


class RawResponse:
    """What :class:`RawClient` answers: the parts of an httpx.Response the clients read."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.content = status, headers, body

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class RawClient:
    """A minimal HTTP/1.1 client on one keep-alive asyncio connection (one request at a time), for
    the load's clients: httpx costs about 1.4 ms of CPU a request on a slow core (measured against
    a trivial Starlette app), this about a tenth of it. Answers with Content-Length or chunked
    bodies (what uvicorn sends); reconnects once when the server closed the connection."""

    def __init__(self, url: str, timeout: float) -> None:
        host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        self.host, self.port, self.timeout = host, int(port or 80), timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> RawResponse:
        return await self.request("POST", path, content, headers)

    async def get(self, path: str, params: dict[str, Any] | None = None) -> RawResponse:
        if params:
            path += "?" + "&".join(f"{k}={v}" for k, v in params.items())
        return await self.request("GET", path)

    async def request(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> RawResponse:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()) + "\r\n"
        for attempt in (0, 1):
            fresh = self.writer is None
            if fresh:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            try:
                self.writer.write(head.encode() + body)
                return await asyncio.wait_for(self._response(), self.timeout)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if fresh or attempt:  # a new connection that failed: the server is gone
                    raise
        raise ConnectionError("unreachable")

    async def _response(self) -> RawResponse:
        assert self.reader is not None
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                parts.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            body = b"".join(p[:-2] for p in parts)
        else:
            body = await self.reader.read()
            headers["connection"] = "close"
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return RawResponse(status, headers, body)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        self.reader = self.writer = None


def _client_main(url: str, paths: list[str], indices: list[int], concurrency: int, wait_s: float, keep: list[int],
                 keep_dir: str | None, deadline: float, http: str, barrier: Any, results: Any) -> None:
    """One client process of :func:`load`: ``concurrency`` asyncio tasks working through
    ``indices`` (request i posts witness ``paths[i % len(paths)]``), each POST then GET ?wait=
    until the request is done or failed; ``http``: the tasks share one httpx.AsyncClient
    ("httpx"), or each has a :class:`RawClient` ("raw"). Puts its records and CPU seconds on
    ``results``."""
    import httpx

    bodies = [Path(p).read_bytes() for p in paths]
    keep_set = set(keep)
    records: list[dict[str, Any]] = []
    counts = {"posts": 0, "gets": 0, "429": 0}

    async def one(c: Any, i: int) -> dict[str, Any]:
        t_post = time.time()
        rec: dict[str, Any] = {"i": i, "t_post": t_post, "status": "error"}
        try:
            while True:
                counts["posts"] += 1
                r = await c.post(f"/v1/keys/{KEY_NAME}/proofs", content=bodies[i % len(bodies)], headers=WTNS)
                if r.status_code != 429:
                    break
                counts["429"] += 1
                rec["r429"] = rec.get("r429", 0) + 1
                pause = float(r.headers.get("retry-after", "1") or 1)
                if time.time() + pause > deadline:
                    rec["reason"] = "429 until the time limit"
                    return rec
                await asyncio.sleep(pause)
            if r.status_code not in (200, 202):
                rec["reason"] = f"POST answered {r.status_code}: {r.text[:200]}"
                return rec
            rid = r.json()["id"]
            rec["t_accepted"] = time.time()
            while True:
                if time.time() > deadline:
                    rec["reason"] = "not finished by the time limit"
                    return rec
                counts["gets"] += 1
                left = max(1.0, min(wait_s, deadline - time.time()))  # a long poll ends by the time limit
                r = await c.get(f"/v1/proofs/{rid}", params={"wait": round(left, 3)})
                if r.status_code != 200:
                    rec["reason"] = f"GET answered {r.status_code}: {r.text[:200]}"
                    return rec
                got = r.json()
                if got["status"] in ("done", "failed"):
                    break
            rec.update(t_done=time.time(), status=got["status"], reason=got.get("reason", ""))
            if got["status"] == "done" and keep_dir and i in keep_set:
                stem = Path(paths[i % len(paths)]).name.removesuffix(".wtns")
                Path(keep_dir, f"r{i:05d}-{stem}.proof.json").write_text(json.dumps(got["proof"]))
                Path(keep_dir, f"r{i:05d}-{stem}.public.json").write_text(json.dumps(got["public"]))
        except (httpx.HTTPError, OSError, EOFError, asyncio.TimeoutError, ValueError, KeyError, IndexError) as exc:
            rec["reason"] = f"{type(exc).__name__}: {exc}"[:300]
        return rec

    async def run() -> None:
        todo = deque(indices)
        limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(wait_s + 30), limits=limits) as shared:
            async def worker() -> None:
                c = RawClient(url, wait_s + 30) if http == "raw" else shared
                try:
                    while todo and time.time() < deadline:
                        records.append(await one(c, todo.popleft()))
                finally:
                    if isinstance(c, RawClient):
                        await c.close()

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    barrier.wait(timeout=120)  # every process has read its witnesses and imported httpx
    cpu0, t0 = time.process_time(), time.time()
    asyncio.run(run())
    results.put({"records": records, "cpu_s": time.process_time() - cpu0, "wall_s": time.time() - t0, **counts})


def load(url: str, paths: list[Path], count: int, concurrency: int, procs: int, wait_s: float, timeout: float,
         keep: int = 0, keep_dir: Path | None = None, http: str = "raw") -> dict[str, Any]:
    """``count`` requests from ``concurrency`` client tasks spread over ``procs`` processes; the
    records of every request and what the clients cost."""
    import multiprocessing as mp

    procs = max(1, min(procs, concurrency, count))
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
    deadline = time.time() + timeout
    shares = [concurrency // procs + (p < concurrency % procs) for p in range(procs)]
    children = [ctx.Process(target=_client_main, daemon=True,
                            args=(url, [str(p) for p in paths], list(range(p, count, procs)), shares[p], wait_s,
                                  [i for i in range(p, count, procs) if i < keep], str(keep_dir) if keep_dir else None,
                                  deadline, http, barrier, results))
                for p in range(procs)]
    for ch in children:
        ch.start()
    got: list[dict[str, Any]] = []
    try:
        barrier.wait(timeout=120)
        for _ in children:
            got.append(results.get(timeout=max(5.0, deadline - time.time() + 45)))
    except Exception as exc:  # a client process died or hung (queue.Empty, BrokenBarrierError)
        print(f"[load] client processes: {type(exc).__name__} {exc}; {len(got)} of {procs} reported", flush=True)
    for ch in children:
        ch.join(5)
        if ch.is_alive():
            ch.kill()
    records = [r for g in got for r in g["records"]]
    done = [r for r in records if r["status"] == "done"]
    out: dict[str, Any] = {"requests": count, "concurrency": concurrency, "client_procs": procs, "answered": len(records),
                           "done": len(done), "failed": len(records) - len(done), "not_sent": count - len(records),
                           "failures": [r for r in records if r["status"] != "done"][:10],
                           "http_posts": sum(g["posts"] for g in got), "http_gets": sum(g["gets"] for g in got),
                           "http_429": sum(g["429"] for g in got),
                           "client_cpu_share": [g["cpu_s"] / g["wall_s"] if g["wall_s"] > 0 else 0.0 for g in got]}
    if done:
        t0, t1 = min(r["t_post"] for r in records), max(r["t_done"] for r in done)
        span = t1 - t0
        out.update(span_s=span, proofs_per_s=len(done) / span if span > 0 else 0.0,
                   http_requests_per_s=(out["http_posts"] + out["http_gets"]) / span if span > 0 else 0.0,
                   latency_s=percentiles([r["t_done"] - r["t_post"] for r in done]),
                   accept_s=percentiles([r["t_accepted"] - r["t_post"] for r in done]))
    return out


def idle(url: str, witness: Path, reps: int, timeout: float, http: str = "raw") -> dict[str, Any]:
    """``reps`` requests one after the other (POST, then GET ?wait=30 until finished) on one
    connection (``http``: a :class:`RawClient`, or an httpx.AsyncClient): seconds each, and of
    those the POST's (until its 202: the witness stored and journaled)."""
    import httpx

    body = witness.read_bytes()
    seconds: list[float] = []
    posts: list[float] = []
    failures: list[str] = []
    deadline = time.monotonic() + timeout

    async def run() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as shared:
            c = RawClient(url, 60) if http == "raw" else shared
            try:
                for _ in range(reps):
                    if time.monotonic() > deadline:
                        failures.append("time limit")
                        return
                    t0 = time.perf_counter()
                    try:
                        r = await c.post(f"/v1/keys/{KEY_NAME}/proofs", content=body, headers=WTNS)
                        if r.status_code not in (200, 202):
                            failures.append(f"POST {r.status_code}: {r.text[:200]}")
                            continue
                        rid = r.json()["id"]
                        posted = time.perf_counter() - t0
                        while True:
                            got = (await c.get(f"/v1/proofs/{rid}", params={"wait": 30})).json()
                            if got["status"] in ("done", "failed") or time.monotonic() > deadline:
                                break
                    except (httpx.HTTPError, OSError, EOFError, asyncio.TimeoutError, ValueError, KeyError) as exc:
                        failures.append(f"{type(exc).__name__}: {exc}"[:300])
                        continue
                    if got["status"] != "done":
                        failures.append(f"{got['status']}: {got.get('reason', '')}"[:300])
                        continue
                    seconds.append(time.perf_counter() - t0)
                    posts.append(posted)
            finally:
                if isinstance(c, RawClient):
                    await c.close()

    asyncio.run(run())
    out: dict[str, Any] = {"reps": reps, "done": len(seconds), "failures": failures, "seconds": seconds, "post_seconds": posts}
    if seconds:
        out.update(median_s=statistics.median(seconds), min_s=min(seconds), post_median_s=statistics.median(posts))
    return out


def drain(url: str, timeout: float) -> float:
    """Seconds until the service has no request queued or being proved (GET /v1/keys's
    queue_depth), then one more; at most ``timeout``."""
    import httpx

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if all(k["queue_depth"] == 0 for k in httpx.get(url + "/v1/keys", timeout=10).json()["keys"]):
                break
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    time.sleep(1.0)
    return time.monotonic() - t0


def service_phase(args: argparse.Namespace, witnesses: list[Path], work: Path, logs: Path, left: Any,
                  result: dict[str, Any], save: Any) -> None:
    """Start the service, warm it up, load it, then time idle requests; results into ``result``."""
    svc = Service(args, work / "serve-state", logs)
    result["service"] = {"command": svc.cmd[1:]}
    try:
        try:
            up = svc.wait_healthy(min(args.start_timeout, left()))
        except RuntimeError as exc:
            result["service"]["error"] = str(exc).splitlines()[0]
            print(f"[serve] {exc}", flush=True)
            return
        result["service"]["start_s"] = up
        print(f"[serve] /healthz after {up:.1f} s", flush=True)
        t0 = time.perf_counter()
        first = idle(svc.url, witnesses[0], 1, min(120.0, left()), args.http)
        warm = load(svc.url, witnesses, args.warmup, min(args.clients, args.warmup) * args.depth, args.client_procs,
                    args.wait, min(120.0, left()), http=args.http) if args.warmup else {"done": 0, "failed": 0}
        result["warmup"] = {"first_s": first.get("median_s"), "requests": args.warmup, "done": warm["done"],
                            "failed": warm["failed"], "seconds": time.perf_counter() - t0}
        print(f"[warm-up] first request {first.get('median_s', float('nan')):.3f} s, then {warm['done']} of {args.warmup} "
              f"at once; {time.perf_counter() - t0:.1f} s", flush=True)
        save()

        keep_dir = None
        if args.keep and args.out:
            keep_dir = args.out / "proofs"
            keep_dir.mkdir(parents=True, exist_ok=True)
            import httpx

            vk = httpx.get(f"{svc.url}/v1/keys/{KEY_NAME}/verification_key", timeout=30).json()
            (keep_dir / "verification_key.json").write_text(json.dumps(vk))
        print(f"[load] {args.proofs} requests, {args.clients} clients x {args.depth} outstanding over "
              f"{min(args.client_procs, args.clients * args.depth)} client processes (limit {min(args.load_timeout, left()):.0f} s)",
              flush=True)
        cpu0, wall0 = service_cpu(svc), time.perf_counter()
        with GpuBusy() as busy:
            res = load(svc.url, witnesses, args.proofs, args.clients * args.depth, args.client_procs, args.wait,
                       min(args.load_timeout, left()), args.keep if keep_dir else 0, keep_dir, args.http)
        res["gpu_busy_percent"] = busy.percent
        cpu, wall = service_cpu(svc) - cpu0, time.perf_counter() - wall0
        res["service_cpu_s"], res["service_cpu_share"] = cpu, cpu / wall if wall > 0 else 0.0
        res["service_cpu_ms_per_request"] = 1e3 * cpu / max(1, res["done"] + res["failed"])
        res["clients"], res["depth"] = args.clients, args.depth
        if keep_dir is not None:
            res["kept"] = sorted(p.name for p in keep_dir.glob("*.proof.json"))
            res["kept_dir"] = str(keep_dir)
        result["load"] = res
        busy_clients = [s for s in res["client_cpu_share"] if s > CLIENT_BUSY]
        print(f"[load] done {res['done']}, failed {res['failed']}, not sent {res['not_sent']}, 429s {res['http_429']}; "
              f"{res.get('proofs_per_s', 0.0):.2f} proofs/s over {res.get('span_s', 0.0):.2f} s; latency {ms(res.get('latency_s', {}))}; "
              f"{res.get('http_requests_per_s', 0.0):.0f} HTTP requests/s, client CPU "
              f"{', '.join(f'{100 * s:.0f}%' for s in res['client_cpu_share'])}"
              + (" (BUSY: the clients may limit the rate; raise --client-procs)" if busy_clients else ""), flush=True)
        print(f"[load] service process (HTTP, journal, dispatcher; its workers apart): {res['service_cpu_ms_per_request']:.2f} ms "
              f"of CPU a request, {100 * res['service_cpu_share']:.0f}% of a core over the load", flush=True)
        for f in res["failures"][:3]:
            print(f"[load] FAILED request {f['i']}: {f['status']}: {f.get('reason', '')}", flush=True)
        save()

        result["idle_wait_s"] = drain(svc.url, min(60.0, left()))  # requests a cut-short load left: idle once they are done
        res = idle(svc.url, witnesses[0], args.reps, min(args.reps * 35.0, left()), args.http)
        result["idle"] = res
        print(f"[idle] {res['done']} of {args.reps} single requests: median {1e3 * res.get('median_s', float('nan')):.1f} ms, "
              f"min {1e3 * res.get('min_s', float('nan')):.1f} ms", flush=True)
        save()
    finally:
        svc.stop()


# --- 3. in process ---------------------------------------------------------------------------------


def inprocess_child(key: str, witness: str, backend: str, reps: int, out: str) -> None:
    """The in-process latency (run in a fresh process): ``reps`` warm proofs of ``witness``, each
    proved, checked (when distprove.verify is on) and written; prints one JSON line."""
    from distprove import config
    from distprove.backends.select import get_backend
    from distprove.keystore import open_key
    from distprove.prover import prove
    from distprove.verifier import verify

    be = get_backend(backend)
    k = open_key(key, device=backend)
    vk = k.vk_json()
    check = config.settings().verify
    t0 = time.perf_counter()
    for _ in range(2):  # kernels loaded, key resident
        prove(k, witness, be)
    warm = time.perf_counter() - t0
    prove_s, write_s, total_s = [], [], []
    for i in range(reps):
        t0 = time.perf_counter()
        proof = prove(k, witness, be)
        t1 = time.perf_counter()
        if check and not verify(vk, proof.public_json(), proof.to_json()):
            raise SystemExit("in-process proof does not verify")
        t2 = time.perf_counter()
        proof.write(Path(out) / f"p{i}.proof.json", Path(out) / f"p{i}.public.json")
        t3 = time.perf_counter()
        prove_s.append(t1 - t0)
        write_s.append(t3 - t2)
        total_s.append(t3 - t0)
    print(json.dumps({"backend": be.name, "checked": check, "warmup_s": warm, "prove_s": prove_s, "write_s": write_s,
                      "total_s": total_s}))


def inprocess_phase(args: argparse.Namespace, witness: Path, work: Path, logs: Path, timeout: float) -> dict[str, Any]:
    out = work / "inprocess-proofs"
    out.mkdir(exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--inprocess-child", json.dumps(
        [str(args.key), str(witness), args.backend, args.reps, str(out)])]
    t0 = time.perf_counter()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=max(5.0, timeout), cwd=ROOT,
                             env=service_env(args, serve=False))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    (logs / "inprocess.log").write_text(run.stdout + run.stderr)
    try:
        got = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": f"exit status {run.returncode}: {(run.stderr.strip().splitlines() or [''])[-1][:300]}"}
    got.update(process_s=time.perf_counter() - t0, median_s=statistics.median(got["total_s"]), min_s=min(got["total_s"]),
               prove_median_s=statistics.median(got["prove_s"]), write_median_s=statistics.median(got["write_s"]))
    return got


# --- the run ---------------------------------------------------------------------------------------


def notes(args: argparse.Namespace, settings: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """What in the settings holds the load back, and what the numbers include."""
    eff = settings["effective"]
    outstanding = args.clients * args.depth
    out = []
    if eff["max_queue"] < outstanding:
        out.append(f"max-queue {eff['max_queue']} < {outstanding} outstanding requests: the clients get 429s by design")
    if outstanding <= eff["group_cap"]:
        out.append(f"{outstanding} outstanding requests (clients x depth) <= group-cap {eff['group_cap']}: a closed loop of "
                   f"clients never fills a group, so its groups are what arrives while the previous one is proved, and "
                   f"the rate is bound by about {outstanding} / (a group's proving time + the round trip) proofs/s "
                   f"(raise -C or --depth)")
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--inprocess-child":
        inprocess_child(*json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--key", type=Path, required=True, help="key store or .zkey")
    ap.add_argument("--witnesses", type=Path, required=True, help="folder of the key's *.wtns (used in turn)")
    ap.add_argument("--backend", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--workers", type=int, default=1, help="workers of the batch's and the service's local cluster")
    ap.add_argument("--workers-per-gpu", type=int, default=None,
                    help="distprove.cluster.workers-per-gpu for both (None: distprove's, 2 below 2^14 domain points)")
    ap.add_argument("-N", "--proofs", type=int, default=4096, help="witnesses proved by the batch and posted under load")
    ap.add_argument("-C", "--clients", type=int, default=64, help="concurrent clients under load")
    ap.add_argument("--depth", type=int, default=1, help="requests each client keeps outstanding")
    ap.add_argument("--client-procs", type=int, default=4, help="processes the clients are spread over")
    ap.add_argument("--http", default="raw", choices=("raw", "httpx"),
                    help="the load's HTTP client: a minimal asyncio HTTP/1.1 client, one keep-alive connection a "
                         "client (about a tenth of httpx's CPU a request), or one shared httpx.AsyncClient a process")
    ap.add_argument("--warmup", type=int, default=64, help="warm-up requests at once (after a single one)")
    ap.add_argument("-R", "--reps", type=int, default=10, help="single idle requests, and in-process proofs")
    ap.add_argument("--wait", type=float, default=30.0, help="GET ?wait= seconds of the long polls")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                    help="a distprove.serve setting for the service (e.g. gather-window=5ms); repeatable")
    ap.add_argument("--batch-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument of `distprove batch` (e.g. --batch-arg=--no-verify); repeatable")
    ap.add_argument("--keep", type=int, default=8, help="results under load kept as proof.json/public.json in --out/proofs (with --out)")
    ap.add_argument("--out", type=Path, default=None, help="folder for logs and kept proofs (None: logs in a temporary folder, removed, and nothing kept)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here (rewritten after each phase)")
    ap.add_argument("--skip", default="", help="phases to leave out, comma-separated: batch, serve, inprocess")
    ap.add_argument("--time-limit", type=float, default=540.0, help="seconds for the whole run; phases are cut to fit")
    ap.add_argument("--batch-timeout", type=float, default=200.0, help="seconds for the batch process")
    ap.add_argument("--start-timeout", type=float, default=180.0, help="seconds for the service to answer /healthz")
    ap.add_argument("--load-timeout", type=float, default=200.0, help="seconds for the load's requests")
    ap.add_argument("--inprocess-timeout", type=float, default=120.0, help="seconds for the in-process latency process")
    args = ap.parse_args()
    for name in ("proofs", "clients", "depth", "client_procs", "reps", "workers"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    args.settings = {}
    for s in args.sets:
        name, sep, value = s.partition("=")
        if not sep or not name:
            ap.error(f"--set {s}: expected NAME=VALUE")
        args.settings[name.strip()] = value.strip()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - {"batch", "serve", "inprocess"}:
        ap.error(f"--skip: unknown phases {sorted(skip - {'batch', 'serve', 'inprocess'})}")
    witnesses = sorted(args.witnesses.glob("*.wtns"))
    if not witnesses:
        ap.error(f"{args.witnesses}: no *.wtns files")
    if not args.key.exists():
        ap.error(f"{args.key}: no such key")
    args.key = args.key.resolve()
    witnesses = [w.resolve() for w in witnesses]

    start = time.monotonic()
    left = lambda: max(1.0, args.time_limit - (time.monotonic() - start))  # noqa: E731
    settings = serve_settings(args.settings)
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
        "host": {"name": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(), "gpus": gpu_names(),
                 "versions": versions()},
        "key": str(args.key), "witnesses": [str(w) for w in witnesses], "backend": args.backend, "workers": args.workers,
        "workers_per_gpu": args.workers_per_gpu, "proofs": args.proofs, "clients": args.clients, "depth": args.depth,
        "client_procs": args.client_procs, "reps": args.reps, "serve_settings": settings,
    }
    result["notes"] = notes(args, settings, result)
    eff = settings["effective"]
    print(f"bench_serve: {args.key.name} ({len(witnesses)} witnesses), backend {args.backend}, {args.workers} worker(s), "
          f"N {args.proofs}, C {args.clients} x depth {args.depth}, R {args.reps}; commit {result['commit'][:12]}", flush=True)
    print("service settings (distprove.serve): " + ", ".join(f"{k} {v}" for k, v in eff.items())
          + (f"; set here: {args.settings}" if args.settings else ""), flush=True)

    def save() -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.json.with_name(args.json.name + ".part")
            tmp.write_text(json.dumps(result, indent=1, default=str))
            os.replace(tmp, args.json)

    save()
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        work = Path(tmp)
        if args.out is None:
            logs = work / "logs"
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            logs = args.out.resolve()
            args.out = logs
        logs.mkdir(parents=True, exist_ok=True)
        phases = {}
        if "batch" not in skip:
            t0 = time.perf_counter()
            result["batch"] = batch_phase(args, witnesses, work, logs, min(args.batch_timeout, left()))
            phases["batch"] = time.perf_counter() - t0
            shutil.rmtree(work / "batch-witnesses", ignore_errors=True)
            save()
        if "serve" not in skip:
            t0 = time.perf_counter()
            service_phase(args, witnesses, work, logs, left, result, save)
            phases["serve"] = time.perf_counter() - t0
            save()
        if "inprocess" not in skip:
            t0 = time.perf_counter()
            print(f"[in-process] {args.reps} warm proofs of {witnesses[0].name} (limit {min(args.inprocess_timeout, left()):.0f} s)",
                  flush=True)
            result["inprocess"] = inprocess_phase(args, witnesses[0], work, logs, min(args.inprocess_timeout, left()))
            phases["inprocess"] = time.perf_counter() - t0
            ip = result["inprocess"]
            if "error" in ip:
                print(f"[in-process] {ip['error']}", flush=True)
            else:
                print(f"[in-process] median {1e3 * ip['median_s']:.1f} ms (prove {1e3 * ip['prove_median_s']:.1f} ms"
                      f"{', check' if ip['checked'] else ''}, write), min {1e3 * ip['min_s']:.1f} ms", flush=True)
        result["phase_s"] = phases
        result["total_s"] = time.monotonic() - start

        summary = summarize(args, result)
        result["summary"] = summary
        save()
    print("\n== bench_serve summary ==")
    for line in summary["lines"]:
        print(line)
    if args.json:
        print(f"results: {args.json}")


def summarize(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers and their lines."""
    lines, s = [], {}
    b, ld, idl, ip = result.get("batch", {}), result.get("load", {}), result.get("idle", {}), result.get("inprocess", {})
    if b:
        s["batch_proofs_per_s"] = b.get("proofs_per_s")
        lines.append(f"batch ({b.get('source', '?')}): {b.get('proofs_per_s', 0.0):.2f} proofs/s"
                     + (f", steady {b['steady_proofs_per_s']:.2f}" if "steady_proofs_per_s" in b else "")
                     + f"; proved {b.get('proved', '?')}, failed {b.get('failed', '?')}"
                     + (f"; ERROR {b['error']}" if "error" in b else ""))
    if "error" in result.get("service", {}):
        lines.append(f"service: ERROR {result['service']['error']}")
    if ld:
        s.update(service_proofs_per_s=ld.get("proofs_per_s"), failures=ld["failed"])
        ratio = ""
        if b.get("proofs_per_s") and ld.get("proofs_per_s"):
            s["ratio_to_batch"] = ld["proofs_per_s"] / b["proofs_per_s"]
            ratio = f" = {s['ratio_to_batch']:.2f} x batch"
            if b.get("steady_proofs_per_s"):
                s["ratio_to_batch_steady"] = ld["proofs_per_s"] / b["steady_proofs_per_s"]
                ratio += f" ({s['ratio_to_batch_steady']:.2f} x its steady rate)"
        lines.append(f"service under load ({ld['clients']} clients x {ld['depth']}): {ld.get('proofs_per_s', 0.0):.2f} proofs/s{ratio}; "
                     f"{ld['done']} done, {ld['failed']} FAILED" + ("" if ld["failed"] == 0 else " (must be 0)")
                     + f", {ld['http_429']} 429s"
                     + (f"; CUT SHORT by the time limit: {ld['not_sent']} of {ld['requests']} not sent" if ld["not_sent"] else ""))
        lines.append(f"  latency POST -> done: {ms({k: v for k, v in ld.get('latency_s', {}).items() if k != 'mean'})}")
        if "service_cpu_ms_per_request" in ld:
            lines.append(f"  service process: {ld['service_cpu_ms_per_request']:.2f} ms of CPU a request, "
                         f"{100 * ld['service_cpu_share']:.0f}% of a core" + (" (BUSY: one process, one GIL: it may limit this rate)"
                                                                             if ld["service_cpu_share"] > CLIENT_BUSY else ""))
        if any(x > CLIENT_BUSY for x in ld["client_cpu_share"]):
            lines.append(f"  client processes busy ({', '.join(f'{100 * x:.0f}%' for x in ld['client_cpu_share'])}): "
                         f"the clients may have limited this rate")
        if ld.get("kept"):
            lines.append(f"  kept {len(ld['kept'])} proofs in {ld['kept_dir']} (with verification_key.json)")
    if idl:
        s["idle_median_ms"] = 1e3 * idl["median_s"] if "median_s" in idl else None
        lines.append(f"idle service: median {1e3 * idl.get('median_s', float('nan')):.1f} ms (its POST {1e3 * idl.get('post_median_s', float('nan')):.1f}), "
                     f"min {1e3 * idl.get('min_s', float('nan')):.1f} ms "
                     f"({idl['done']} of {idl['reps']})" + (f"; failures {idl['failures'][:2]}" if idl["failures"] else ""))
    if ip:
        if "error" in ip:
            lines.append(f"in-process: ERROR {ip['error']}")
        else:
            s["inprocess_median_ms"] = 1e3 * ip["median_s"]
            lines.append(f"in-process (distprove.prove{' + check' if ip['checked'] else ''} + write): median {1e3 * ip['median_s']:.1f} ms, "
                         f"prove alone {1e3 * ip['prove_median_s']:.1f} ms, write alone {1e3 * ip['write_median_s']:.1f} ms")
            if "median_s" in idl:
                s["idle_overhead_ms"] = 1e3 * (idl["median_s"] - ip["median_s"])
                lines.append(f"idle service - in-process: {s['idle_overhead_ms']:+.1f} ms (goal: within +10 ms at 2^16)")
    lines += [f"note: {n}" for n in result.get("notes", [])]
    lines.append(f"total {result.get('total_s', 0.0):.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in result.get("phase_s", {}).items()) + ")")
    s["lines"] = lines
    return s


if __name__ == "__main__":
    main()
