"""The SLURM recipes of cluster/slurm under a real single-node SLURM (CPU backend).

The ``slurm`` fixture starts Debian's ``munged``, ``slurmctld`` and ``slurmd`` as root from a
generated ``slurm.conf`` in a temporary folder (one node named after the host with its CPUs and
memory, no cgroups, everything on 127.0.0.1) and stops them at the end. It skips when the
binaries are missing (``apt-get install slurm-wlm munge``; ``.ci/run`` does it) or when not root.
Through it, as a user would run them:

* ``distprove-cron.sbatch``: the scheduled incremental batch proves a witness folder, queues its
  next run; released, that run proves only the new witnesses, and a run with nothing new submits
  no worker job.
* ``make_cluster()`` (dask-jobqueue's SLURMCluster) from Python runs a batch on its worker job.
* A run killed with ``scancel`` mid-batch: the next run completes the rest and every proof is
  written exactly once.

``squeue`` and ``sacct --completion`` (the job completion log, ``JobCompType=jobcomp/filetxt``;
``sacct`` proper needs slurmdbd and a database) show the jobs finished. Proofs are checked with
snarkjs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import distprove
from distprove import config
from distprove.verifier import verify

from conftest import REPO_ROOT, load_script, snarkjs_verify

pytestmark = pytest.mark.slow

SLURM_DIR = REPO_ROOT / "cluster" / "slurm"
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo")
POLL_S = 0.2
"""How often a wait asks SLURM again (squeue and scontrol answer in milliseconds; a job's end is
seen within this)."""
START_TIMEOUT_S = 60
JOB_TIMEOUT_S = 240
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
               "DEADLINE"}
# Options of slurm_cluster.py for this node: CPU workers (no gres), small jobs, everything on lo.
RECIPE_ARGS = ["--backend", "cpu", "--cpus-per-gpu", "1", "--memory-per-gpu", "2GiB", "--walltime", "00:15:00",
               "--interface", "lo", "--dashboard-address", "127.0.0.1:0", "--worker-arg=--dashboard-address=127.0.0.1:0"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmNode:
    """munged, slurmctld and slurmd in the foreground, started from ``root`` (a temporary folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen] = []
        run, state, spool, self.logs = (root / d for d in ("run", "state", "spool", "log"))
        for d in (run, state, spool, self.logs):
            d.mkdir()
        run.chmod(0o755)  # munged wants its socket's folder readable by all
        key, socket_path = root / "munge.key", run / "munge.socket"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
        self.conf = root / "slurm.conf"
        host = socket.gethostname().split(".")[0]
        node = subprocess.run(["slurmd", "-C"], check=True, capture_output=True, text=True).stdout.splitlines()[0]
        node_resources = node.split(None, 1)[1]  # CPUs=.. Boards=.. ... RealMemory=.. as slurmd finds them
        self.conf.write_text("\n".join([
            "ClusterName=distprove-test",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",  # listen on 127.0.0.1, not every address
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={socket_path}",
            f"StateSaveLocation={state}",
            f"SlurmdSpoolDir={spool}",
            f"SlurmctldPidFile={run / 'slurmctld.pid'}",
            f"SlurmdPidFile={run / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.logs / 'slurmctld.log'}",
            f"SlurmdLogFile={self.logs / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.logs / 'jobcomp.txt'}",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "ScronParameters=enable",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            f"NodeName={host} NodeAddr=127.0.0.1 {node_resources} State=UNKNOWN",
            # a scheduler job and its worker jobs share the (possibly 2) cores, as on a login/CPU node
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4",
            "",
        ]))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._start(["munged", "--foreground", "--force", f"--socket={socket_path}", f"--key-file={key}",
                     f"--pid-file={run / 'munged.pid'}", f"--seed-file={root / 'munged.seed'}",
                     f"--log-file={self.logs / 'munged.log'}"], "munged")
        # --force: the test's temporary folders are private to root (the only user here), which
        # munged would otherwise refuse for its socket's parents.
        self._wait(lambda: socket_path.exists(), "munged socket")
        self._start(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._start(["slurmd", "-D", "-f", str(self.conf)], "slurmd")
        self._wait(lambda: self.run("sinfo", "-h", "-o", "%t", check=False).stdout.strip() == "idle", "an idle node")

    def _start(self, cmd: list[str], name: str) -> None:
        with open(self.logs / f"{name}.out", "wb") as f:
            self.procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=self.env))

    def _wait(self, ready, what: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"SLURM did not come up ({what}; exited: {dead}):\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for log in sorted(self.logs.glob("*")):
            out.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def run(self, *cmd: str, check: bool = True, cwd: Path | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env or self.env, cwd=cwd, timeout=60)
        if check and res.returncode:
            raise AssertionError(f"{' '.join(cmd)}: exit {res.returncode}\n{res.stdout}{res.stderr}")
        return res

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (JobState, JobName, ExitCode, ...)."""
        text = self.run("scontrol", "-o", "show", "job", job_id).stdout
        return dict(f.split("=", 1) for f in text.split() if "=" in f)

    def wait_job(self, job_id: str, timeout: float = JOB_TIMEOUT_S) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while (info := self.job(job_id))["JobState"] not in DONE_STATES:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {info['JobState']} after {timeout:.0f} s\n{self.log_tail()}")
            time.sleep(POLL_S)
        return info

    def queue(self, *args: str) -> list[list[str]]:
        """squeue rows (job id, name, state, reason) of pending and running jobs."""
        out = self.run("squeue", "-h", "-o", "%i %j %T %r", *args).stdout
        return [line.split() for line in out.splitlines()]

    def wait_idle(self, timeout: float = JOB_TIMEOUT_S) -> None:
        """Until no job runs (pending jobs may stay)."""
        deadline = time.monotonic() + timeout
        while running := self.queue("-t", "running,completing,configuring"):
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs still running: {running}")
            time.sleep(POLL_S)

    def completed(self) -> dict[str, tuple[str, str]]:
        """job id -> (name, state) from ``sacct --completion`` (the job completion log)."""
        out = self.run("sacct", "--completion", "-n", "-P", "-o", "jobid,jobname,state").stdout
        return {i: (n, s) for i, n, s in (line.split("|") for line in out.splitlines() if line)}

    def stop(self) -> None:
        self.run("scancel", "--user", "root", check=False)  # only this cluster's jobs (SLURM_CONF)
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmNode]:
    missing = [b for b in BINARIES if not shutil.which(b)]
    if missing:
        pytest.skip(f"SLURM/munge not installed (no {', '.join(missing)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("a single-node SLURM is started as root; not root here")
    root = tmp_path_factory.mktemp("slurm")
    node = SlurmNode(root)
    try:
        yield node
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def chain_store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """mul_chain_1k imported into a key store, as a cluster's shared file system would hold it."""
    store = tmp_path_factory.mktemp("keys") / "mul_chain_1k.zarr"
    distprove.import_key(data_dir / "mul_chain_1k" / "circuit_final.zkey", store)
    return store


def add_witnesses(data_dir: Path, dest: Path, names: list[str]) -> None:
    """Copies of mul_chain_1k's witnesses (name i takes witness i % 3)."""
    dest.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        shutil.copy(data_dir / "mul_chain_1k" / "witnesses" / f"witness_{int(name.rsplit('_', 1)[1]) % 3}.wtns",
                    dest / f"{name}.wtns")


def proof_files(out: Path) -> dict[str, int]:
    """name -> mtime_ns of every proof file in ``out``."""
    suffix = config.settings().proof_suffix
    return {p.name[: -len(suffix)]: p.stat().st_mtime_ns for p in out.glob(f"*{suffix}")}


def check_proofs(out: Path, names: list[str], store: Path, tmp: Path, snarkjs: str, with_snarkjs: list[str]) -> None:
    """Exactly these proofs, each verified, no temporary file left; some also by snarkjs."""
    vk = distprove.open_key(store).vk_json()
    assert sorted(proof_files(out)) == sorted(names)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    vk_path = tmp / "verification_key.json"
    vk_path.write_text(json.dumps(vk))
    for name in names:
        proof, public = config.settings().output_paths(f"{name}.wtns", out)
        assert verify(vk, public, proof), name
        if name in with_snarkjs:
            assert snarkjs_verify(vk_path, public, proof, snarkjs), name


def cron_env(slurm: SlurmNode, store: Path, wdir: Path, out: Path) -> dict[str, str]:
    """What a user exports before submitting distprove-cron.sbatch, for this node."""
    env = {k: v for k, v in slurm.env.items() if not k.startswith(("DASK_DISTPROVE__", "DASK_SCHEDULER_ADDRESS"))}
    env.update(DISTPROVE_HOME=str(REPO_ROOT), DISTPROVE_KEY=str(store), DISTPROVE_WITNESS_DIR=str(wdir),
               DISTPROVE_OUT_DIR=str(out), DISTPROVE_JOBS="1", DISTPROVE_GPUS_PER_JOB="1",
               DISTPROVE_SLURM_ARGS=" ".join(RECIPE_ARGS))
    if (Path(sys.prefix) / "bin" / "activate").is_file():
        env["DISTPROVE_VENV"] = sys.prefix
    return env


def submit_cron(slurm: SlurmNode, env: dict[str, str], cwd: Path) -> str:
    res = slurm.run("sbatch", "--parsable", "--export=ALL", str(SLURM_DIR / "distprove-cron.sbatch"), cwd=cwd, env=env)
    return res.stdout.strip().split(";")[0]


def next_run(slurm: SlurmNode) -> str:
    """The schedule's queued next run (pending on its begin time); released to start now."""
    (row,) = [r for r in slurm.queue("-n", "distprove-cron") if r[2] == "PENDING"]
    slurm.run("scontrol", "update", f"JobId={row[0]}", "StartTime=now")
    return row[0]


def run_log(cwd: Path, job_id: str) -> str:
    return (cwd / f"distprove-cron-{job_id}.log").read_text()


def test_cron_sbatch_incremental_schedule(slurm: SlurmNode, chain_store: Path, data_dir: Path, tmp_path: Path,
                                          snarkjs: str) -> None:
    wdir, out = tmp_path / "witnesses", tmp_path / "proofs"
    add_witnesses(data_dir, wdir, ["witness_0", "witness_1"])
    env = cron_env(slurm, chain_store, wdir, out)
    first = submit_cron(slurm, env, tmp_path)
    info = slurm.wait_job(first)
    log = run_log(tmp_path, first)
    assert info["JobState"] == "COMPLETED", log
    check_proofs(out, ["witness_0", "witness_1"], chain_store, tmp_path, snarkjs, ["witness_0", "witness_1"])
    stamps = proof_files(out)

    # new witnesses arrive; the schedule's next run (queued by the first) proves only those
    add_witnesses(data_dir, wdir, ["witness_2"])
    slurm.wait_idle()  # the first run's worker job is cancelled as its cluster closes
    second = next_run(slurm)
    assert slurm.wait_job(second)["JobState"] == "COMPLETED", run_log(tmp_path, second)
    check_proofs(out, ["witness_0", "witness_1", "witness_2"], chain_store, tmp_path, snarkjs, ["witness_2"])
    assert {k: v for k, v in proof_files(out).items() if k in stamps} == stamps
    assert "proved 1, failed 0, skipped 2" in run_log(tmp_path, second)

    # nothing new: the run exits without submitting a worker job
    slurm.wait_idle()
    third = next_run(slurm)
    assert slurm.wait_job(third)["JobState"] == "COMPLETED"
    assert "nothing new to prove" in run_log(tmp_path, third)

    done = slurm.completed()
    assert [done[j] for j in (first, second, third)] == [("distprove-cron", "COMPLETED")] * 3
    workers = [state for name, state in done.values() if name == "dask-worker"]
    assert len(workers) == 2 and set(workers) <= {"COMPLETED", "CANCELLED"}, done
    # the schedule goes on (a fourth run queued) until the README's scancel stops it
    assert [r[1:3] for r in slurm.queue()] == [["distprove-cron", "PENDING"]]
    slurm.run("scancel", "--name", "distprove-cron")
    assert slurm.queue() == []


def test_slurm_cluster_from_python(slurm: SlurmNode, chain_store: Path, data_dir: Path, tmp_path: Path,
                                   snarkjs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dask_jobqueue")
    from distributed import Client

    recipe = load_script(SLURM_DIR / "slurm_cluster.py")
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.chdir(tmp_path)  # where the worker jobs' logs go
    wdir, out = tmp_path / "witnesses", tmp_path / "proofs"
    names = ["witness_0", "witness_1", "witness_2"]
    add_witnesses(data_dir, wdir, names)
    with recipe.make_cluster(1, backend="cpu", cpus_per_gpu=1, memory_per_gpu="2GiB", walltime="00:15:00",
                             interface="lo", dashboard_address="127.0.0.1:0",
                             worker_extra_args=["--dashboard-address=127.0.0.1:0"]) as cluster:
        assert "--gres" not in cluster.job_script()
        cluster.scale(jobs=1)
        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=JOB_TIMEOUT_S)
            (job,) = slurm.queue("-n", "dask-worker")
            assert job[2] == "RUNNING"
            report = distprove.batch(wdir, chain_store, out, client=client, echo=None)
            assert (len(report.proved), len(report.failed)) == (3, 0)
    slurm.wait_idle()
    assert slurm.completed()[job[0]] == ("dask-worker", "CANCELLED")  # closing the cluster cancels its jobs
    check_proofs(out, names, chain_store, tmp_path, snarkjs, ["witness_1"])


def test_slurm_mixed_cluster_witness_jobs_compute_the_gpu_jobs_prove(
        slurm: SlurmNode, chain_store: Path, data_dir: Path, tmp_path: Path, snarkjs: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe's CPU witness pool: one proving job (CPU backend standing in for a GPU job) and
    one witness job (``add_witness_jobs``: a plain dask worker with the witness resource, no
    gres); a batch from inputs computes every witness on the witness job's worker and proves
    every proof on the other, each verified (two by snarkjs)."""
    pytest.importorskip("dask_jobqueue")
    from dask.utils import key_split
    from distributed import Client, get_task_stream

    from distprove.witness.pool import witness_workers

    recipe = load_script(SLURM_DIR / "slurm_cluster.py")
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.chdir(tmp_path)  # where the worker jobs' logs go
    inputs, out = tmp_path / "inputs", tmp_path / "proofs"
    inputs.mkdir()
    for p in sorted((data_dir / "mul_chain_1k" / "inputs").glob("*.json")):
        shutil.copy(p, inputs)
    with recipe.make_cluster(1, backend="cpu", gres=None, cpus_per_gpu=1, memory_per_gpu="2GiB", walltime="00:15:00",
                             interface="lo", dashboard_address="127.0.0.1:0",
                             worker_extra_args=["--dashboard-address=127.0.0.1:0"]) as cluster:
        cluster.scale(jobs=1)
        recipe.add_witness_jobs(cluster, 1, cpus=1, memory="2GiB")
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=JOB_TIMEOUT_S)
            names = {job[1] for job in slurm.queue()}
            assert names == {"dask-worker", "distprove-witness"}, slurm.queue()
            witness = set(witness_workers(client))
            assert len(witness) == 1
            with get_task_stream(client) as stream:
                report = distprove.batch(inputs, chain_store, out, client=client, echo=None, announce=None,
                                         witness_gen=str(data_dir / "mul_chain_1k" / "circuit.wasm"))
            assert (len(report.proved), len(report.failed), report.witness_workers) == (3, 0, 1), report.summary()
            where: dict[str, set[str]] = {}
            for rec in stream.data:
                where.setdefault(key_split(rec["key"]), set()).add(rec["worker"])
            assert where["witness-gen"] == witness and where["prove-whole"].isdisjoint(witness), where
    slurm.wait_idle()
    check_proofs(out, ["input_0", "input_1", "input_2"], chain_store, tmp_path, snarkjs, ["input_0", "input_2"])


def test_scancel_mid_batch_then_next_run_completes(slurm: SlurmNode, chain_store: Path, data_dir: Path,
                                                   tmp_path: Path, snarkjs: str) -> None:
    names = [f"w_{i:02d}" for i in range(8)]
    wdir, out = tmp_path / "witnesses", tmp_path / "proofs"
    add_witnesses(data_dir, wdir, names)
    env = cron_env(slurm, chain_store, wdir, out)
    first = submit_cron(slurm, env, tmp_path)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not (out.is_dir() and proof_files(out)):
        assert time.monotonic() < deadline and slurm.job(first)["JobState"] not in DONE_STATES, slurm.log_tail()
        time.sleep(0.2)
    slurm.run("scancel", first)
    assert slurm.wait_job(first)["JobState"] == "CANCELLED"
    slurm.wait_idle()
    # the recipe left through its cluster on SIGTERM, which cancelled the worker job (not left to
    # run until its --death-timeout)
    workers = [s for j, (n, s) in slurm.completed().items() if n == "dask-worker" and int(j) > int(first)]
    assert workers == ["CANCELLED"]
    killed_with = proof_files(out)
    assert 0 < len(killed_with) < len(names), "the run was not stopped mid-batch"

    second = next_run(slurm)  # the schedule's next run, queued before the kill
    assert slurm.wait_job(second)["JobState"] == "COMPLETED", run_log(tmp_path, second)
    check_proofs(out, names, chain_store, tmp_path, snarkjs, [names[0], names[-1]])
    # proofs written before the kill are kept as they were, the rest were made once
    assert {k: v for k, v in proof_files(out).items() if k in killed_with} == killed_with
    log = run_log(tmp_path, second)
    assert f"proved {len(names) - len(killed_with)}, failed 0, skipped {len(killed_with)}" in log, log
    slurm.run("scancel", "--name", "distprove-cron")



def test_scron_options_accepted(slurm: SlurmNode) -> None:
    """The #SCRON line's job options, given to ``sbatch --test-only``, are a job SLURM would run."""
    (line,) = [x for x in (SLURM_DIR / "scrontab").read_text().splitlines() if x.startswith("#SCRON")]
    res = slurm.run("sbatch", "--test-only", *line.split()[1:], "--wrap", "true")
    assert "to start at" in res.stderr, res.stderr


def test_scrontab_is_accepted(slurm: SlurmNode) -> None:
    """SLURM takes the recipe's scrontab as it is: one cron job, hourly at minute 5."""
    if not shutil.which("scrontab"):
        pytest.skip("no scrontab command (Debian's slurm-client 22.05 has none)")
    crontab = SLURM_DIR / "scrontab"
    slurm.run("scrontab", str(crontab))
    try:
        assert slurm.run("scrontab", "-l").stdout.strip() == crontab.read_text().strip()
        ((job_id, name, state, reason),) = slurm.queue("-n", "distprove-cron")
        assert (name, state, reason) == ("distprove-cron", "PENDING", "BeginTime")
        info = slurm.job(job_id)
        assert info["CronJob"] == "Yes" and info["TimeLimit"] == "04:00:00", info
    finally:
        slurm.run("scrontab", "-r")
    assert slurm.queue("-n", "distprove-cron") == []
