"""distprove's settings in dask.config's ``distprove`` namespace.

Importing this module registers the defaults of ``distprove/distprove.yaml`` with
``dask.config.update_defaults`` (so files in ``~/.config/dask/``, ``$DASK_CONFIG`` and
``DASK_DISTPROVE__...`` environment variables override them) and, following dask's convention,
drops a commented copy of that file into the user's dask config folder when it is writable.

Read single values with :func:`get` (``get("planner.mode")``) or a validated snapshot of all of
them with :func:`settings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.config
import yaml
from dask.utils import parse_bytes

from .backends import BACKEND_NAMES
from .choices import PLANNER_MODES
from .errors import FormatError
from .groth16 import MSM_NAMES

NAMESPACE = "distprove"
DEFAULTS_FILE = Path(__file__).with_name("distprove.yaml")
_MISSING = object()


def _register_defaults() -> None:
    with open(DEFAULTS_FILE, encoding="utf-8") as f:
        defaults = yaml.safe_load(f)
    dask.config.update_defaults(defaults)
    dask.config.ensure_file(source=str(DEFAULTS_FILE))  # commented copy; silently skipped when read-only


_register_defaults()


def get(name: str, default: Any = _MISSING) -> Any:
    """The value of ``distprove.<name>`` (dotted, e.g. ``"planner.mode"``) from dask.config."""
    key = f"{NAMESPACE}.{name}"
    if default is _MISSING:
        return dask.config.get(key)
    return dask.config.get(key, default=default)


@dataclass(frozen=True)
class Settings:
    """A validated snapshot of the ``distprove`` configuration (see distprove.yaml for meanings)."""

    backend: str
    key: str | None
    planner_mode: str
    split_min_domain: int
    gpu_split_min_domain: int | None
    split_max_proofs_per_worker: int
    worker_memory: int | None
    windows_per_task: int
    fuse_below: int | None
    proofs_per_task: int
    proofs_per_writing_task: int
    group_domain: int
    out_dir: str
    proof_suffix: str
    public_suffix: str
    key_cache_count: int
    key_cache_gpu_bytes: int | None
    verify: bool
    incremental: bool
    state_file: str
    metrics: bool
    msm_constant_work: bool
    msm_precompute: tuple[str, ...]

    def output_paths(self, witness: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
        """(proof path, public path) in ``out_dir`` for a witness file, by the configured suffixes."""
        stem = witness_name(witness)
        out = os.fspath(out_dir)
        return Path(out, f"{stem}{self.proof_suffix}"), Path(out, f"{stem}{self.public_suffix}")


def witness_name(witness: str | os.PathLike[str]) -> str:
    """A witness's name: its file name without the ``.wtns`` suffix."""
    return os.path.basename(os.fspath(witness)).removesuffix(".wtns")


def _choice(name: str, allowed: tuple[str, ...]) -> str:
    value = get(name)
    if value not in allowed:
        raise FormatError(f"{NAMESPACE}.{name}", f"must be one of {', '.join(allowed)} (got {value!r})")
    return value


def _int(name: str, minimum: int) -> int:
    value = get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FormatError(f"{NAMESPACE}.{name}", f"must be an integer >= {minimum} (got {value!r})")
    return value


_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def get_bool(name: str) -> bool:
    """``distprove.<name>`` as a bool (true/false, also the strings yes/no/on/off/1/0); FormatError otherwise."""
    value = get(name)
    if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:  # e.g. from a Kubernetes env value
        return _BOOL_WORDS[value.strip().lower()]
    if not isinstance(value, bool):
        raise FormatError(f"{NAMESPACE}.{name}", f"must be true or false (got {value!r})")
    return value


def msm_precompute() -> tuple[str, ...]:
    """``distprove.msm.precompute``: the MSMs (of A, B1, B2, C, H) whose bases the GPU backend
    also keeps as precomputed window multiples; a list, or a comma-separated string (e.g. from
    an environment variable). FormatError naming the setting otherwise."""
    value = get("msm.precompute", None)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v in MSM_NAMES for v in value):
        raise FormatError(f"{NAMESPACE}.msm.precompute",
                          f"must be a list of MSM names from {', '.join(MSM_NAMES)} (got {get('msm.precompute')!r})")
    return tuple(dict.fromkeys(value))


def get_int(name: str, minimum: int) -> int:
    """``distprove.<name>`` as an int >= ``minimum``; FormatError naming the setting otherwise."""
    return _int(name, minimum)


def get_optional_int(name: str, minimum: int) -> int | None:
    """``distprove.<name>`` as an int >= ``minimum`` or None (null); FormatError naming the setting otherwise."""
    return _optional_int(name, minimum)


def group_proofs() -> int | None:
    """``distprove.msm.group-proofs``: the most proofs of one key whose MSMs the prover runs as one
    group, or None for the backend's choice; FormatError naming the setting otherwise."""
    return _optional_int("msm.group-proofs", 1)


def groups_in_flight() -> int:
    """``distprove.msm.groups-in-flight``: groups of proofs a grouped pipeline keeps started and
    not yet waited for (>= 1); FormatError naming the setting otherwise."""
    return _int("msm.groups-in-flight", 1)


def _optional_int(name: str, minimum: int) -> int | None:
    value = get(name)
    if isinstance(value, str) and value.strip().lower() in ("null", "none"):  # e.g. from an environment variable
        return None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        raise FormatError(f"{NAMESPACE}.{name}", f"must be an integer >= {minimum} or null (got {value!r})")
    return value


def _text(name: str) -> str:
    value = get(name)
    if not isinstance(value, str) or not value:
        raise FormatError(f"{NAMESPACE}.{name}", f"must be a non-empty string (got {value!r})")
    return value


def _optional_text(name: str) -> str | None:
    return None if get(name) is None else _text(name)


def _file_name(name: str) -> str:
    value = _text(name)
    if os.sep in value or (os.altsep and os.altsep in value) or value in (".", ".."):
        raise FormatError(f"{NAMESPACE}.{name}", f"must be a plain file name, not a path (got {value!r})")
    return value


def get_bytes(name: str) -> int | None:
    """A byte-count setting: a positive int, a size such as "40 GiB", or None (null).

    Raises FormatError naming the setting otherwise."""
    value = get(name)
    if value is None:
        return None
    try:
        n = parse_bytes(value) if isinstance(value, str) else value
    except ValueError:
        n = None
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise FormatError(f"{NAMESPACE}.{name}", f"must be a positive byte count, a size like '40 GiB', or null (got {value!r})")
    return n


def gpu_memory_limit() -> int | float | None:
    """``distprove.gpu.memory-limit``: a GPU worker's memory budget as bytes (an int, or a size
    such as "24 GiB"), as a fraction 0 < x <= 1 of its card's memory (a float, or a string such
    as "0.5"), or None (null: what the card has free). FormatError naming the setting otherwise."""
    raw = value = get("gpu.memory-limit", None)
    if raw is None:
        return None
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in ("null", "none"):
            return None
        try:
            value = float(text) if "." in text and text.replace(".", "", 1).isdigit() else parse_bytes(text)
        except ValueError:
            value = None  # the error below
    if value == 1 and not isinstance(value, bool):  # the whole card
        value = 1.0
    if isinstance(value, float) and 0 < value <= 1:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value > 1:
        return value
    raise FormatError(f"{NAMESPACE}.gpu.memory-limit",
                      f"must be a size like '24 GiB', a fraction of the card in (0, 1], or null (got {raw!r})")


def settings() -> Settings:
    """Read and validate the whole ``distprove`` namespace; a bad value raises a one-line FormatError."""
    proof_suffix, public_suffix = _text("output.proof-suffix"), _text("output.public-suffix")
    if proof_suffix == public_suffix:
        raise FormatError(f"{NAMESPACE}.output", f"proof-suffix and public-suffix must differ (both {proof_suffix!r})")
    return Settings(
        backend=_choice("backend", BACKEND_NAMES),
        key=_optional_text("key"),
        planner_mode=_choice("planner.mode", PLANNER_MODES),
        split_min_domain=_int("planner.split-min-domain", 1),
        gpu_split_min_domain=_optional_int("planner.gpu-split-min-domain", 1),
        split_max_proofs_per_worker=_int("planner.split-max-proofs-per-worker", 0),
        worker_memory=get_bytes("planner.worker-memory"),
        windows_per_task=_int("planner.windows-per-task", 1),
        fuse_below=_optional_int("planner.fuse-below", 1),
        proofs_per_task=_int("planner.proofs-per-task", 1),
        proofs_per_writing_task=_int("planner.proofs-per-writing-task", 1),
        group_domain=_int("planner.group-domain", 1),
        out_dir=_text("output.dir"),
        proof_suffix=proof_suffix,
        public_suffix=public_suffix,
        key_cache_count=_int("key-cache.count", 1),
        key_cache_gpu_bytes=get_bytes("key-cache.gpu-bytes"),
        verify=get_bool("verify"),
        incremental=get_bool("incremental.enabled"),
        state_file=_file_name("incremental.state-file"),
        metrics=get_bool("metrics.enabled"),
        msm_constant_work=get_bool("msm.constant-work"),
        msm_precompute=msm_precompute(),
    )
