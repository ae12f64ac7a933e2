"""Cluster recipes and scheduled runs.

* A real ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1 (CPU backend):
  ``distprove batch --scheduler``, the same through ``DASK_SCHEDULER_ADDRESS``, the incremental
  mode, the workers' ``/metrics`` pages, ``distprove info``, and ``cluster/local-gpu.sh`` with
  CPU workers standing in for dask-cuda.
* The incremental state rules without a cluster.
* The recipes that cannot run here: the SLURM job script dask-jobqueue renders, the Kubernetes
  manifests, the scrontab/sbatch files and the worker image's Dockerfile.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from distributed import LocalCluster

import distprove
from distprove import config
from distprove.cluster import incremental
from distprove.errors import FormatError
from distprove.verifier import verify

from conftest import REPO_ROOT, load_script, snarkjs_verify

CLUSTER_DIR = REPO_ROOT / "cluster"
START_TIMEOUT_S = 90


# --- helpers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_env(**extra: str) -> dict[str, str]:
    """The environment for cluster processes: CPU backend, no inherited scheduler address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_DISTPROVE__", "DASK_SCHEDULER_ADDRESS"))}
    env["DASK_DISTPROVE__BACKEND"] = "cpu"
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distprove.cli", *args], capture_output=True, text=True, env=env or cpu_env(), timeout=timeout
    )


def metrics_page(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample in an exposition page (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if m and m.group(1) == name and ",".join(sorted((m.group(2) or "").split(","))) == want:
            return float(m.group(3))
    return 0.0


def check_outputs(out: Path, names: list[str], vk: dict) -> None:
    """Every named proof exists and verifies with distprove."""
    for name in names:
        proof, public = config.settings().output_paths(f"{name}.wtns", out)
        assert proof.is_file() and public.is_file(), name
        assert verify(vk, public, proof), name


class LocalDaskCluster:
    """A scheduler and worker processes started with the ``dask`` command (killed by their pids)."""

    def __init__(self, tmp: Path, n_workers: int = 2) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.worker_ports = [free_port() for _ in range(n_workers)]
        self.procs: list[subprocess.Popen] = []
        env = cpu_env()
        logs = tmp / "logs"
        logs.mkdir()
        self.dashboard_port = free_port()
        self._start(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                     "--dashboard-address", f"127.0.0.1:{self.dashboard_port}"], logs / "scheduler.log", env)
        for i, wport in enumerate(self.worker_ports):
            self._start(["dask", "worker", self.address, "--nthreads", "1", "--host", "127.0.0.1", "--name", f"w{i}",
                         "--dashboard-address", f"127.0.0.1:{wport}", "--no-nanny"], logs / f"worker{i}.log", env)
        from distributed import Client

        with Client(self.address, timeout=START_TIMEOUT_S) as c:
            c.wait_for_workers(n_workers, timeout=START_TIMEOUT_S)
            self.workers = sorted(c.scheduler_info()["workers"])

    def _start(self, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        with open(log, "wb") as f:
            self.procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env))

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDaskCluster]:
    cluster = LocalDaskCluster(tmp_path_factory.mktemp("dask-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def chain_key(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """mul_chain_1k imported into a key store (as a cluster would hold it)."""
    store = tmp_path_factory.mktemp("keys") / "mul_chain_1k.zarr"
    distprove.import_key(data_dir / "mul_chain_1k" / "circuit_final.zkey", store)
    return store


def chain_witnesses(data_dir: Path, dest: Path, names: list[str]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copy(data_dir / "mul_chain_1k" / "witnesses" / f"{n}.wtns", dest / f"{n}.wtns")
    return dest


# --- a real scheduler and workers ----------------------------------------------------------------


def test_batch_with_scheduler_option(dask_cluster: LocalDaskCluster, chain_key: Path, data_dir: Path, tmp_path: Path,
                                     snarkjs: str) -> None:
    names = ["witness_0", "witness_1", "witness_2"]
    wdir = chain_witnesses(data_dir, tmp_path / "w", names)
    out, report = tmp_path / "out", tmp_path / "report.json"
    res = run_cli("batch", str(chain_key), str(wdir), "--out", str(out), "--scheduler", dask_cluster.address,
                  "--report", str(report))
    assert res.returncode == 0, res.stderr
    rep = json.loads(report.read_text())
    assert (rep["proved"], rep["failed"], rep["workers"]) == (3, 0, 2)
    assert {r["worker"] for r in rep["results"]} <= set(dask_cluster.workers)
    vk = distprove.open_key(chain_key).vk_json()
    check_outputs(out, names, vk)
    vk_path = tmp_path / "verification_key.json"
    vk_path.write_text(json.dumps(vk))
    proof, public = config.settings().output_paths("witness_1.wtns", out)
    assert snarkjs_verify(vk_path, public, proof, snarkjs)


def test_batch_with_env_scheduler_address(dask_cluster: LocalDaskCluster, data_dir: Path, tmp_path: Path) -> None:
    wdir = tmp_path / "w"
    wdir.mkdir()
    shutil.copy(data_dir / "mini" / "witness.wtns", wdir / "mini_w.wtns")
    key = data_dir / "mini" / "mini_0001.zkey"
    before = sum(sample(metrics_page(p), "distprove_proofs_total", key=key.name) for p in dask_cluster.worker_ports)
    res = run_cli("batch", str(key), str(wdir), "--out", str(tmp_path / "out"),
                  env=cpu_env(DASK_SCHEDULER_ADDRESS=dask_cluster.address))
    assert res.returncode == 0, res.stderr
    check_outputs(tmp_path / "out", ["mini_w"], distprove.open_key(key).vk_json())
    # the proof was made on the cluster's workers, not on a local cluster of the CLI
    after = sum(sample(metrics_page(p), "distprove_proofs_total", key=key.name) for p in dask_cluster.worker_ports)
    assert after == before + 1


def test_incremental_proves_only_new_witnesses(dask_cluster: LocalDaskCluster, chain_key: Path, data_dir: Path,
                                               tmp_path: Path) -> None:
    from distributed import Client

    wdir = chain_witnesses(data_dir, tmp_path / "w", ["witness_0", "witness_1"])
    out = tmp_path / "out"
    with Client(dask_cluster.address) as client:
        first = incremental.batch(wdir, chain_key, out, client=client, backend="cpu", echo=None)
        assert (len(first.proved), len(first.skipped), len(first.failed)) == (2, 0, 0)
        stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("witness_*.json")}
        chain_witnesses(data_dir, wdir, ["witness_2"])
        assert [j.name for j in incremental.pending(wdir, chain_key, out)] == ["witness_2"]
        second = incremental.batch(wdir, chain_key, out, client=client, backend="cpu", echo=None)
    assert [r.name for r in second.proved] == ["witness_2"]
    assert sorted(r.name for r in second.skipped) == ["witness_0", "witness_1"]
    assert all("state file" in r.reason for r in second.skipped)
    assert len(stamps) == 4
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("witness_*.json") if p.name in stamps} == stamps
    check_outputs(out, ["witness_0", "witness_1", "witness_2"], distprove.open_key(chain_key).vk_json())
    # nothing new: no cluster is contacted at all (this address has nobody listening)
    third = incremental.batch(wdir, chain_key, out, scheduler=f"tcp://127.0.0.1:{free_port()}", backend="cpu", echo=None)
    assert (len(third.proved), len(third.skipped)) == (0, 3)


def test_worker_metrics_pages(dask_cluster: LocalDaskCluster, chain_key: Path, data_dir: Path, tmp_path: Path) -> None:
    label = chain_key.name
    pages = [metrics_page(p) for p in dask_cluster.worker_ports]
    before = sum(sample(t, "distprove_proofs_total", key=label) for t in pages)
    check_before = sum(sample(t, "distprove_stage_seconds_count", stage="check") for t in pages)
    cluster_before = sample(metrics_page(dask_cluster.dashboard_port), "distprove_cluster_proofs_total")
    wdir = chain_witnesses(data_dir, tmp_path / "w", ["witness_0", "witness_2"])
    res = run_cli("batch", str(chain_key), str(wdir), "--out", str(tmp_path / "out"), "--scheduler", dask_cluster.address)
    assert res.returncode == 0, res.stderr
    pages = [metrics_page(p) for p in dask_cluster.worker_ports]
    assert sum(sample(t, "distprove_proofs_total", key=label) for t in pages) == before + 2
    assert sum(sample(t, "distprove_stage_seconds_count", stage="check") for t in pages) == check_before + 2
    # the scheduler (its own process, the plugin registered by the batch's client) counted the batch
    scheduler = metrics_page(dask_cluster.dashboard_port)
    assert sample(scheduler, "distprove_batch_proofs_done") == sample(scheduler, "distprove_batch_proofs_total") == 2
    assert sample(scheduler, "distprove_cluster_proofs_total") == cluster_before + 2
    with urllib.request.urlopen(f"http://127.0.0.1:{dask_cluster.dashboard_port}/distprove/json", timeout=10) as r:
        page = json.loads(r.read())
    assert (page["total"], page["done"], page["failed"], page["running"]) == (2, 2, 0, False)
    assert sum(w["proofs"] for w in page["workers"]) == 2 and {w["worker"] for w in page["workers"]} <= set(dask_cluster.workers)
    joined = "\n".join(pages)
    for name in ("distprove_proofs_total", "distprove_stage_seconds_bucket", "distprove_resident_key_bytes"):
        assert name in joined
    assert "dask_worker_tasks" in joined  # distributed's own metrics share the page


def test_info_lists_workers_and_resident_keys(dask_cluster: LocalDaskCluster, chain_key: Path, data_dir: Path,
                                              tmp_path: Path) -> None:
    wdir = chain_witnesses(data_dir, tmp_path / "w", ["witness_1"])
    assert run_cli("batch", str(chain_key), str(wdir), "--out", str(tmp_path / "out"),
                   "--scheduler", dask_cluster.address).returncode == 0
    res = run_cli("info", "--scheduler", dask_cluster.address)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "2 worker(s)" in text
    assert text.count("backend cpu") == 2
    assert f"{chain_key}" in text  # a resident key, named by its path
    assert "distprove " + distprove.__version__ in text and "versions: same as here" in text
    for name in ("w0", "w1"):
        assert f"name {name}" in text


def test_info_without_scheduler_and_unreachable() -> None:
    res = run_cli("info")
    assert res.returncode == 0 and "no scheduler given" in res.stdout
    res = run_cli("info", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--timeout", "1")
    assert res.returncode == 1
    assert res.stderr.startswith("error: tcp://127.0.0.1:") and res.stderr.count("\n") == 1


def test_local_gpu_script_with_cpu_workers(data_dir: Path, tmp_path: Path) -> None:
    """cluster/local-gpu.sh end to end, with `dask worker` standing in for `dask cuda worker`."""
    wdir = tmp_path / "w"
    wdir.mkdir()
    shutil.copy(data_dir / "mini" / "witness.wtns", wdir / "m.wtns")
    key = data_dir / "mini" / "mini_0001.zkey"
    env = cpu_env(
        DISTPROVE_PORT=str(free_port()),
        DISTPROVE_DASHBOARD=f"127.0.0.1:{free_port()}",
        DISTPROVE_WORKERS="2",
        DISTPROVE_WORKER_CMD="dask worker --nworkers 2 --nthreads 1",
        DISTPROVE_LOG_DIR=str(tmp_path / "logs"),
        DISTPROVE_PYTHON=sys.executable,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    res = subprocess.run(["bash", str(CLUSTER_DIR / "local-gpu.sh"), str(key), str(wdir), str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 worker(s)" in res.stderr  # distprove info ran against the script's cluster
    check_outputs(tmp_path / "out", ["m"], distprove.open_key(key).vk_json())
    # the script stopped its scheduler: nothing listens on its port any more
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(env["DISTPROVE_PORT"])), timeout=5).close()


# --- the incremental rules without a cluster -------------------------------------------------------


@pytest.fixture
def mini(data_dir: Path, tmp_path: Path) -> tuple[distprove.KeyStore, list[Path], Path]:
    wdir = tmp_path / "w"
    wdir.mkdir()
    for n in ("a", "b", "c"):
        shutil.copy(data_dir / "mini" / "witness.wtns", wdir / f"{n}.wtns")
    return distprove.open_key(data_dir / "mini" / "mini_0001.zkey"), sorted(wdir.glob("*.wtns")), tmp_path / "out"


def _prove_into(key, witness: Path, out: Path) -> None:
    out.mkdir(exist_ok=True)
    distprove.prove(key, witness, backend="cpu").write(*config.settings().output_paths(witness, out))


def test_select_new_rules(mini) -> None:
    key, ws, out = mini
    assert incremental.select_new(ws, out, key=key) == ws
    _prove_into(key, ws[0], out)
    # rule 2: an existing proof the state does not know is verified and adopted
    assert incremental.select_new(ws, out, key=key) == ws[1:]
    state = json.loads((out / config.settings().state_file).read_text())
    assert list(state["done"]) == ["a"]
    # rule 1 needs no vk; a changed proof file is no longer "done"
    assert incremental.select_new(ws, out) == ws[1:]
    proof, public = config.settings().output_paths(ws[0], out)
    proof.write_text(proof.read_text().replace("1", "2", 1))
    assert incremental.select_new(ws, out) == ws
    assert incremental.select_new(ws, out, key=key) == ws  # and it no longer verifies either


def test_mark_done_failed_and_changed_witness(mini, data_dir: Path) -> None:
    key, ws, out = mini
    for w in ws[:2]:
        _prove_into(key, w, out)
    incremental.mark_done(out, ws[:2], key=key)
    incremental.mark_failed(out, [(ws[2], f"{ws[2]}: bad witness")], key=key)
    assert incremental.select_new(ws, out, key=key) == []
    assert incremental.select_new(ws, out, key=key, retry_failed=True) == [ws[2]]
    # a replaced witness (new mtime) is proved again, failed or done
    for w in (ws[0], ws[2]):
        st = w.stat()
        os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert incremental.select_new(ws, out) == [ws[0], ws[2]]

    other_vk = json.loads((data_dir / "mul_chain_1k" / "verification_key.json").read_text())

    class OtherKey:
        content_hash = "0" * 64

        def vk_json(self) -> dict:
            return other_vk

    incremental.mark_done(out, ws, key=key)
    assert incremental.select_new(ws, out, key=OtherKey()) == ws  # recorded for another key


def test_state_file_is_checked(mini) -> None:
    _, ws, out = mini
    out.mkdir()
    path = out / config.settings().state_file
    for text, words in (("{not json", "not valid JSON"), ('{"version": 9}', "not a distprove state file")):
        path.write_text(text)
        with pytest.raises(FormatError) as err:
            incremental.select_new(ws, out)
        assert str(err.value).startswith(f"{path}: {words}") and "\n" not in str(err.value)


def test_duplicate_names_rejected(mini, tmp_path: Path) -> None:
    _, ws, out = mini
    other = tmp_path / "x"
    other.mkdir()
    shutil.copy(ws[0], other / ws[0].name)
    with pytest.raises(FormatError, match="same name"):
        incremental.select_new([ws[0], other / ws[0].name], out)


def test_run_lock_excludes_a_second_run(tmp_path: Path) -> None:
    code = "import sys; from distprove.cluster import incremental as i\nwith i.run_lock(sys.argv[1]): print('got it')"
    with incremental.run_lock(tmp_path):
        res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert res.returncode != 0 and "another distprove run" in res.stderr
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "got it" in res.stdout


# --- recipes that cannot run here ----------------------------------------------------------------


def test_slurm_job_script() -> None:
    pytest.importorskip("dask_jobqueue")
    recipe = load_script(CLUSTER_DIR / "slurm" / "slurm_cluster.py")
    with recipe.make_cluster(4, cpus_per_gpu=6, memory_per_gpu="32GiB", partition="gpu", account="proj",
                             dashboard_address="127.0.0.1:0") as cluster:
        script = cluster.job_script()
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --gres=gpu:4" in directives
    assert "#SBATCH --cpus-per-task=24" in directives
    assert "#SBATCH -p gpu" in directives and "#SBATCH -A proj" in directives
    command = next(line for line in script.splitlines() if " -m dask cuda worker " in line)
    args = shlex.split(command)
    assert args[1:5] == ["-m", "dask", "cuda", "worker"]
    assert args[5].startswith("tcp://")
    assert args[args.index("--nthreads") + 1] == "1"  # one thread per GPU worker
    assert args[args.index("--memory-limit") + 1] == "32.00GiB"
    assert "export DASK_DISTPROVE__BACKEND=gpu" in script


def test_slurm_recipe_dry_run_and_scheduled_files(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("dask_jobqueue")
    recipe = load_script(CLUSTER_DIR / "slurm" / "slurm_cluster.py")
    before = signal.getsignal(signal.SIGTERM)
    assert recipe.main(["key.zarr", "in", "out", "--gpus-per-job", "2", "--dashboard-address", "127.0.0.1:0", "--dry-run"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before  # its SIGTERM handler is only for its own run
    assert "#SBATCH --gres=gpu:2" in capsys.readouterr().out
    sbatch = CLUSTER_DIR / "slurm" / "distprove-cron.sbatch"
    assert subprocess.run(["bash", "-n", str(sbatch)]).returncode == 0
    text = sbatch.read_text()
    assert "#SBATCH" in text and "slurm_cluster.py" in text and "--incremental" in text and "--begin=" in text
    cron_lines = [line for line in (CLUSTER_DIR / "slurm" / "scrontab").read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
    assert cron_lines
    for line in cron_lines:
        fields = line.split(None, 5)
        assert len(fields) == 6 and all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5]), line
        assert "--incremental" in fields[5]


def _manifests(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((CLUSTER_DIR / "k8s" / name).read_text()) if d]


def _gpu_worker_containers(cluster_spec: dict) -> list[dict]:
    containers = cluster_spec["worker"]["spec"]["containers"]
    assert containers and all(int(c["resources"]["limits"]["nvidia.com/gpu"]) >= 1 for c in containers)
    return containers


def _check_cluster_spec(spec: dict, name: str) -> None:
    assert spec["worker"]["replicas"] >= 1
    volumes = {v["name"]: v for v in spec["worker"]["spec"].get("volumes", [])}
    for c in _gpu_worker_containers(spec):
        assert "distprove" in c["image"]
        assert c["args"][:3] == ["dask", "cuda", "worker"]
        # the witness slots of input batches live in /dev/shm: an in-memory volume, not the pod's 64 MB
        (shm,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        assert volumes[shm["name"]]["emptyDir"]["medium"] == "Memory"
    scheduler = spec["scheduler"]
    assert scheduler["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    service = scheduler["service"]
    assert service["selector"] == {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}
    assert {p["port"] for p in service["ports"]} >= {8786, 8787}


def test_k8s_daskcluster() -> None:
    doc, group = _manifests("daskcluster.yaml")  # the group: CPU witness workers (test_k8s_schemas.py)
    assert (doc["apiVersion"], doc["kind"], group["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster", "DaskWorkerGroup")
    _check_cluster_spec(doc["spec"], doc["metadata"]["name"])


def test_k8s_daskjob() -> None:
    doc, group = _manifests("daskjob.yaml")  # the group: CPU witness workers (test_k8s_schemas.py)
    assert (doc["apiVersion"], doc["kind"], group["kind"]) == ("kubernetes.dask.org/v1", "DaskJob", "DaskWorkerGroup")
    job = doc["spec"]["job"]["spec"]["containers"][0]
    assert job["args"][:2] == ["distprove", "batch"] and "--incremental" in job["args"]
    _check_cluster_spec(doc["spec"]["cluster"]["spec"], doc["metadata"]["name"])


def test_k8s_cronjob_creates_the_daskjob() -> None:
    docs = {d["kind"]: d for d in _manifests("cronjob.yaml")}
    assert {"CronJob", "ServiceAccount", "Role", "RoleBinding", "ConfigMap"} <= set(docs)
    cron = docs["CronJob"]
    assert cron["apiVersion"] == "batch/v1"
    fields = cron["spec"]["schedule"].split()
    assert len(fields) == 5
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    assert "kubectl" in " ".join(pod["containers"][0]["command"] + pod["containers"][0].get("args", []))
    rules = docs["Role"]["rules"]
    assert any("kubernetes.dask.org" in r["apiGroups"] and "daskjobs" in r["resources"] and "create" in r["verbs"] for r in rules)
    binding = docs["RoleBinding"]
    assert binding["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert binding["subjects"][0]["name"] == docs["ServiceAccount"]["metadata"]["name"]
    # the DaskJob template the pod applies is itself a valid DaskJob
    script = pod["containers"][0]["args"][0]
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
    assert f"{mount}/daskjob.yaml" in script
    (template,) = [d for d in yaml.safe_load_all(next(iter(docs["ConfigMap"]["data"].values()))) if d]
    assert template["kind"] == "DaskJob"
    name = template["metadata"]["name"]
    _check_cluster_spec(template["spec"]["cluster"]["spec"], name)


DOCKER_INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                       "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def _dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, current = [], ""
    for line in path.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        word, _, rest = current.strip().partition(" ")
        out.append((word, rest.strip()))
        current = ""
    assert not current, "dangling line continuation"
    return out


def test_dockerfile_parses() -> None:
    docker = CLUSTER_DIR / "docker"
    instructions = _dockerfile_instructions(docker / "Dockerfile")
    assert all(word in DOCKER_INSTRUCTIONS for word, _ in instructions), instructions
    assert instructions[0][0] in ("FROM", "ARG")
    base = next(rest for word, rest in instructions if word == "FROM")
    assert base.startswith("nvidia/cuda:")
    assert any(word == "RUN" and "pip install" in rest for word, rest in instructions)
    assert any(word == "ARG" and "distprove[gpu]" in rest for word, rest in instructions)
    entry = json.loads(next(rest for word, rest in instructions if word == "ENTRYPOINT"))[0]
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    copies = [rest.split() for word, rest in instructions if word == "COPY"]
    for *sources, dest in copies:
        for src in sources:
            assert "*" in src or (docker / src).exists(), f"COPY source {src} is missing"
    # the entrypoint is a file of the build context, copied to its path or installed there by a RUN
    (script,) = [docker / src for *sources, dest in copies for src in sources if "*" not in src
                 and (dest == entry or (src in runs and entry in runs))]
    assert os.access(script, os.X_OK)
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    json.loads(next(rest for word, rest in instructions if word == "CMD"))  # exec form


def test_entrypoint_runs_its_arguments(tmp_path: Path) -> None:
    entry = str(CLUSTER_DIR / "docker" / "entrypoint.sh")
    res = subprocess.run([entry, "sh", "-c", "echo hello $0", "x"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.strip() == "hello x"
    # options alone go to the default dask-cuda worker (a stand-in `dask` records its arguments)
    fake = tmp_path / "dask"
    fake.write_text('#!/bin/sh\necho "dask $*"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run([entry, "--nthreads", "1"], capture_output=True, text=True, timeout=30, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "dask cuda worker --nthreads 1"


def test_shell_recipes_parse() -> None:
    for script in (CLUSTER_DIR / "local-gpu.sh", CLUSTER_DIR / "slurm" / "distprove-cron.sbatch"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script
    assert os.access(CLUSTER_DIR / "local-gpu.sh", os.X_OK)


def _flat_keys(d: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        out |= _flat_keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}"}
    return out


def test_readme_yaml_snippets_use_real_settings() -> None:
    """Every YAML block of cluster/README.md parses; the TLS block names only distributed's own settings."""
    import dask.config
    import distributed  # noqa: F401  (registers distributed's defaults)

    blocks = re.findall(r"```yaml\n(.*?)```", (CLUSTER_DIR / "README.md").read_text(), re.S)
    docs = [yaml.safe_load(b) for b in blocks]
    tls = next(d for d in docs if "distributed" in d)
    defaults = _flat_keys({"distributed": dask.config.get("distributed")})
    assert _flat_keys(tls) <= defaults, _flat_keys(tls) - defaults
    assert any("scrape_configs" in d for d in docs)


@pytest.mark.parametrize("enabled", [False, True], ids=["profiler-off", "profiler-on"])
def test_local_cluster_worker_profiler_follows_config(enabled: bool) -> None:
    """distprove.cluster.worker-profile decides whether the local cluster's workers run Dask's
    statistical profiler (it samples every thread's stack every 10 ms, taking the GIL)."""
    import dask
    from distributed import Client

    from distprove.cluster.client import local_cluster

    with dask.config.set({"distprove.cluster.worker-profile": enabled}):
        cluster = local_cluster("cpu", n_workers=1, dashboard_address=None)
    try:
        with Client(cluster) as client:
            got = client.run(lambda dask_worker: "profile" in dask_worker.periodic_callbacks)
        assert list(got.values()) == [enabled]
    finally:
        cluster.close()


def _worker_check_pool() -> tuple[bool, str, list[int], list[bool]]:
    """In a task: (daemonic?, the check executor's type, its processes' ids, a BatchCheck on it of
    the mini fixture's proof and a tampered copy)."""
    import multiprocessing

    from distprove.cluster.state import state
    from distprove.formats.jsonio import read_proof, read_public
    from distprove.verifier import BatchCheck

    from conftest import DATA_DIR

    mini = DATA_DIR / "mini"
    pool = state().check_executor()
    assert state().check_executor() is pool
    public = read_public(mini / "public.json")
    batch = BatchCheck(executor=pool, device=state().check_device())
    batch.add(mini / "verification_key.json", public, mini / "proof.json")
    batch.add(mini / "verification_key.json", [(public[0] + 1) % distprove.bn254.R, *public[1:]], read_proof(mini / "proof.json"))
    ok = batch.results()
    return multiprocessing.current_process().daemon, type(pool).__name__, sorted(pool._processes), ok


def test_local_cluster_workers_own_a_check_pool() -> None:
    """The local cluster's workers are not daemonic, so ProverState starts the worker's pool for
    the pre-write check (distprove.check.processes of them) on first use, and closes it when the
    plugin is torn down."""
    import dask
    from distributed import Client

    from distprove.cluster.batching import ensure_worker_state
    from distprove.cluster.client import local_cluster, worker_config

    assert worker_config()["distributed.worker.daemon"] is False
    with dask.config.set({"distprove.check.processes": 1}):
        cluster = local_cluster("cpu", n_workers=1, dashboard_address=None)
    try:
        with Client(cluster) as client:
            ensure_worker_state(client, "cpu", 1, None)
            daemon, kind, pids, ok = client.submit(_worker_check_pool, pure=False).result()
            assert (daemon, kind, len(pids), ok) == (False, "ProcessPoolExecutor", 1, [True, False])
            client.unregister_worker_plugin("distprove")
            deadline = time.monotonic() + 30
            while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(_running(pid) for pid in pids)
    finally:
        cluster.close()


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def test_check_processes_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """distprove.check.processes fixes the pool's size; null gives half the share of the cores
    (one worker here, outside any cluster); a bad value is one line naming the setting."""
    import dask

    from distprove.cluster import state
    from distprove.cluster.state import check_processes

    with dask.config.set({"distprove.check.processes": 3}):
        assert check_processes() == 3
    monkeypatch.setattr(state, "CPU_COUNT", 16)
    assert check_processes() == 8
    monkeypatch.setattr(state, "CPU_COUNT", 1)
    assert check_processes() == 0
    with dask.config.set({"distprove.check.processes": -1}), pytest.raises(FormatError, match="distprove.check.processes"):
        check_processes()


def test_share_devices_starts_companions_from_each_workers_spec() -> None:
    """Each worker gets per_device - 1 companions named after it, started from a copy of its spec
    (on a LocalCUDACluster that spec holds the worker's CUDA_VISIBLE_DEVICES: the same GPU)."""
    from distributed import Client

    from distprove.cluster.client import share_devices

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    try:
        for name, spec in list(cluster.worker_spec.items()):  # as dask-cuda's: each worker its own spec
            cluster.worker_spec[name] = {**spec, "options": {**spec["options"], "resources": {f"device-{name}": 1}}}
        share_devices(cluster, 3)
        with Client(cluster) as client:
            client.wait_for_workers(6, timeout=60)
            got = {w["name"]: w["resources"] for w in client.scheduler_info(n_workers=-1)["workers"].values()}
        assert got == {0: {}, 1: {}} | {f"{d}-{k}": {f"device-{d}": 1} for d in (0, 1) for k in (1, 2)}
    finally:
        cluster.close()


def test_workers_per_gpu_null_takes_two_for_small_keys_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """distprove.cluster.workers-per-gpu null: two processes a GPU when every key of the batch has
    fewer than 2^14 domain points (read from a .zkey's header or a key store's attributes), one
    when any key is larger or unreadable or there is none; a number, given or set, wins."""
    import dask

    import distprove.keystore as ks
    from distprove.cluster.client import SMALL_KEY_DOMAIN, processes_per_gpu
    from distprove.keystore import import_key, key_domain_size

    data = Path(__file__).parent / "data"
    chain, merkle = str(data / "mul_chain_1k" / "circuit_final.zkey"), str(data / "merkle_d20" / "circuit_final.zkey")
    store = tmp_path / "chain.zarr"
    import_key(chain, store)
    assert key_domain_size(chain) == key_domain_size(store) == 1024 and key_domain_size(merkle) == 8192
    with dask.config.set({"distprove.cluster.workers-per-gpu": None}):
        assert processes_per_gpu([chain, merkle, None, str(store)]) == 2
        assert processes_per_gpu([chain], given=1) == 1
        assert processes_per_gpu([None]) == processes_per_gpu([]) == 1
        assert processes_per_gpu([chain, str(tmp_path / "missing.zkey")]) == 1
        real = ks.key_domain_size
        monkeypatch.setattr(ks, "key_domain_size", lambda p: SMALL_KEY_DOMAIN if p == merkle else real(p))
        assert processes_per_gpu([chain, merkle]) == 1
    with dask.config.set({"distprove.cluster.workers-per-gpu": 3}):
        assert processes_per_gpu([chain]) == 3


def test_batch_asks_its_local_cluster_for_the_keys_workers_per_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """distprove.batch hands the local cluster the processes a GPU its keys call for (null
    setting: two for a 2^10 fixture key), and --workers-per-gpu's value when given."""
    import dask

    import distprove.cluster.client as dc
    from distprove.cluster.batching import batch

    asked: list[int | None] = []

    class Stop(Exception):
        pass

    def fake_local_cluster(backend: str, n_workers: Any, host: Any, dashboard: Any, workers_per_gpu: int | None,
                           witness_workers: int = 0) -> Any:
        asked.append(workers_per_gpu)
        raise Stop

    monkeypatch.setattr(dc, "local_cluster", fake_local_cluster)
    data = Path(__file__).parent / "data" / "mul_chain_1k"
    with dask.config.set({"distprove.cluster.workers-per-gpu": None, "scheduler-address": None}):
        for given in (None, 1):
            with pytest.raises(Stop):
                batch(data / "witnesses", data / "circuit_final.zkey", workers_per_gpu=given)
    assert asked == [2, 1]


def test_workers_per_gpu_setting_shapes_the_local_gpu_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """distprove.cluster.workers-per-gpu (and workers_per_gpu=) gives each GPU of the local cluster
    that many workers, and connect() hands out the client once they have all joined."""
    import types

    import dask

    import distprove.cluster.client as dc

    made: list[int] = []

    def fake_cuda_cluster(n_workers: int = 2, **kwargs: Any) -> LocalCluster:  # one worker per "GPU"
        made.append(n_workers)
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=None)

    monkeypatch.setitem(sys.modules, "dask_cuda", types.SimpleNamespace(LocalCUDACluster=fake_cuda_cluster))
    monkeypatch.setattr(dc, "visible_gpus", lambda: 2)
    with dask.config.set({"distprove.cluster.workers-per-gpu": 2}):
        with dc.connect(backend="auto", dashboard_address=None) as client:
            names = sorted(str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values())
    assert names == ["0", "0-1", "1", "1-1"]
    with dc.connect(backend="auto", n_workers=1, workers_per_gpu=3, dashboard_address=None) as client:
        assert len(client.scheduler_info(n_workers=-1)["workers"]) == 3
    assert made == [2, 1]
    with pytest.raises(FormatError, match="workers-per-gpu"), dask.config.set({"distprove.cluster.workers-per-gpu": 0}):
        dc.local_cluster("auto", dashboard_address=None)
