"""``distprove serve``'s HTTP API in process (Starlette's test client), without a cluster: a
fake one that never finishes a task takes the first request (proving) and leaves the rest queued
(one task in flight, a gathering window that never closes), so these tests see exactly what the routes, the journal and the validation do: 401, 404, 413, 415,
400 for a few hundred malformed bodies (one line each, the service still answering), 429 with
Retry-After, idempotency, and a restart that queues the journal's unfinished requests again."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from distprove.cluster.tasks import KeyInfo
from distprove.errors import FormatError
from distprove.service.app import build_app
from distprove.service.grouping import ServedKey
from distprove.service.journal import DONE
from distprove.service.run import is_local, parse_keys, read_token
from distprove.service.service import ProvingService, ServeSettings

TOKEN = "s3cret-token-0123456789"


class NoCluster:
    """What the service asks of a Dask client before it submits anything."""

    def nthreads(self) -> dict[str, int]:
        return {"tcp://127.0.0.1:1": 1}

    def submit(self, fn, *args, **kwargs):
        return FakeFuture()  # never finished


def _key(name: str, folder: Path, n_vars: int, gen: str) -> ServedKey:
    info = KeyInfo(str(folder), f"hash-{name}", n_vars, 2, 8, {}, "cpu", False, vk={"protocol": "groth16", "key": name})
    return ServedKey(name, str(folder), info, gen, "" if gen else "no generator")


def _service(tmp: Path, data_dir: Path, max_queue: int = 50, max_body: int = 64 * 1024) -> ProvingService:
    settings = ServeSettings(gather_window=3600.0, group_cap=10_000, groups_in_flight=1, max_queue=max_queue, retry_after=7,
                             max_body_bytes=max_body, retention=3600.0, max_wait=1.0, verify=True)
    keys = {
        "mini": _key("mini", data_dir / "mini", 6, str(data_dir / "mini" / "mini.wasm")),
        "chain": _key("chain", data_dir / "mul_chain_1k", 1023, str(data_dir / "mul_chain_1k" / "circuit.wasm")),
    }
    return ProvingService(NoCluster(), keys, tmp / "state", settings)


@pytest.fixture
def service(tmp_path: Path, data_dir: Path):
    svc = _service(tmp_path, data_dir)
    svc.start()
    yield svc
    svc.stop()


@pytest.fixture
def client(service: ProvingService):
    with TestClient(build_app(service, TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def _one_line_error(r) -> str:
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    msg = r.json()["error"]
    assert msg and "\n" not in msg
    return msg


def test_wtns_and_inputs_accepted_and_journaled(client: TestClient, service: ProvingService, data_dir: Path) -> None:
    wtns = (data_dir / "mini" / "witness.wtns").read_bytes()
    r = client.post("/v1/keys/mini/proofs", content=wtns, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 202, r.text
    rid = r.json()["id"]
    assert r.headers["location"] == f"/v1/proofs/{rid}"
    assert Path(service.state.witness(rid)).read_bytes() == wtns  # stored, byte for byte, before 202
    r2 = client.post("/v1/keys/mini/proofs", content=(data_dir / "mini" / "input.json").read_bytes(),
                     headers={"Content-Type": "application/json"})
    assert r2.status_code == 202, r2.text
    rid2 = r2.json()["id"]
    # the witness computed from the inputs is the fixture's (snarkjs's) witness, byte for byte
    assert Path(service.state.witness(rid2)).read_bytes() == wtns
    # the first went to the idle worker at once; the second waits for the one task in flight
    _until(lambda: client.get(f"/v1/proofs/{rid}").json()["status"] == "proving")
    assert client.get(f"/v1/proofs/{rid2}").json() == {"id": rid2, "key": "mini", "status": "queued"}
    assert service.dispatcher.depth("mini") == 2
    assert client.get(f"/v1/proofs/{rid2}?wait=0.2").json()["status"] == "queued"  # waits, then answers


def test_auth(service: ProvingService, data_dir: Path) -> None:
    app = build_app(service, TOKEN)
    with TestClient(app) as c:
        assert c.get("/healthz").status_code == 200  # open
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):
            for method, path in (("GET", "/v1/keys"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                                 ("POST", "/v1/keys/mini/proofs"), ("GET", "/v1/proofs/x")):
                r = c.request(method, path, headers=headers, content=b"x")
                assert r.status_code == 401, (method, path, headers)
                assert r.headers["www-authenticate"] == "Bearer"
                _one_line_error(r)
        ok = c.get("/v1/keys", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and [k["name"] for k in ok.json()["keys"]] == ["mini", "chain"]
    assert service.dispatcher.depth() == 0  # nothing got in


def test_not_found_and_limits(client: TestClient, service: ProvingService, data_dir: Path) -> None:
    assert "no key named" in _one_line_error(client.post("/v1/keys/nope/proofs", content=b"x"))
    assert client.post("/v1/keys/nope/proofs", content=b"x").status_code == 404
    assert client.get("/v1/proofs/0123abcd").status_code == 404
    assert client.get("/v1/keys/nope/verification_key").status_code == 404
    assert client.get("/v1/keys/mini/verification_key").json() == {"protocol": "groth16", "key": "mini"}
    assert client.get("/nothing/here").status_code == 404
    big = b"\0" * (64 * 1024 + 1)
    r = client.post("/v1/keys/mini/proofs", content=big, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 413 and "limit" in _one_line_error(r)

    def chunks():  # no Content-Length: the limit is counted as the body arrives
        for _ in range(20):
            yield b"\0" * 4096

    r = client.post("/v1/keys/mini/proofs", content=chunks(), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 413
    r = client.post("/v1/keys/mini/proofs", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert client.get("/v1/proofs/x?wait=soon").status_code == 400
    assert service.dispatcher.depth() == 0
    assert os.listdir(service.state.witnesses) == []  # nothing refused is kept


def _malformed(data_dir: Path, rng: random.Random) -> list[tuple[str, bytes, str]]:
    """(what, body, content type): a few hundred bodies that must each be refused."""
    wtns = (data_dir / "mini" / "witness.wtns").read_bytes()
    chain = (data_dir / "mul_chain_1k" / "witnesses").glob("*.wtns")
    other = next(chain).read_bytes()
    inputs = json.loads((data_dir / "mini" / "input.json").read_text())
    bodies = []
    for n in range(len(wtns)):  # every truncation of a good witness
        bodies.append((f"truncated to {n}", wtns[:n], "application/octet-stream"))
    for i in range(4):  # wrong magic
        b = bytearray(wtns)
        b[i] ^= 0xFF
        bodies.append((f"magic byte {i}", bytes(b), "application/octet-stream"))
    bodies.append(("other circuit's witness", other, "application/octet-stream"))
    bodies.append(("trailing garbage", wtns + b"\0" * 32, "application/octet-stream"))
    for bad in sorted((data_dir / "bad").glob("*.wtns")):
        if bad.name != "unsatisfied.wtns":  # well formed: it is accepted, and its proof fails the check
            bodies.append((bad.name, bad.read_bytes(), "application/octet-stream"))
    for _ in range(40):
        bodies.append(("random bytes", rng.randbytes(rng.randrange(1, 400)), "application/octet-stream"))
    text = json.dumps(inputs)
    for n in range(0, len(text) - 1, max(1, len(text) // 30)):  # invalid JSON
        bodies.append((f"json cut at {n}", text[:n].encode(), "application/json"))
    for junk in (b"\xff\xfe", b"[1, 2]", b"3", b'"a"', b"null", b"{,}"):
        bodies.append((f"json {junk!r}", junk, "application/json"))
    for name in inputs:  # wrong signal names, missing signals, bad values
        renamed = dict(inputs)
        renamed[name + "x"] = renamed.pop(name)
        bodies.append((f"renamed {name}", json.dumps(renamed).encode(), "application/json"))
        missing = {k: v for k, v in inputs.items() if k != name}
        bodies.append((f"missing {name}", json.dumps(missing).encode(), "application/json"))
        for v in ("x", [1, 2, 3], {"a": 1}, "0x", 1.5):
            bodies.append((f"{name}={v!r}", json.dumps({**inputs, name: v}).encode(), "application/json"))
    return bodies


def test_malformed_bodies_each_one_line(client: TestClient, service: ProvingService, data_dir: Path) -> None:
    bodies = _malformed(data_dir, random.Random(54))
    assert len(bodies) >= 200
    for what, body, ctype in bodies:
        r = client.post("/v1/keys/mini/proofs", content=body, headers={"Content-Type": ctype})
        assert r.status_code == 400, (what, r.status_code, r.text)
        msg = _one_line_error(r)
        assert str(service.state.root) not in msg, msg  # names the body, not the service's files
    assert service.dispatcher.depth() == 0
    assert os.listdir(service.state.witnesses) == []
    good = client.post("/v1/keys/mini/proofs", content=(data_dir / "mini" / "witness.wtns").read_bytes(),
                       headers={"Content-Type": "application/octet-stream"})
    assert good.status_code == 202  # still answering


def test_queue_full_429_and_idempotency(tmp_path: Path, data_dir: Path) -> None:
    svc = _service(tmp_path, data_dir, max_queue=3)
    svc.start()
    wtns = (data_dir / "mini" / "witness.wtns").read_bytes()
    try:
        with TestClient(build_app(svc)) as c:
            post = lambda **h: c.post("/v1/keys/mini/proofs", content=wtns,
                                      headers={"Content-Type": "application/octet-stream", **h})
            first = post(**{"Idempotency-Key": "order-1"})
            assert first.status_code == 202
            again = post(**{"Idempotency-Key": "order-1"})
            assert again.status_code == 200 and again.json() == first.json()
            assert svc.dispatcher.depth() == 1
            assert post().status_code == 202 and post().status_code == 202
            full = post()
            assert full.status_code == 429 and full.headers["retry-after"] == "7"
            _one_line_error(full)
            # a retry of an accepted request still gets its id when the queue is full
            assert post(**{"Idempotency-Key": "order-1"}).json() == first.json()
            assert b'distprove_serve_rejected_total{reason="queue-full"} 1.0' in c.get("/metrics").content
            ids = {first.json()["id"]}
    finally:
        svc.stop()
    # a restart queues every unfinished request again; one whose proof file exists is done
    rid = next(iter(ids))
    Path(svc.state.proof(rid)).write_text('{"pi_a": []}')
    Path(svc.state.public(rid)).write_text('["1"]')
    # what a crash leaves half made: a stored witness never journaled, a partial write
    orphans = [svc.state.witnesses / "0123.wtns", svc.state.witnesses / ".x.wtns.abc.tmp", svc.state.results / ".y.proof.json.d.tmp"]
    for p in orphans:
        p.write_bytes(b"partial")
    again = _service(tmp_path, data_dir, max_queue=3)
    assert again.start() == 2
    assert not any(p.exists() for p in orphans)
    assert len(os.listdir(again.state.witnesses)) == 2
    try:
        assert again.journal.get(rid).status == DONE
        assert again.result(rid) == {"id": rid, "key": "mini", "status": "done", "proof": {"pi_a": []}, "public": ["1"]}
        assert not os.path.exists(again.state.witness(rid))
        assert again.dispatcher.depth("mini") == 2
    finally:
        again.stop()


def test_retention(tmp_path: Path, data_dir: Path) -> None:
    svc = _service(tmp_path, data_dir)
    rid = svc.accept("mini", (data_dir / "mini" / "witness.wtns").read_bytes(), "application/octet-stream", None)[0]
    svc._finished([(rid, DONE, "")])
    Path(svc.state.proof(rid)).write_text("{}")
    assert svc.purge() == 0
    assert svc.purge(now=1e12) == 1
    assert svc.journal.get(rid) is None and not os.path.exists(svc.state.proof(rid))
    svc.journal.close()


def test_command_line_checks(tmp_path: Path, data_dir: Path) -> None:
    zkey = data_dir / "mini" / "mini_0001.zkey"
    assert parse_keys([str(zkey), f"c={data_dir / 'mul_chain_1k' / 'circuit_final.zkey'}"]) == {
        "mini_0001": str(zkey), "c": str(data_dir / "mul_chain_1k" / "circuit_final.zkey")}
    for bad in ([str(zkey), str(zkey)], [f"a b={zkey}"], [str(tmp_path / "none.zkey")], []):
        with pytest.raises(FormatError):
            parse_keys(bad)
    assert is_local("127.0.0.1") and is_local("::1") and is_local("localhost") and not is_local("0.0.0.0")
    with pytest.raises(FormatError, match="needs --token-file"):
        read_token(None, "0.0.0.0")
    assert read_token(None, "127.0.0.1") is None
    tok = tmp_path / "tok"
    tok.write_text("short\n")
    with pytest.raises(FormatError, match="at least 16"):
        read_token(str(tok), "0.0.0.0")
    tok.write_text(TOKEN + "\n")
    assert read_token(str(tok), "0.0.0.0") == TOKEN


def test_openapi_names_every_route(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {"/v1/keys/{name}/proofs", "/v1/proofs/{id}", "/v1/keys",
                                 "/v1/keys/{name}/verification_key", "/healthz", "/metrics"}


def test_command_refuses_before_starting_a_cluster(tmp_path: Path, data_dir: Path) -> None:
    """Bad arguments end in one line and exit status 1, before any cluster starts."""
    from click.testing import CliRunner

    from distprove.cli import main

    zkey = str(data_dir / "mini" / "mini_0001.zkey")
    for args, said in (
        ([zkey, "--host", "0.0.0.0"], "needs --token-file"),
        ([str(tmp_path / "missing.zkey")], "no such key store or .zkey"),
        ([zkey, zkey], "two keys named 'mini_0001'"),
    ):
        res = CliRunner().invoke(main, ["serve", *args])
        assert res.exit_code == 1, res.output
        assert res.output.startswith("error: ") and said in res.output and res.output.count("\n") == 1, res.output


class FakeFuture:
    """A Dask future the test finishes by hand."""

    def __init__(self) -> None:
        self.status, self._result, self._error = "pending", None, None
        self._callbacks: list = []

    def finish(self, result=None, error: BaseException | None = None) -> None:
        self._result, self._error = result, error
        self.status = "error" if error is not None else "finished"
        for cb in self._callbacks:
            cb(self)

    def add_done_callback(self, cb) -> None:
        self._callbacks.append(cb)

    def done(self) -> bool:
        return self.status in ("finished", "error")

    def result(self):
        if self._error is not None:
            raise self._error
        return self._result

    def release(self) -> None:
        pass


class RecordingClient(NoCluster):
    def __init__(self) -> None:
        self.submitted: list[tuple] = []

    def submit(self, fn, *args, **kwargs):
        fut = FakeFuture()
        self.submitted.append((fn, args, kwargs, fut))
        return fut


def _until(cond, timeout: float = 5.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_gathering_window_cap_and_groups_in_flight(tmp_path: Path, data_dir: Path) -> None:
    """Requests of a key go out as one prove_group task per group: at once when group-cap are
    queued or a worker thread is idle, else when the oldest has waited gather-window; at most
    groups-in-flight tasks; each outcome ends its request, a task that raises ends its whole group."""
    import time

    from distprove.cluster.tasks import Outcome, Status
    from distprove.cluster.work import prove_group
    from distprove.service.grouping import Dispatcher
    from distprove.service.journal import StateDir

    client, finished = RecordingClient(), []
    state = StateDir(tmp_path / "state")
    keys = {"mini": _key("mini", data_dir / "mini", 6, "")}
    d = Dispatcher(client, keys, state, finished.extend, window=0.3, cap=4, in_flight=1)
    ids = [f"r{i}" for i in range(10)]
    for rid in ids:  # queued before the dispatcher starts: one burst
        d.put(rid, "mini")
    t0 = time.monotonic()
    d.start()
    try:
        _until(lambda: len(client.submitted) == 1)
        assert time.monotonic() - t0 < 0.3  # a full group does not wait for the window
        fn, args, kwargs, fut = client.submitted[0]
        specs = args[0]
        assert fn is prove_group and args[1:] == (None, True, True, True)  # assembled, written, checked in the task
        assert [s.name for s in specs] == ids[:4] and specs[0].witness == state.witness("r0")
        assert specs[0].proof_path == state.proof("r0") and specs[0].content_hash == "hash-mini"
        assert kwargs["key"][0] == "prove-whole" and kwargs["pure"] is False
        assert d.is_proving("r0") and not d.is_proving("r4") and d.depth("mini") == 10
        time.sleep(0.1)
        assert len(client.submitted) == 1  # one task in flight at most
        fut.finish([Outcome("r0", Status.PROVED), Outcome("r1", Status.FAILED, "does not verify"),
                    Outcome("r2", Status.PROVED, "written by an earlier attempt", written_before=True)])
        _until(lambda: len(client.submitted) == 2)
        assert finished == [("r0", "done", ""), ("r1", "failed", "does not verify"), ("r2", "done", ""),
                            ("r3", "failed", "no outcome from its proof task")]
        assert [s.name for s in client.submitted[1][1][0]] == ids[4:8]
        client.submitted[1][3].finish(error=RuntimeError("worker gone\nmore"))
        _until(lambda: len(client.submitted) == 3)
        assert finished[4:] == [(rid, "failed", "RuntimeError: worker gone") for rid in ids[4:8]]
        assert [s.name for s in client.submitted[2][1][0]] == ids[8:]  # the last two
        client.submitted[2][3].finish([Outcome("r8", Status.PROVED), Outcome("r9", Status.PROVED)])
        _until(lambda: len(finished) == 10)
        assert d.depth() == 0
        t1 = time.monotonic()  # a lone request to an idle worker goes at once, alone
        d.put("r10", "mini")
        _until(lambda: len(client.submitted) == 4)
        assert time.monotonic() - t1 < 0.2 and [s.name for s in client.submitted[3][1][0]] == ["r10"]
    finally:
        d.stop()


def test_a_busy_worker_lets_requests_gather(tmp_path: Path, data_dir: Path) -> None:
    """While every worker thread has a task, a request waits for the gathering window (or a full
    group) and then goes as the next task in flight, with those that came meanwhile."""
    import time

    from distprove.service.grouping import Dispatcher
    from distprove.service.journal import StateDir

    client = RecordingClient()
    d = Dispatcher(client, {"mini": _key("mini", data_dir / "mini", 6, "")}, StateDir(tmp_path / "s"), lambda r: None,
                   window=0.3, cap=64, in_flight=2, spread=1)
    d.start()
    try:
        d.put("r0", "mini")
        _until(lambda: len(client.submitted) == 1)  # the idle worker takes it at once
        t0 = time.monotonic()
        d.put("r1", "mini")
        d.put("r2", "mini")
        _until(lambda: len(client.submitted) == 2)
        assert time.monotonic() - t0 >= 0.29
        assert [s.name for s in client.submitted[1][1][0]] == ["r1", "r2"]
    finally:
        d.stop()


def test_no_witness_or_input_values_in_logs(client: TestClient, data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Accepting, refusing and answering log nothing of a witness or an input."""
    import logging

    caplog.set_level(logging.DEBUG)
    secret = "987654321987654321"
    for body, ctype in (
        (json.dumps({"a": secret, "b": "5"}).encode(), "application/json"),
        (json.dumps({"a": secret, "nope": "5"}).encode(), "application/json"),
        (json.dumps({"a": [secret], "b": "5"}).encode(), "application/json"),
    ):
        client.post("/v1/keys/mini/proofs", content=body, headers={"Content-Type": ctype})
    assert secret not in caplog.text


def test_a_burst_is_cut_for_every_worker(tmp_path: Path, data_dir: Path) -> None:
    """Ten requests that arrive together, two worker threads, a cap of 64: two groups of five (one
    group would leave a worker idle)."""
    from distprove.service.grouping import Dispatcher
    from distprove.service.journal import StateDir

    client = RecordingClient()
    d = Dispatcher(client, {"mini": _key("mini", data_dir / "mini", 6, "")}, StateDir(tmp_path / "s"), lambda r: None,
                   window=0.05, cap=64, in_flight=4, spread=2)
    for i in range(10):
        d.put(f"r{i}", "mini")
    d.start()
    try:
        _until(lambda: len(client.submitted) == 2)
        assert [[s.name for s in sub[1][0]] for sub in client.submitted] == [[f"r{i}" for i in range(5)], [f"r{i}" for i in range(5, 10)]]
    finally:
        d.stop()


def test_journal_commits_concurrent_inserts_together(tmp_path: Path) -> None:
    """Inserts that arrive while a commit is on the disk go in the next commit together (each
    caller still returns only once its row is committed), and an idempotency key used twice in
    one group gives both callers the first insert's id."""
    import threading
    import time

    from distprove.service.journal import Journal

    j = Journal(tmp_path / "j.sqlite")
    groups: list[int] = []
    commit = j._commit

    def slow_commit(batch):  # a slow disk: 20 ms a commit
        groups.append(len(batch))
        time.sleep(0.02)
        commit(batch)

    j._commit = slow_commit
    got: dict[str, str] = {}

    def add(i: int) -> None:
        rid = f"r{i}"
        got[rid] = j.add(rid, "mini", "same" if i in (7, 8) else None)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(groups) == 40 and len(groups) < 40 and max(groups) > 1
    assert {got["r7"], got["r8"]} <= {"r7", "r8"} and got["r7"] == got["r8"]
    rows = {r.id for r in j.unfinished()}
    assert rows == {f"r{i}" for i in range(40)} - ({"r7", "r8"} - {got["r7"]})
    j.close()


def test_concurrent_posts_share_the_journals_commits(tmp_path: Path, data_dir: Path) -> None:
    """The service's accepts reach the journal concurrently, so requests posted while a commit is
    on the disk are made durable together: fewer syncs than requests (one a request, serialised,
    capped a service at one request per disk sync)."""
    import threading
    import time

    svc = _service(tmp_path, data_dir)
    wtns = (data_dir / "mini" / "witness.wtns").read_bytes()
    syncs: list[int] = []
    durable = svc._durable

    def slow_durable(ids: list[str]) -> None:  # a slow disk: 20 ms a sync
        syncs.append(len(ids))
        time.sleep(0.02)
        durable(ids)

    svc.journal._make_durable = slow_durable
    ids: list[str] = []

    def post() -> None:
        for _ in range(3):
            ids.append(svc.accept("mini", wtns, "application/octet-stream", None)[0])

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(set(ids)) == 24 and sum(syncs) == 24 and len(syncs) < 12, syncs
        assert {r.id for r in svc.journal.unfinished()} == set(ids)
    finally:
        svc.journal.close()


def test_a_witness_lost_before_its_202_is_forgotten_at_restart(tmp_path: Path, data_dir: Path) -> None:
    """Witnesses and rows become durable together before the 202; a row whose witness a power
    cut lost (missing, or cut short) was never acknowledged: the next start forgets it (an
    idempotency-keyed retry then makes a new request) and queues the intact ones."""
    svc = _service(tmp_path, data_dir)
    wtns = (data_dir / "mini" / "witness.wtns").read_bytes()
    ids = [svc.accept("mini", wtns, "application/octet-stream", key)[0] for key in ("k-missing", "k-short", "k-whole")]
    svc.journal.close()
    os.unlink(svc.state.witness(ids[0]))
    Path(svc.state.witness(ids[1])).write_bytes(wtns[: len(wtns) // 2])
    again = _service(tmp_path, data_dir)
    try:
        assert again.start() == 1
        assert again.journal.get(ids[0]) is None and again.journal.get(ids[1]) is None
        assert again.journal.get(ids[2]).status == "queued"
        assert not os.path.exists(again.state.witness(ids[1]))
        rid, new = again.accept("mini", wtns, "application/octet-stream", "k-short")
        assert new and rid != ids[1]
    finally:
        again.stop()


def test_a_group_commit_makes_its_files_durable_before_answering(tmp_path: Path) -> None:
    """With make_durable, a group's rows are committed, then its requests' files made durable (one
    call with the group's new ids), and only then does any add() return."""
    import threading
    import time

    from distprove.service.journal import Journal

    calls: list[list[str]] = []
    returned: list[str] = []

    def durable(ids: list[str]) -> None:
        time.sleep(0.02)
        assert not any(i in returned for i in ids)  # nobody answered before their files are durable
        calls.append(list(ids))

    j = Journal(tmp_path / "j.sqlite", make_durable=durable)

    def add(i: int) -> None:
        returned.append(j.add(f"r{i}", "mini", None))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(sum(calls, [])) == sorted(f"r{i}" for i in range(12)) and len(calls) < 12
    assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again outside the group's commit
    j.close()
