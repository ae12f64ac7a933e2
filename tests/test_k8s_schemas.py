"""The Kubernetes manifests of cluster/k8s against the published schemas.

* Built-in kinds (CronJob, Role, ConfigMap, PersistentVolumeClaim, ...) and every pod spec inside
  the Dask resources (scheduler, workers, job pod): ``kubernetes-validate`` (PyPI; it bundles the
  Kubernetes OpenAPI schemas), strict, so an unknown or misspelt field fails.
* DaskCluster, DaskJob and DaskWorkerGroup (also the DaskJob template the CronJob applies): the
  ``openAPIV3Schema`` of the operator's own CRDs, which the ``dask-kubernetes`` package ships
  (its Helm chart's ``crds/``), with ``jsonschema``.

Both packages are in the ``test`` extra, so CI validates every manifest; each part still skips,
saying why, where its package is missing. The PodMonitor (Prometheus Operator) has no schema in
either and keeps the field checks of test_cluster.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO_ROOT

K8S_DIR = REPO_ROOT / "cluster" / "k8s"
NO_SCHEMA = {"monitoring.coreos.com/v1"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    """(where, manifest) for every document, and the DaskJob template inside the CronJob's ConfigMap."""
    docs = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            docs.append((f"{path.name}:{doc['kind']}", doc))
            if doc["kind"] == "ConfigMap":
                for name, text in doc.get("data", {}).items():
                    docs += [(f"{path.name}:ConfigMap/{name}:{d['kind']}", d) for d in yaml.safe_load_all(text) if d]
    return docs


DOCS = _documents()


def _pod_specs(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The pod specs inside a DaskCluster, DaskJob or DaskWorkerGroup."""
    spec = doc["spec"]
    if doc["kind"] == "DaskWorkerGroup":
        return [("worker", spec["worker"]["spec"])]
    if doc["kind"] == "DaskJob":
        return [("job", spec["job"]["spec"])] + [(f"cluster.{n}", s) for n, s in _cluster_pods(spec["cluster"]["spec"])]
    return _cluster_pods(spec)


def _cluster_pods(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("scheduler", spec["scheduler"]["spec"]), ("worker", spec["worker"]["spec"])]


def _crd_schema(kind: str) -> dict[str, Any]:
    found = importlib.util.find_spec("dask_kubernetes")  # the package's files only; nothing imported
    if found is None or not found.submodule_search_locations:
        pytest.skip("dask-kubernetes not installed (pip install dask-kubernetes): no Dask operator CRDs")
    crds = Path(found.submodule_search_locations[0]) / "operator" / "deployment" / "helm" / "dask-kubernetes-operator" / "crds"
    crd = yaml.safe_load((crds / f"{kind.lower()}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("where,doc", [d for d in DOCS if d[1]["apiVersion"].startswith("kubernetes.dask.org/")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_dask_resources_match_operator_crds(where: str, doc: dict[str, Any]) -> None:
    import jsonschema

    errors = list(jsonschema.Draft7Validator(_crd_schema(doc["kind"])).iter_errors(doc))
    assert not errors, f"{where}: " + "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


@pytest.mark.parametrize("where,doc", [d for d in DOCS if d[1]["apiVersion"] not in NO_SCHEMA],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_manifests_match_kubernetes_schemas(where: str, doc: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed (pip install kubernetes-validate)")
    version = kv.latest_version()
    if doc["apiVersion"].startswith("kubernetes.dask.org/"):
        resources = [(f"{where}.{name}", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
                     for name, spec in _pod_specs(doc)]
    else:
        resources = [(where, doc)]
    for name, resource in resources:
        try:
            kv.validate(resource, version, strict=True)
        except kv.ValidationError as e:
            pytest.fail(f"{name}: {'.'.join(map(str, e.path))}: {e.message}")


@pytest.mark.parametrize("name", ["daskcluster.yaml", "daskjob.yaml"])
def test_witness_worker_group_has_no_gpu_and_the_witness_resource(name: str) -> None:
    """Each cluster manifest adds CPU witness workers: a DaskWorkerGroup of its cluster (the
    DaskJob's is named after the job) whose plain ``dask worker`` carries ``--resources witness=N``
    and asks for no GPU, beside GPU workers without the resource."""
    docs = [d for d in yaml.safe_load_all((K8S_DIR / name).read_text()) if d]
    main, = [d for d in docs if d["kind"] in ("DaskCluster", "DaskJob")]
    group, = [d for d in docs if d["kind"] == "DaskWorkerGroup"]
    assert group["spec"]["cluster"] == main["metadata"]["name"]
    (witness,) = group["spec"]["worker"]["spec"]["containers"]
    args = witness["args"]
    assert args[:2] == ["dask", "worker"] and "cuda" not in args
    resource = args[args.index("--resources") + 1]
    assert resource.startswith("witness=") and int(resource.split("=")[1]) >= 1
    assert "nvidia.com/gpu" not in witness["resources"].get("limits", {})
    assert {"name": "DASK_DISTRIBUTED__WORKER__DAEMON", "value": "False"} in witness["env"]
    cluster = main["spec"]["cluster"]["spec"] if main["kind"] == "DaskJob" else main["spec"]
    (gpu,) = cluster["worker"]["spec"]["containers"]
    assert "--resources" not in gpu["args"] and gpu["resources"]["limits"]["nvidia.com/gpu"] == "1"
