"""distprove.config: yaml defaults registered on import, env and yaml-file overrides, validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dask.config
import pytest
import yaml

from distprove import config
from distprove.errors import FormatError

DEFAULTS = yaml.safe_load(config.DEFAULTS_FILE.read_text())["distprove"]


@pytest.fixture
def fresh_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A private config folder; ``refresh()`` re-collects dask's configuration from it and the
    environment as a new process would. The global configuration is restored afterwards."""
    for name in list(os.environ):
        if name.startswith("DASK_DISTPROVE__"):
            monkeypatch.delenv(name)
    saved = dask.config.config.copy()

    def refresh() -> None:
        dask.config.refresh(paths=[str(tmp_path)])

    refresh()
    yield tmp_path, refresh
    dask.config.config.clear()
    dask.config.config.update(saved)


def _flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_defaults_registered(fresh_config) -> None:
    flat = _flatten(DEFAULTS)
    assert len(flat) >= 14
    for name, value in flat.items():
        assert config.get(name) == value, name
        assert dask.config.get(f"distprove.{name}") == value
    s = config.settings()
    assert (s.backend, s.planner_mode, s.verify) == (DEFAULTS["backend"], DEFAULTS["planner"]["mode"], DEFAULTS["verify"])
    assert s.state_file == DEFAULTS["incremental"]["state-file"]
    assert s.key_cache_count == DEFAULTS["key-cache"]["count"]
    assert (s.split_min_domain, s.gpu_split_min_domain) == (1 << 22, None)


def test_defaults_load_on_import_in_a_new_process(tmp_path: Path) -> None:
    """Importing distprove.config alone registers the defaults (no other distprove import needed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_DISTPROVE__")}
    env["DASK_CONFIG"] = str(tmp_path)
    code = "import dask.config, distprove.config; print(dask.config.get('distprove.planner.mode'), dask.config.get('distprove.output.proof-suffix'))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [DEFAULTS["planner"]["mode"], DEFAULTS["output"]["proof-suffix"]]
    # dask's convention: a commented copy of the defaults lands in the user's config folder
    copy = tmp_path / "distprove.yaml"
    assert copy.is_file()
    assert yaml.safe_load(copy.read_text()) is None  # every line commented out: overrides nothing


def test_env_overrides(fresh_config, monkeypatch: pytest.MonkeyPatch) -> None:
    _, refresh = fresh_config
    monkeypatch.setenv("DASK_DISTPROVE__BACKEND", "cpu")
    monkeypatch.setenv("DASK_DISTPROVE__PLANNER__MODE", "split")
    monkeypatch.setenv("DASK_DISTPROVE__PLANNER__WINDOWS_PER_TASK", "7")
    monkeypatch.setenv("DASK_DISTPROVE__VERIFY", "False")
    monkeypatch.setenv("DASK_DISTPROVE__KEY_CACHE__GPU_BYTES", "2 GiB")
    refresh()
    s = config.settings()
    assert s.backend == "cpu"
    assert s.planner_mode == "split"
    assert s.windows_per_task == 7
    assert s.verify is False
    assert s.key_cache_gpu_bytes == 2 << 30
    assert s.proof_suffix == DEFAULTS["output"]["proof-suffix"]  # untouched values keep their defaults


def test_yaml_file_overrides(fresh_config) -> None:
    folder, refresh = fresh_config
    (folder / "site.yaml").write_text(
        "distprove:\n  backend: gpu\n  output:\n    dir: out-x\n    proof-suffix: .p.json\n  key-cache:\n    count: 5\n"
    )
    refresh()
    s = config.settings()
    assert (s.backend, s.out_dir, s.proof_suffix, s.key_cache_count) == ("gpu", "out-x", ".p.json", 5)
    assert s.public_suffix == DEFAULTS["output"]["public-suffix"]
    assert s.output_paths("/in/w7.wtns", "/o") == (Path("/o/w7.p.json"), Path("/o/w7.public.json"))


def test_env_beats_yaml_file(fresh_config, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, refresh = fresh_config
    (folder / "site.yaml").write_text("distprove:\n  backend: gpu\n")
    monkeypatch.setenv("DASK_DISTPROVE__BACKEND", "cpu")
    refresh()
    assert config.settings().backend == "cpu"


@pytest.mark.parametrize(
    "setting, value, words",
    [
        ("distprove.backend", "tpu", ["distprove.backend", "tpu"]),
        ("distprove.planner.mode", "both", ["distprove.planner.mode", "both"]),
        ("distprove.planner.windows-per-task", 0, ["windows-per-task", ">= 1"]),
        ("distprove.planner.gpu-split-min-domain", "big", ["gpu-split-min-domain", "big"]),
        ("distprove.planner.group-domain", 0, ["group-domain", ">= 1"]),
        ("distprove.key-cache.count", "two", ["key-cache.count"]),
        ("distprove.key-cache.gpu-bytes", "lots", ["gpu-bytes", "lots"]),
        ("distprove.verify", "maybe", ["distprove.verify", "maybe"]),
        ("distprove.incremental.state-file", "a/b.json", ["state-file", "plain file name"]),
        ("distprove.output.public-suffix", ".proof.json", ["must differ"]),
    ],
)
def test_bad_values_give_one_line_errors(setting: str, value: object, words: list[str]) -> None:
    with dask.config.set({setting: value}):
        with pytest.raises(FormatError) as err:
            config.settings()
    msg = str(err.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


@pytest.mark.parametrize("text, expected", [("yes", True), ("0", False), ("OFF", False), (True, True)])
def test_bool_words(text: object, expected: bool) -> None:
    with dask.config.set({"distprove.verify": text}):
        assert config.settings().verify is expected


def test_witness_name() -> None:
    assert config.witness_name("/a/b/witness_3.wtns") == "witness_3"
    assert config.witness_name("x.bin") == "x.bin"


def test_msm_kernel_options() -> None:
    """distprove.msm.kernel-options adds NVRTC options to the GPU MSM build (no GPU needed to read it)."""
    from distprove.backends.gpu import msm

    assert msm.kernel_options() == msm.KERNEL_OPTIONS
    with dask.config.set({"distprove.msm.kernel-options": ["-DDP_G2_INLINE"]}):
        assert msm.kernel_options() == (*msm.KERNEL_OPTIONS, "-DDP_G2_INLINE")
    for bad in ("-DDP_PTX_MUL", [1]):
        with dask.config.set({"distprove.msm.kernel-options": bad}), pytest.raises(FormatError) as err:
            msm.kernel_options()
        assert "kernel-options" in str(err.value) and "\n" not in str(err.value)


def test_msm_affine_rounds() -> None:
    """distprove.msm.affine-rounds overrides AFFINE_ROUNDS: null keeps its size steps, a number sets
    both groups, a mapping each; anything else is a one-line FormatError naming the setting."""
    from distprove import bn254
    from distprove.backends.gpu import msm

    def both(n: int = 1 << 24) -> tuple[int, int]:
        return len(msm.round_thresholds(bn254.G1, n)), len(msm.round_thresholds(bn254.G2, n))

    steps = {"G1": ((20, 1), (22, 3)), "G2": ((21, 2),)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(msm, "AFFINE_ROUNDS", steps)
        q20, q21, q22 = (3 << 18), (3 << 19), (3 << 20)  # 3/4 of 2^20, 2^21, 2^22
        assert [both(n) for n in (1, q20 - 1, q20, q21, q22, 1 << 30)] == [
            (0, 0), (0, 0), (1, 0), (1, 2), (3, 2), (3, 2)]
        assert msm.round_thresholds(bn254.G1, 1 << 22) == [q20, q22, q22]
        assert msm.round_thresholds(bn254.G2, 1 << 22) == [q21, q21]
        with dask.config.set({"distprove.msm.affine-rounds": 2}):
            assert both(1) == both() == (2, 2)
            assert msm.round_thresholds(bn254.G1, 1) == [0, 0]
        with dask.config.set({"distprove.msm.affine-rounds": {"G2": 3}}):
            assert both() == (3, 3) and both(1 << 20) == (1, 3)
        with dask.config.set({"distprove.msm.affine-rounds": {"G1": 0}}):
            assert both() == (0, 2)
    for bad in (-1, True, "2", {"G3": 1}, {"G1": -2}, [1]):
        with dask.config.set({"distprove.msm.affine-rounds": bad}), pytest.raises(FormatError) as err:
            both()
        assert "affine-rounds" in str(err.value) and "\n" not in str(err.value)


def test_msm_sort_setting() -> None:
    """distprove.msm.sort picks the GPU digit sort: auto lets the device choose from RADIX_MIN_N
    points, radix and atomic force one (constant-work mode and keys wider than the radix sort's
    three passes always count); anything else is a one-line FormatError naming the setting. Widths the cost
    model picks above the measured sizes stay within the radix sort's keys."""
    from distprove import bn254
    from distprove.backends.gpu import msm

    big = msm.RADIX_MIN_N
    assert [msm.sort_kind(n, 17) for n in (big - 1, big)] == ["atomic", "planned"]
    assert msm.sort_kind(big, msm.RADIX_MAX_KEY_BITS + 2) == "planned"  # three radix passes
    assert msm.sort_kind(big, msm.RADIX_THREE_PASS_BITS + 2) == "atomic"
    assert msm.sort_kind(big, 17, constant_work=True) == "atomic"
    with dask.config.set({"distprove.msm.sort": "radix"}):
        assert msm.sort_kind(1, 13) == "radix" and msm.sort_kind(1, 13, constant_work=True) == "atomic"
    with dask.config.set({"distprove.msm.sort": "atomic"}):
        assert msm.sort_kind(1 << 24, 17) == "atomic"
    for bad in ("fast", 1, None):
        with dask.config.set({"distprove.msm.sort": bad}), pytest.raises(FormatError) as err:
            msm.sort_kind(big, 17)
        assert "msm.sort" in str(err.value) and "\n" not in str(err.value)
    for lg in (25, 26, 28):
        for group in (bn254.G1, bn254.G2):
            assert msm.pick_window(1 << lg, group) - 1 <= msm.RADIX_MAX_KEY_BITS


@pytest.mark.parametrize(("env", "want"), [(None, ()), ('["H"]', ("H",)), ("H, B1,H", ("H", "B1")), ("[]", ())])
def test_msm_precompute(fresh_config, monkeypatch: pytest.MonkeyPatch, env: str | None, want: tuple) -> None:
    """msm.precompute: a list of MSM names, from yaml or an environment variable (a list literal
    or a comma-separated string), duplicates dropped in order."""
    _, refresh = fresh_config
    if env is not None:
        monkeypatch.setenv("DASK_DISTPROVE__MSM__PRECOMPUTE", env)
    refresh()
    assert config.msm_precompute() == want
    assert config.settings().msm_precompute == want


@pytest.mark.parametrize("bad", [["H", "D"], "Z", [1], {"H": True}])
def test_msm_precompute_rejects_unknown_names(fresh_config, bad: object) -> None:
    with dask.config.set({"distprove.msm.precompute": bad}):
        with pytest.raises(FormatError, match=r"msm\.precompute.*A, B1, B2, C, H"):
            config.settings()


def test_planner_modes_have_one_source() -> None:
    """The planner's modes are one tuple: what the settings validate, what the planner plans with and
    what ``batch --mode`` offers; and importing the command line still leaves dask unloaded (its
    logging level goes into the environment before dask first reads it)."""
    from distprove import choices, cli
    from distprove.cluster import planner

    assert config.PLANNER_MODES is choices.PLANNER_MODES is planner.MODES
    mode = next(p for p in cli.main.commands["batch"].params if p.name == "mode")
    assert tuple(mode.type.choices) == choices.PLANNER_MODES
    code = "import sys, distprove.cli; sys.exit('dask' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr or "importing distprove.cli loaded dask"
