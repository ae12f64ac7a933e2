"""``distprove serve`` end to end: the command on a local CPU cluster, bound to 127.0.0.1.

* Load: 1,000 requests from 16 concurrent clients over two keys (tests/data/mini, 3 constraints,
  for 990 of them, mul_chain_1k for 10: on a busy 2-core machine the CPU backend's batch of 40
  mul_chain_1k witnesses ran at 0.47 proofs/s, 4.3 s of worker time each, and of 480 mini ones
  at 34 proofs/s), clients honouring 429's Retry-After, malformed bodies mixed in;
  nothing is lost, every proof verifies with distprove's verifier and a sample of each key with
  snarkjs (checking all 1,000 with snarkjs's node would take minutes).
* Crash: the service (and its local cluster) killed with SIGKILL in the middle of a load, started
  again on the same state folder: every accepted request is proved exactly once (what was done
  before the crash is the same proof after it) and can be fetched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from conftest import snarkjs_verify

from distprove.verifier import verify_many

TOKEN = "serve-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WTNS = {"Content-Type": "application/octet-stream"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A ``distprove serve`` process (in a session of its own, so its local cluster goes with it)."""

    def __init__(self, tmp: Path, data_dir: Path, state: Path, **settings: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        token = tmp / "token"
        token.write_text(TOKEN + "\n")
        env = {**os.environ, "DASK_DISTPROVE__BACKEND": "cpu",
               **{f"DASK_DISTPROVE__SERVE__{k.upper()}": v for k, v in settings.items()}}
        self.log = open(tmp / f"serve-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "distprove.cli", "serve", f"mini={data_dir / 'mini' / 'mini_0001.zkey'}",
             f"chain={data_dir / 'mul_chain_1k' / 'circuit_final.zkey'}", "--backend", "cpu", "--workers", "2",
             "--port", str(self.port), "--state-dir", str(state), "--token-file", str(token)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None, (tmp / f"serve-{self.port}.log").read_text()
            assert time.monotonic() < deadline, "the service did not start in 180 s"
            time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL the service and everything it started (its local cluster's processes)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def _send(c: httpx.Client, key: str, body: bytes) -> httpx.Response:
    """POST until the queue has room (429: wait Retry-After)."""
    while True:
        r = c.post(f"/v1/keys/{key}/proofs", content=body, headers=WTNS)
        if r.status_code != 429:
            return r
        time.sleep(float(r.headers["retry-after"]))


def _post(c: httpx.Client, key: str, body: bytes) -> str:
    """POST until accepted; the request's id."""
    r = _send(c, key, body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _results(url: str, ids: list[str], timeout: float = 600) -> dict[str, dict]:
    """Every request's final answer (waiting for each)."""
    out: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
        for rid in ids:
            while True:
                r = c.get(f"/v1/proofs/{rid}", params={"wait": 30})
                assert r.status_code == 200, r.text
                if r.json()["status"] in ("done", "failed"):
                    out[rid] = r.json()
                    break
                assert time.monotonic() < deadline, f"{rid} still {r.json()['status']}"
    return out


@pytest.fixture(scope="module")
def witnesses(data_dir: Path) -> dict[str, list[bytes]]:
    return {
        "mini": [(data_dir / "mini" / "witness.wtns").read_bytes()],
        "chain": [p.read_bytes() for p in sorted((data_dir / "mul_chain_1k" / "witnesses").glob("*.wtns"))],
    }


@pytest.fixture(scope="module")
def vks(data_dir: Path) -> dict[str, str]:
    return {"mini": str(data_dir / "mini" / "verification_key.json"),
            "chain": str(data_dir / "mul_chain_1k" / "verification_key.json")}


def _check(results: dict[str, dict], keys: dict[str, str], vks: dict[str, str], tmp: Path, snarkjs: str | None, sample: int) -> None:
    """Every result done and verified by distprove's verifier (``verify_many``: what ``verify``
    answers for each, with one final exponentiation for all); ``sample`` of them by snarkjs too."""
    assert all(res["status"] == "done" for res in results.values()), [r for r in results.values() if r["status"] != "done"][:3]
    parsed = {k: json.loads(Path(p).read_text()) for k, p in vks.items()}
    ordered = sorted(results)
    assert all(verify_many([(parsed[keys[rid]], results[rid]["public"], results[rid]["proof"]) for rid in ordered]))
    if snarkjs is not None:
        for rid in [r for r in ordered if keys[r] == "mini"][: sample // 2] + [r for r in ordered if keys[r] == "chain"][: sample // 2]:
            proof, public = tmp / f"{rid}.proof.json", tmp / f"{rid}.public.json"
            proof.write_text(json.dumps(results[rid]["proof"]))
            public.write_text(json.dumps(results[rid]["public"]))
            assert snarkjs_verify(vks[keys[rid]], public, proof, snarkjs), rid


@pytest.fixture
def snarkjs_or_none() -> str | None:
    from conftest import find_snarkjs

    return find_snarkjs()


def test_load_1000_requests_16_clients(tmp_path: Path, data_dir: Path, witnesses, vks, snarkjs_or_none) -> None:
    svc = Service(tmp_path, data_dir, tmp_path / "state", max_queue="200", gather_window="20ms", group_cap="64")
    plan = [("chain" if i % 100 == 0 else "mini", i) for i in range(1000)]  # 10 of mul_chain_1k, 990 of mini
    keys: dict[str, str] = {}
    refused: list[str] = []
    try:
        def client(k: int) -> None:
            with httpx.Client(base_url=svc.url, headers=AUTH, timeout=60) as c:
                for key, i in plan[k::16]:
                    rid = _post(c, key, witnesses[key][i % len(witnesses[key])])
                    keys[rid] = key
                    if i % 10 == 0:  # malformed bodies mixed in: each one line, nothing else disturbed
                        r = _send(c, key, witnesses[key][0][: i % 97])
                        assert r.status_code == 400 and "\n" not in r.json()["error"], r.text
                        refused.append(r.json()["error"])
                    if i % 100 == 0:
                        r = httpx.post(f"{svc.url}/v1/keys/{key}/proofs", content=b"x", headers=WTNS, timeout=60)
                        assert r.status_code == 401

        t0 = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(client, range(16)))
        results = _results(svc.url, list(keys))
        seconds = time.monotonic() - t0
        assert len(keys) == 1000 and len(results) == 1000 and len(refused) == 100
        # a well-formed witness that does not satisfy its circuit: accepted, its proof fails the check
        with httpx.Client(base_url=svc.url, headers=AUTH, timeout=60) as c:
            bad = _post(c, "mini", (data_dir / "bad" / "unsatisfied.wtns").read_bytes())
        failed = _results(svc.url, [bad])[bad]
        assert failed["status"] == "failed" and "does not verify" in failed["reason"] and "proof" not in failed
        metrics = httpx.get(svc.url + "/metrics", headers=AUTH).text
        assert 'distprove_serve_proofs_total{key="mini",status="done"} 990.0' in metrics
        assert 'distprove_serve_proofs_total{key="chain",status="done"} 10.0' in metrics
        assert 'distprove_serve_proofs_total{key="mini",status="failed"} 1.0' in metrics
        print(f"1000 requests (990 mini, 10 mul_chain_1k) from 16 clients proved in {seconds:.1f} s")
    finally:
        svc.stop()
    _check(results, keys, vks, tmp_path, snarkjs_or_none, sample=4)


def test_kill_9_mid_load_then_restart(tmp_path: Path, data_dir: Path, witnesses, vks, snarkjs_or_none) -> None:
    state = tmp_path / "state"
    svc = Service(tmp_path, data_dir, state, gather_window="20ms", group_cap="16")
    keys: dict[str, str] = {}
    stop = threading.Event()

    def client(k: int) -> None:
        with httpx.Client(base_url=svc.url, headers=AUTH, timeout=30) as c:
            for i in range(10_000):
                if stop.is_set():
                    return
                key = "chain" if (i + k) % 40 == 0 else "mini"
                try:
                    rid = _post(c, key, witnesses[key][i % len(witnesses[key])])
                except httpx.TransportError:  # the service died under this request: not accepted
                    return
                keys[rid] = key

    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        running = [pool.submit(client, k) for k in range(8)]
        while len(keys) < 150:
            time.sleep(0.05)
        svc.kill()
        stop.set()
        for f in running:
            f.result()
    accepted = dict(keys)
    # the proofs written before the crash: after it they must be the same ones (not proved again)
    before = {}
    for rid in accepted:
        proof, public = Path(state / "results" / f"{rid}.proof.json"), Path(state / "results" / f"{rid}.public.json")
        if proof.exists():
            before[rid] = (json.loads(proof.read_text()), json.loads(public.read_text()))
    assert 0 < len(before) < len(accepted), (len(before), len(accepted))  # killed mid-load: some done, some not
    t1 = time.monotonic()
    again = Service(tmp_path, data_dir, state, gather_window="20ms", group_cap="16")
    t2 = time.monotonic()
    try:
        results = _results(again.url, list(accepted))
    finally:
        again.stop()
    print(f"{len(accepted)} accepted ({len(before)} proved) before the kill ({t1 - t0:.1f} s), restart {t2 - t1:.1f} s, "
          f"all done {time.monotonic() - t2:.1f} s after it")
    assert set(results) == set(accepted)
    for rid, (proof, public) in before.items():
        assert (results[rid]["proof"], results[rid]["public"]) == (proof, public)  # proved once
    _check(results, accepted, vks, tmp_path, snarkjs_or_none, sample=4)
    assert os.listdir(state / "witnesses") == []  # every accepted witness was proved and let go
