"""pipelines/model_scaling.py on synthetic measurements: it reproduces its 1-GPU inputs and scales monotonically."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from conftest import load_script
from distprove.errors import FormatError

SCRIPT = Path(__file__).parents[1] / "pipelines" / "model_scaling.py"


@pytest.fixture(scope="module")
def ms() -> ModuleType:
    return load_script(SCRIPT, register=True)


def _row(workers: int, wall: float) -> dict:
    return {
        "workers": workers, "proofs": 16, "throughput_proofs_per_s": 16 / wall, "throughput_wall_s": wall,
        "stage_seconds": {"prove-prepare": 0.6, "msm-windows": 1.5, "reduce": 0.2, "verify-write": 0.02},
        "latency_data_s": 0.25, "latency_data_stages": {"prove-prepare": 0.04, "msm-windows": 0.1, "reduce": 0.01},
        "latency_split_s": 0.4 if workers == 1 else 0.33,
        "latency_split_stages": {"prove-prepare": 0.05, "msm-windows": 0.2, "reduce": 0.012, "verify-write": 0.003},
    }


def _e2e(log_n: int, scale: float) -> dict:
    ms = {"witness": 8.0, "gather": 5.0, "ntt": 3.0, "msm_A": 10.0, "msm_B1": 10.0, "msm_B2": 43.0, "msm_C": 10.0, "msm_H": 10.0,
          "assemble": 4.0}
    ms = {k: v * (scale if k != "assemble" else 1.0) for k, v in ms.items()}
    return {"key": f"chain_k{log_n}", "domain_log2": log_n, "n_vars": 1 << log_n, "profiled_stages_ms": ms,
            "profiled_total_ms": sum(ms.values())}


_row24 = {**_row(1, 30.0), "latency_split_s": 1.9, "latency_split_stages": {
    "prove-prepare": 0.3, "msm-windows": 1.2, "reduce": 0.012, "verify-write": 0.003}}


@pytest.fixture()
def results(tmp_path: Path, ms: ModuleType) -> Path:
    """A results folder of synthetic measurements under the script's default file names."""
    files = {
        "batch": {"key": "synth chain 2^20", "verify": False, "rows": [_row(1, 2.6), _row(2, 1.35)]},
        "batch_large": [{"key": "keys/chain_k22/key.zarr", "verify": False, "rows": [_row(1, 7.0)]},
                        {"key": "keys/chain_k24/key.zarr", "verify": False, "split_h": "recompute", "rows": [_row24]}],
        "e2e": {"synthetic": [_e2e(20, 1.0), _e2e(22, 3.0), _e2e(24, 12.0)]},
        "ptau_levels": [
            {"group": g, "log_n": p, "level_s": k * (1 << p) * (p + 1), "host_twiddles_s": 3e-6 * (1 << p)}
            for g, k in (("G1", 5.5e-8), ("G2", 2.3e-7)) for p in (16, 18, 20)
        ],
        "ptau_prepare": [{"power": 20, "workers": 1, "seconds": 36.0}, {"power": 20, "workers": 2, "seconds": 25.0}],
    }
    for role, docs in files.items():
        for name, doc in zip(ms.INPUTS[role].split(","), docs if role == "batch_large" else [docs]):
            (tmp_path / name).write_text(json.dumps(doc))
    return tmp_path


def test_reproduces_one_gpu_and_is_monotone(ms: ModuleType, results: Path, capsys: pytest.CaptureFixture) -> None:
    out = results / "model.json"
    model = ms.main(["--results", str(results), "--out", str(out)])
    batch = json.loads((results / ms.INPUTS["batch"]).read_text())

    b20, b22 = model["batch"]["2^20"], model["batch"]["2^22"]
    assert b20[1]["proofs_per_s"] == pytest.approx(batch["rows"][0]["throughput_proofs_per_s"])
    checks = model["checks"]
    assert [(c["what"].split()[:3], c["gpus"]) for c in checks] == [
        (["batch", "2^20", "proofs/s"], 2), (["split", "latency", "2^20,"], 2),
        (["batch", "2^22", "proofs/s"], 1), (["data", "latency", "2^22,"], 1), (["split", "latency", "2^22,"], 1),
        (["batch", "2^24", "proofs/s"], 1), (["data", "latency", "2^24,"], 1), (["split", "latency", "2^24,"], 1),
        (["ptau", "prepare", "p20"], 2)]
    assert checks[2]["model"] == pytest.approx(b22[1]["proofs_per_s"])
    # One 2^24 proof's split latency takes the 2^24 batch's own costs: at 1 GPU it is that batch's
    # (measured with H recomputed on other workers, as the code runs; without the field a file
    # is taken to have sent H through Dask, and its prepare's download is not overhead)
    assert model["latency_2^24"]["as_run"][1]["total"] == pytest.approx(1.9)
    lat = model["latency_2^24"]["as_run"]
    assert lat[2]["transfers"] == pytest.approx((8.0 + 5.0 + 3.0) * 12 / 1e3)  # witness read, gather and NTT at 2^24
    assert checks[1]["measured_1"] == 0.4 and model["ptau_p20"]["as_measured"][1] == pytest.approx(36.0)
    a = ms.Assumed()
    e20 = ms.e2e_entry({"synthetic": [_e2e(20, 1.0)]}, 20, out)
    sp = ms.split_params(batch["rows"][0], e20, a, 4, out)
    assert ms.split_latency(sp, e20, 1, a, 4)["total"] == pytest.approx(0.4)

    for series, up in (
        ([b20[g]["proofs_per_s"] for g in ms.GPUS], True),
        ([b22[g]["proofs_per_s"] for g in ms.GPUS], True),
        ([model["latency_2^24"]["device_links"][g]["total"] for g in ms.GPUS], False),
        ([model["ptau_p20"]["current"][g]["total"] for g in ms.GPUS], False),
    ):
        assert all((b >= x) if up else (b <= x) for x, b in zip(series, series[1:])), series
    assert b20[8]["proofs_per_s"] <= 8 * b20[1]["proofs_per_s"]
    parts = model["latency_2^24"]["as_run"][4]
    assert parts["total"] == pytest.approx(sum(v for k, v in parts.items() if k != "total"))

    written = json.loads(out.read_text())
    assert written["note"].startswith("MODEL") and set(written["batch"]["2^20"]) == {"1", "2", "4", "8"}
    table = capsys.readouterr().out
    assert "| 8 |" in table and "| model / measured |" in table


@pytest.mark.parametrize("workers", [(1,), (1, 2, 4)])
def test_checks_every_measured_gpu_count(ms: ModuleType, results: Path, workers: tuple[int, ...]) -> None:
    """A 1-GPU batch alone builds the model with no batch check; 2 and 4 GPUs are each checked."""
    walls = {1: 2.6, 2: 1.35, 4: 0.72}
    batch = {"key": "synth chain 2^20", "verify": False, "rows": [_row(n, walls[n]) for n in workers]}
    (results / ms.INPUTS["batch"]).write_text(json.dumps(batch))
    model = ms.main(["--results", str(results), "--out", str(results / "m.json")])
    batch_checks = [c for c in model["checks"] if c["what"].startswith("batch 2^20")]
    assert [c["gpus"] for c in batch_checks] == [n for n in workers if n > 1]
    for c in batch_checks:
        assert c["measured"] == pytest.approx(16 / walls[c["gpus"]])
        assert c["model"] == pytest.approx(model["batch"]["2^20"][c["gpus"]]["proofs_per_s"])
    assert ("dask_bw_matching_2gpu_check" in model["latency_2^24"]) <= (2 in workers)


def test_large_batch_of_another_key_is_refused(ms: ModuleType, results: Path) -> None:
    """The 2^22 check needs the e2e input's own 2^22 key (another key of that domain is another circuit)."""
    large22 = ms.INPUTS["batch_large"].split(",")[0]
    (results / large22).write_text(json.dumps({"key": "keys/chain_n3200000^22", "rows": [_row(1, 7.0)]}))
    with pytest.raises(FormatError, match="not the e2e input's chain key of domain 2\\^22"):
        ms.main(["--results", str(results), "--out", str(results / "m.json")])
    model = ms.main(["--results", str(results), "--out", str(results / "m.json"), "--batch-large", ""])
    assert not [c for c in model["checks"] if "2^22" in c["what"]]


def test_missing_file_is_one_line_error(ms: ModuleType, results: Path) -> None:
    (results / ms.INPUTS["e2e"]).unlink()
    with pytest.raises(FormatError) as err:
        ms.main(["--results", str(results), "--out", str(results / "m.json")])
    assert ms.INPUTS["e2e"] in str(err.value) and "\n" not in str(err.value)
