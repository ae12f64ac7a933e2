"""``distprove serve``: the keys named, the cluster, the service and its HTTP server, for as long
as the process runs (SIGINT or SIGTERM end it; requests not finished then are proved by the next
start, from the journal)."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distprove.errors import DistproveError, FormatError
from distprove.service.grouping import ServedKey

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""What a key's name in the API may be."""


def parse_keys(specs: Sequence[str]) -> dict[str, str]:
    """Key names to paths from the command line's KEY arguments: ``NAME=PATH``, or a path named by
    its stem (``circuit.zarr`` and ``circuit.zkey`` are ``circuit``). Raises FormatError for a
    bad name, a missing path or a name given twice."""
    keys: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or "/" in name:
            name, path = Path(spec.rstrip("/")).stem, spec
        if not NAME.match(name):
            raise FormatError(spec, f"key name {name!r} must be letters, digits, '_', '.' or '-' (NAME=PATH names it)")
        if not os.path.exists(path):
            raise FormatError(path, "no such key store or .zkey")
        if name in keys:
            raise FormatError(spec, f"two keys named {name!r}; name them with NAME=PATH")
        keys[name] = os.path.abspath(path)
    if not keys:
        raise FormatError("KEY", "name at least one key store or .zkey")
    return keys


def is_local(host: str) -> bool:
    """Whether ``host`` binds only this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | None, host: str) -> str | None:
    """The bearer token of the token file ``path`` (its first line); None without one. Refuses a
    non-local ``host`` without a token, and an empty token."""
    if path is None:
        if not is_local(host):
            raise FormatError(host, "binding a non-local address needs --token-file (and TLS from a reverse proxy: cluster/README.md)")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"cannot read the token file: {getattr(exc, 'strerror', None) or exc}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise FormatError(path, "the token (first line) must be at least 16 characters without spaces")
    return token


def plan_keys(client: Any, keys: dict[str, str]) -> dict[str, ServedKey]:
    """Open every key on every worker (so it is resident before the first request) and find each
    key's witness generator beside it, checked against the key."""
    from distprove.cluster.work import plan_key
    from distprove.witness.discovery import generator_beside
    from distprove.witness.generators import generator

    workers = list(client.nthreads())
    futures = {
        name: [client.submit(plan_key, path, True, workers=[w], allow_other_workers=False, pure=False, key=f"serve-plan-key-{name}-{w}")
               for w in workers]
        for name, path in keys.items()
    }
    served = {}
    for name, path in keys.items():
        infos = client.gather(futures[name])
        info = infos[0]
        gen, why = generator_beside(path)
        if gen:
            try:
                generator(gen).check_key(info)
            except DistproveError as exc:
                gen, why = "", str(exc)
        served[name] = ServedKey(name, path, info, gen, why)
        log.info("key %s: %s (nVars %d, domain %d); inputs: %s", name, path, info.n_vars, info.domain_size, gen or why)
    return served


def _purge_loop(service: Any, stop: threading.Event) -> None:
    every = min(60.0, max(1.0, service.settings.retention / 4))
    while not stop.wait(every):
        try:
            service.purge()
        except Exception as exc:  # a full disk, ...: try again next time
            log.warning("could not forget old results: %s", exc)


def serve(
    key_specs: Sequence[str], *, host: str = "127.0.0.1", port: int = 8717, scheduler: str | None = None,
    backend: str | None = None, n_workers: int | None = None, token_file: str | None = None,
    state_dir: str | None = None, announce: Any = print,
) -> None:
    """Run the service until SIGINT or SIGTERM (see :mod:`distprove.service`)."""
    import dask
    import uvicorn

    from distprove import config
    from distprove.cluster.batching import ensure_worker_state
    from distprove.cluster.client import connect
    from distprove.service.app import build_app
    from distprove.service.service import ProvingService, ServeSettings

    keys = parse_keys(key_specs)
    token = read_token(token_file, host)
    settings = ServeSettings.read()
    base = config.settings()
    backend = backend or base.backend
    state_dir = state_dir or dask.config.get("distprove.serve.state-dir")
    logging.getLogger("distprove.witness.wasm").setLevel(logging.WARNING)  # a circuit's log() may print signals
    with connect(None, scheduler=scheduler, backend=backend, n_workers=n_workers, keys=list(keys.values())) as client:
        ensure_worker_state(client, backend, max(base.key_cache_count, len(keys)), base.key_cache_gpu_bytes)
        served = plan_keys(client, keys)
        service = ProvingService(client, served, state_dir, settings, dask.config.get("distprove.serve.journal", None))
        stop = threading.Event()
        purger = threading.Thread(target=_purge_loop, args=(service, stop), name="distprove-serve-purge", daemon=True)
        try:
            again = service.start()
            purger.start()
            server = uvicorn.Server(uvicorn.Config(build_app(service, token), host=host, port=port, log_level="warning",
                                                   access_log=False, lifespan="off"))
            if announce is not None:
                announce(f"distprove serve: keys {', '.join(served)} on http://{host}:{port} "
                         f"(state {os.path.abspath(state_dir)}; {again} unfinished requests queued again)")
            server.run()
        finally:
            stop.set()
            service.stop()
