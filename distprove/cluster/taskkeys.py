"""The names of a batch's tasks: the first element of every task key the batch and the service
submit (:mod:`distprove.cluster.graph` says what each task does). The dashboard, the batch report
and the scheduler plugin that holds proof work to the provers all read them from here."""

from __future__ import annotations

PROVE_WHOLE = "prove-whole"
PROVE_PREPARE = "prove-prepare"
MSM_WINDOWS = "msm-windows"
MSM_POINTS = "msm-points"
REDUCE_ASSEMBLE = "reduce-assemble"
REDUCE_COLLECT = "reduce-collect"
VERIFY_WRITE = "verify-write"
NTT_TRANSPOSE = "ntt-transpose"
NTT_COLUMNS = "ntt-columns"
NTT_ROWS = "ntt-rows"
NTT_ROWS_INVERSE = "ntt-rows-inverse"
NTT_ROWS_FORWARD = "ntt-rows-forward"
NTT_COLLECT = "ntt-collect"
PLAN_KEY = "plan-key"
CHECK_OUTPUTS = "check-outputs"

PROVER_TASKS = frozenset({
    PROVE_WHOLE, PROVE_PREPARE, MSM_WINDOWS, MSM_POINTS, REDUCE_ASSEMBLE, REDUCE_COLLECT, VERIFY_WRITE,
    NTT_TRANSPOSE, NTT_COLUMNS, NTT_ROWS, NTT_ROWS_INVERSE, NTT_ROWS_FORWARD, NTT_COLLECT, PLAN_KEY, CHECK_OUTPUTS,
})
"""Every task above: proof work, which never runs on a witness worker. Those placed strictly
follow the provers there are (:mod:`distprove.cluster.provers`)."""
