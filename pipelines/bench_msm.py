"""GPU MSM timings against the XYZZ floor (called by pipelines/bench_kernels.py, or run directly).

Bases: a table of 1024 distinct points indexed at random (the same random-access pattern as a
real key); scalars: uniform below r (every window busy; the worst case for Pippenger). Each row
times msm_windows over all windows (device work plus reading back and converting W points), the
median of a few repetitions after a warm-up, and gives the floor: n * W mixed additions of
~10 Fq-mul equivalents (G1) or ~30 (G2, three Fq products per Fq2 product) at the planning rate
of 41 G Fq mul/s (CIOS products, the planning floor; the FP64-pipe product the kernels use is
faster). A window-width sweep at the largest G1 size checks
pick_window. The constant-work rows (docs/CONSTANT_WORK.md) time ``constant_work=True`` against the default mode
on uniform and on witness-like scalars (45% zero, 45% one, 10% uniform), after checking that
both modes give the same window sums. ``--affine-rounds table,0,1,2,3`` times only the main cases
with each number of batch-affine pair rounds (``distprove.msm.affine-rounds``; "table" is the
built-in plan; rows tagged ``affine-R`` with the rounds that ran, phases with ``pairs``), after
checking that each gives the window sums of R = 0, and the witness-like cases with table and 0;
``--sorts radix,atomic`` the same with each digit sort (``distprove.msm.sort``). ``--reduce`` and
``--pair-k`` time host-side launch constants (the window reduction's geometry, the pair rounds'
most jobs per thread) against the built-in values, window sums checked equal (host_settings).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any, Iterator

import benchlib
import numpy as np

FQ_MUL_PER_S = 41e9
MADD_MULS = {"G1": 10, "G2": 30}
CASES = [("G1", 20), ("G1", 21), ("G1", 22), ("G1", 24), ("G2", 20), ("G2", 21), ("G2", 22)]
SMALL_CASES = [("G1", 13), ("G2", 13), ("G1", 16), ("G2", 16)]
"""Small MSMs (a fixture circuit's proof), timed in the default build only: latency, not throughput."""
SWEEP = [("G1", 16, range(10, 17)), ("G1", 18, range(12, 18)), ("G1", 20, range(12, 18)),
         ("G1", 22, range(14, 19)), ("G1", 24, range(15, 20)), ("G2", 18, range(11, 17)),
         ("G2", 20, range(12, 18)), ("G2", 22, range(14, 18))]
"""Window-width sweeps (group, log2 size, widths) that the choice of pick_window is read from."""
CHECK = (18, 13)
"""log2 size and window width of the cross-build equality check."""
CW_CASES = [("G1", 20), ("G1", 22), ("G2", 20)]
"""(group, log2 size) of the constant-work rows."""
PRECOMPUTED_CASES = [("G1", 22), ("G1", 24), ("G2", 22)]
"""(group, log2 size) of the precomputed-multiples rows (distprove.msm.precompute): the merged MSM
at gpu.msm.merged_width beside the window-range MSM, timed alternating."""
WITNESS_CASES = [("G1", 16), ("G1", 20), ("G1", 22), ("G1", 24), ("G2", 20), ("G2", 22)]
"""(group, log2 size) timed on witness-like scalars (45% zero, 45% one, 10% uniform)."""


VARIANTS = {
    "default": (),
    "cios": ("-DDP_CIOS_MUL",),
    "ptx_mul": ("-DDP_CIOS_MUL", "-DDP_PTX_MUL"),
    "sqr_mul": ("-DDP_CIOS_MUL", "-DDP_SQR_MUL"),
    "g2_acc3": ("-DDP_G2_ACC_MIN_BLOCKS=3",),
    "g2_acc4": ("-DDP_G2_ACC_MIN_BLOCKS=4",),
    "g2_tail3": ("-DDP_G2_TAIL_MIN_BLOCKS=3",),
    "g1_acc3": ("-DDP_G1_ACC_MIN_BLOCKS=3",),
    "g1_sel0": ("-DDP_G1_SEL_MIN_BLOCKS=0",),
    "g1_acc4": ("-DDP_G1_ACC_MIN_BLOCKS=4",),
    "g1_acc6": ("-DDP_G1_ACC_MIN_BLOCKS=6",),
    "g1_mul_inline": ("-DDP_G1_MUL_INLINE",),
    "g2_mul_inline": ("-DDP_FQ2_MUL_INLINE",),
    "g1_pair4": ("-DDP_G1_PAIR_MIN_BLOCKS=4",),
    "g1_pair5": ("-DDP_G1_PAIR_MIN_BLOCKS=5",),
    "g2_pair3": ("-DDP_G2_PAIR_MIN_BLOCKS=3",),
    "g1_unstaged": ("-DDP_G1_PAIR_STAGE=0",),
    "g1_pair64_7": ("-DDP_PAIR_BLOCK=64", "-DDP_G1_PAIR_MIN_BLOCKS=7"),
    "g1_pair64": ("-DDP_PAIR_BLOCK=64",),
    "g2_unstaged": ("-DDP_G2_PAIR_STAGE=0",),
    "g2_tail_inline": ("-DDP_G2_TAIL_INLINE",),
    "mul_single": ("-DDP_MUL_SINGLE",),
}
"""Builds of msm.cu (NVRTC options, beside the module's own), each the default's alternative
for one decision, timed beside it: the default (FP64-pipe Fq products, field.cuh), CIOS products
(the device default where the FP64 product is not), CIOS as PTX carry chains, CIOS with squares
by the general product instead of mont_sqr8; G2's accumulation held to 3 or 4 blocks of 128
threads per SM, G2's fold and first reduction level to 3, G1's accumulation to 3 (176 registers
unbounded with paired products: 2 blocks per SM), 4 or 6, G1's
accumulation after the pair rounds unbounded (the default holds it to 3, msm_affine.cu), G1's
pair rounds to 4 or 5 (register bounds: the FP64 product lifted G1's kernels from ~112
to ~166 registers, 3 blocks per SM); G1's Fq products inline and Fq2's products inline (instead
of calls to the out-of-line Fq product, curve.cuh and field.cuh); G1's and G2's pair rounds
reading each point from global memory where it is used (msm_affine.cu PairDirect: no
shared-memory stage); G1's pair blocks of 64 threads, unbounded (166
registers: 12 warps per SM as with 128) and held to 7 per SM (ptxas then takes 128 registers);
G2's fold, window reductions and block trees with every addition inline (curve.cuh
DP_G2_TAIL_INLINE); each Fq product its own call (field.cuh DP_MUL_SINGLE, instead of
independent products sharing one body)."""


def _load(gmsm: Any, gcompile: Any, variant: str, results: dict) -> None:
    gmsm.KERNEL_OPTIONS = VARIANTS[variant]
    t0 = time.perf_counter()
    gmsm._module()
    load_s = time.perf_counter() - t0
    how = [t.source for t in gcompile.load_timings() if t.name == "msm"][-1:]
    print(f"msm module ({variant}) load: {load_s:.1f} s {how}", flush=True)
    results.setdefault("msm_module_load", {})[variant] = {"seconds": load_s, "how": how}


def parse_cases(spec: str) -> list[tuple[str, int, int]]:
    """``"G1:24:16-19,G2:20:15"`` -> [(group, log2 size, width), ...], a range of widths inclusive."""
    out = []
    for item in filter(None, spec.split(",")):
        name, lg, widths = item.split(":")
        lo, _, hi = widths.partition("-")
        out += [(name, int(lg), c) for c in range(int(lo), int(hi or lo) + 1)]
    return out


def run(results: dict, reps: int = 3, variants: tuple[str, ...] = tuple(VARIANTS), sweep: bool = True,
        constant_work: bool = True, groups_only: tuple[str, ...] = ("G1", "G2"),
        cases: list[tuple[str, int, int]] | None = None, witness: bool = False) -> None:
    """Append one row per (variant, group, size, c) with median ms, floor ms and phase times.

    The default build runs every case (and the window-width sweep when ``sweep``, and the
    constant-work rows of :data:`CW_CASES` when ``constant_work``); each other variant first
    checks that its window sums equal the default build's on 2^18 points of each group, then
    runs the main cases. ``groups_only`` keeps the cases of those groups. ``cases`` (group, log2
    size, width) replaces every build's plan: only those rows, no witness-like or constant-work rows;
    with ``witness`` those rows take witness-like scalars (:func:`witness_like`) instead of uniform.
    """
    import cupy

    from distprove.backends.gpu import compile as gcompile
    from distprove.backends.gpu import msm as gmsm
    from distprove.backends.gpu.msm import msm_windows, pick_window
    from distprove.stages.msm import num_windows

    groups = benchlib.groups()
    host, scalars_all, idx_all, tables = benchlib.msm_inputs(groups, max([lg for _, lg, *_ in (cases or CASES)] + [CHECK[0]]), 1)
    check_n, check_c = 1 << CHECK[0], CHECK[1]

    def check_sums(name: str) -> list:
        bases = tables[name][idx_all[:check_n]]
        return msm_windows(groups[name], bases, scalars_all[:check_n], check_c, 0, num_windows(check_c))

    # witness-like scalars, made once: the --witness case rows, or the default build's witness rows
    wit = cupy.asarray(witness_like(host, np.random.default_rng(3))) if witness or not cases else None
    case_scalars, case_label = (wit, "witness") if cases and witness else (scalars_all, "")
    try:
        _load(gmsm, gcompile, "default", results)
        reference = {name: check_sums(name) for name in groups}
        for variant in variants:
            if variant != "default":
                _load(gmsm, gcompile, variant, results)
                for name, want in reference.items():
                    same = check_sums(name) == want
                    results.setdefault("msm_variant_equal", {})[f"{variant} {name}"] = same
                    print(f"{variant} {name}: window sums equal to the default build: {same}", flush=True)
            if cases:
                plan = [case for case in cases if case[0] in groups_only]
            else:
                main = CASES + (SMALL_CASES if variant == "default" else [])
                plan = [(name, lg, pick_window(1 << lg, groups[name])) for name, lg in main if name in groups_only]
                if sweep and variant == "default":
                    plan += [(name, lg, c) for name, lg, widths in SWEEP for c in widths
                             if (name, lg, c) not in plan and name in groups_only]
            for name, lg, c in plan:
                _time_case(results, variant, groups[name], name, lg, c, tables[name][idx_all[: 1 << lg]],
                           case_scalars[: 1 << lg], reps, label=case_label)
            if variant == "default" and not cases:
                for name, lg in [(n, lg) for n, lg in WITNESS_CASES if n in groups_only]:
                    _time_case(results, variant, groups[name], name, lg, pick_window(1 << lg, groups[name]),
                               tables[name][idx_all[: 1 << lg]], wit[: 1 << lg], reps, label="witness")
            if variant == "default" and not cases:
                precomputed(results, [(name, lg, gmsm.merged_width(1 << lg, groups[name]))
                                      for name, lg in PRECOMPUTED_CASES if name in groups_only], reps)
            if constant_work and variant == "default" and not cases:
                _constant_work_rows(results, groups, tables, idx_all, host, reps)
    finally:
        gmsm.KERNEL_OPTIONS = VARIANTS["default"]


def _compare(results: dict, equal_key: str, reference: dict, settings: list[tuple[str, dict]],
             cases: list[tuple[str, int, Any, str]], inputs: tuple, reps: int, after: Any = None) -> None:
    """For each (group name, log2 n, scalars, label) of ``cases``, on the bases of ``inputs`` (from
    :func:`_main_and_witness_cases`): the window sums under every
    (tag, dask config) of ``settings`` must equal those under ``reference`` (recorded in
    ``results[equal_key]``); then each is timed, one row per setting tagged ``tag``, and
    ``after(rows, tag)`` may annotate the rows just added."""
    import cupy
    import dask

    from distprove.backends.gpu.msm import msm_windows, pick_window
    from distprove.stages.msm import num_windows

    groups = benchlib.groups()
    _, _, idx_all, tables = inputs
    for name, lg, scalars, label in cases:
        g, n = groups[name], 1 << lg
        c = pick_window(n, g)
        bases = tables[name][idx_all[:n]]

        def sums(cfg: dict) -> list:
            with dask.config.set(cfg):
                return msm_windows(g, bases, scalars[:n], c, 0, num_windows(c))

        want = sums(reference)
        for tag, cfg in settings:
            try:
                same = sums(cfg) == want
            except cupy.cuda.memory.OutOfMemoryError as exc:
                print(f"{name} 2^{lg} {tag}: out of memory ({exc})", flush=True)
                continue
            results.setdefault(equal_key, {})[f"{name} 2^{lg} {label or 'uniform'} {tag}"] = same
            if not same:
                print(f"{name} 2^{lg} {tag}: window sums DIFFER from the reference", flush=True)
                continue
            before = len(results["rows"])
            with dask.config.set(cfg):
                _time_case(results, tag, g, name, lg, c, bases, scalars[:n], reps, label=label)
            if after is not None:
                after(results["rows"][before:], tag)


def _main_and_witness_cases(groups_only: tuple[str, ...], extra: list[tuple[str, int]] = ()) -> tuple:
    """(inputs, uniform cases, witness-like cases) as :func:`_compare` takes them: :data:`CASES`
    (and ``extra``) on uniform scalars, :data:`WITNESS_CASES` on witness-like ones."""
    import cupy

    inputs = benchlib.msm_inputs(benchlib.groups(), max(lg for _, lg in CASES), 1)
    host, scalars_all = inputs[:2]
    wit = cupy.asarray(witness_like(host, np.random.default_rng(3)))
    uniform = [(name, lg, scalars_all, "") for name, lg in list(extra) + CASES if name in groups_only]
    witness = [(name, lg, wit, "witness") for name, lg in WITNESS_CASES if name in groups_only]
    return inputs, uniform, witness


def affine(results: dict, rounds: tuple[int | str, ...] = ("table", 0, 1, 2, 3), reps: int = 3,
           groups_only: tuple[str, ...] = ("G1", "G2")) -> None:
    """Time :data:`CASES` (uniform scalars, the measured window width) with each number of pair
    rounds in ``rounds`` ("table": AFFINE_ROUNDS' plan, which the device may cut; an integer: that
    many, always run), one row per (case, R) tagged ``affine-R`` with the rounds that ran; before
    timing a case, its window sums with every R are checked equal to R = 0's (``msm_affine_equal``).
    Then :data:`WITNESS_CASES` on witness-like scalars with "table" against 0."""
    from distprove.backends.gpu.msm import default_scratch

    def setting(r: int | str) -> tuple[str, dict]:
        return f"affine-{r}", {"distprove.msm.affine-rounds": None if r == "table" else r}

    planned = {setting(r)[0]: r for r in (*rounds, "table", 0)}

    def ran(rows: list, tag: str) -> None:
        done = int(default_scratch().take("pair_plan", 1)[0])
        for row in rows:
            row["affine_rounds"] = planned[tag]
            row["rounds_ran"] = done if "pairs" in row["phases_ms"] else 0
            print(f"  rounds run: {row['rounds_ran']}", flush=True)

    inputs, uniform, witness = _main_and_witness_cases(groups_only)
    ref = setting(0)[1]
    _compare(results, "msm_affine_equal", ref, [setting(r) for r in rounds], uniform, inputs, reps, ran)
    _compare(results, "msm_affine_equal", ref, [setting("table"), setting(0)], witness, inputs, reps, ran)


def builds(results: dict, names: tuple[str, ...], reps: int = 3, groups_only: tuple[str, ...] = ("G1", "G2")) -> None:
    """Time :data:`CASES` and :data:`WITNESS_CASES` with each build of :data:`VARIANTS` in ``names``
    (through ``distprove.msm.kernel-options``, so every MSM of a case, pair rounds included, runs
    that build), rows tagged with the build's name, after checking that each gives the default
    build's window sums on that case (``msm_build_equal``)."""
    settings = [(name, {"distprove.msm.kernel-options": list(VARIANTS[name])}) for name in names]
    inputs, uniform, witness = _main_and_witness_cases(groups_only)
    _compare(results, "msm_build_equal", {"distprove.msm.kernel-options": []}, settings, uniform + witness, inputs, reps)


def sorts(results: dict, kinds: tuple[str, ...] = ("radix", "atomic"), reps: int = 3,
          groups_only: tuple[str, ...] = ("G1", "G2")) -> None:
    """Time :data:`CASES` (with G1 2^16 and 2^18) and :data:`WITNESS_CASES` with each digit sort of
    ``kinds`` (``distprove.msm.sort``), rows tagged ``sort-<kind>``, after checking that each gives
    the counting sort's window sums (``msm_sort_equal``)."""
    settings = [(f"sort-{k}", {"distprove.msm.sort": k}) for k in kinds]
    inputs, uniform, witness = _main_and_witness_cases(groups_only, [("G1", 16), ("G1", 18)])
    ref = {"distprove.msm.sort": "atomic"}
    _compare(results, "msm_sort_equal", ref, settings, uniform + witness, inputs, reps)


TUNE_CASES = [("G1", 20), ("G1", 21), ("G1", 22), ("G2", 20), ("G2", 21), ("G2", 22)]
"""(group, log2 size) of the launch-parameter sweep (the sizes of 1-3 M constraint proofs)."""
TUNE_GRID = {"SLICE_LEN": (32, 64, 96, 128), "REDUCE_SEG": (8, 16), "FOLD_LEN": (32,)}
"""Host-side launch parameters of gpu/msm.py swept by :func:`tune` (no recompilation needed).
SLICE_LEN is the target that gpu_msm.slice_length fits to whole waves; FOLD_LEN 64 and REDUCE_SEG
32 are left out, slower at every size of TUNE_CASES."""


def tune(results: dict, reps: int = 3) -> None:
    """Time every combination of :data:`TUNE_GRID` on :data:`TUNE_CASES` (uniform scalars, the
    measured window width), after checking on 2^16 points that each combination gives the window
    sums of the defaults; rows are named ``msm-tune`` with the parameters in ``params``."""
    import itertools

    from distprove.backends.gpu import msm as gmsm
    from distprove.stages.msm import num_windows

    groups = benchlib.groups()
    _, scalars, idx, tables = benchlib.msm_inputs(groups, max(lg for _, lg in TUNE_CASES), 5)
    defaults = {k: getattr(gmsm, k) for k in TUNE_GRID}
    default_params = {k: (v["G1"] if k == "SLICE_LEN" else v) for k, v in defaults.items()}
    combos = [dict(zip(TUNE_GRID, vals)) for vals in itertools.product(*TUNE_GRID.values())]
    check_n, check_c = 1 << 16, 13
    try:
        want = {name: gmsm.msm_windows(g, tables[name][idx[:check_n]], scalars[:check_n], check_c, 0, num_windows(check_c))
                for name, g in groups.items()}
        for combo in combos:
            for k, v in combo.items():
                setattr(gmsm, k, {"G1": v, "G2": v} if k == "SLICE_LEN" else v)
            same = all(gmsm.msm_windows(g, tables[name][idx[:check_n]], scalars[:check_n], check_c, 0,
                                        num_windows(check_c)) == want[name] for name, g in groups.items())
            results.setdefault("msm_tune_equal", {})[repr(combo)] = same
            if not same:
                print(f"tune {combo}: window sums DIFFER from the defaults", flush=True)
                continue
            for name, lg in TUNE_CASES:
                n, g = 1 << lg, groups[name]
                c = gmsm.pick_window(n, g)
                bases = tables[name][idx[:n]]
                times = benchlib.wall_ms(lambda: gmsm.msm_windows(g, bases, scalars[:n], c, 0, num_windows(c)), reps)
                phases: dict[str, float] = {}
                gmsm.msm_windows(g, bases, scalars[:n], c, 0, num_windows(c), phases=phases)
                ms = statistics.median(times)
                results["rows"].append({"name": f"msm-tune {name}", "log_n": lg, "c": c, "median_ms": ms,
                                        "times_ms": times, "params": combo, "phases_ms": phases})
                print(f"tune {name} 2^{lg} c={c} {combo}: {ms:.2f} ms "
                      f"[{' '.join(f'{k}={v:.1f}' for k, v in phases.items())}]", flush=True)
    finally:
        for k, v in defaults.items():
            setattr(gmsm, k, v)
    best: dict[str, dict] = {}
    for row in results["rows"]:
        if row["name"].startswith("msm-tune"):
            key = f"{row['name'].split()[-1]} 2^{row['log_n']}"
            if key not in best or row["median_ms"] < best[key]["median_ms"]:
                best[key] = row
    results["msm_tune_best"] = {k: {"params": r["params"], "median_ms": r["median_ms"]} for k, r in best.items()}
    for k, r in best.items():
        base = next(x["median_ms"] for x in results["rows"] if x["name"].startswith("msm-tune")
                    and f"{x['name'].split()[-1]} 2^{x['log_n']}" == k and x["params"] == default_params)
        print(f"tune best {k}: {r['params']} {r['median_ms']:.2f} ms (defaults {base:.2f} ms)", flush=True)


REDUCE_CASES = [("G1", 20), ("G1", 22), ("G1", 24), ("G2", 20), ("G2", 22)]
"""(group, log2 size) of :func:`host_settings` (the window-reduction and pair-job sweeps)."""


def host_settings(results: dict, equal_key: str, settings: list[tuple[str, dict[str, Any]]], reps: int = 3) -> None:
    """Time :data:`REDUCE_CASES` (uniform scalars, pick_window's width) with each (tag, overrides) of
    ``settings``, the overrides being host-side constants of distprove/backends/gpu/msm.py (no
    recompilation), rows tagged ``tag``, after checking that each gives the built-in values' window
    sums (``results[equal_key]``)."""
    from distprove.backends.gpu import msm as gmsm
    from distprove.stages.msm import num_windows

    groups = benchlib.groups()
    _, scalars, idx_all, tables = benchlib.msm_inputs(groups, max(lg for _, lg in REDUCE_CASES), 1)
    built_in = {k: getattr(gmsm, k) for _, over in settings for k in over}

    def use(values: dict[str, Any]) -> None:
        for k, v in values.items():
            setattr(gmsm, k, v)

    try:
        for name, lg in REDUCE_CASES:
            g, n = groups[name], 1 << lg
            c = gmsm.pick_window(n, g)
            bases = tables[name][idx_all[:n]]
            use(built_in)
            want = gmsm.msm_windows(g, bases, scalars[:n], c, 0, num_windows(c))
            for tag, over in settings:
                use({**built_in, **over})
                same = gmsm.msm_windows(g, bases, scalars[:n], c, 0, num_windows(c)) == want
                results.setdefault(equal_key, {})[f"{name} 2^{lg} {tag}"] = same
                if not same:
                    print(f"{name} 2^{lg} {tag}: window sums DIFFER from the built-in settings'", flush=True)
                    continue
                _time_case(results, tag, g, name, lg, c, bases, scalars[:n], reps)
    finally:
        use(built_in)


@contextlib.contextmanager
def _reduce_blocks(gmsm: Any, blocks: int | None) -> Iterator[None]:
    """gpu.msm's reduction with ``blocks`` second-level blocks for a one-window MSM (REDUCE_GROUPS
    and REDUCE_BLOCKS both set; None: the built-in geometry), restored after."""
    saved = gmsm.REDUCE_GROUPS, gmsm.REDUCE_BLOCKS
    if blocks is not None:
        gmsm.REDUCE_GROUPS = gmsm.REDUCE_BLOCKS = blocks
    try:
        yield
    finally:
        gmsm.REDUCE_GROUPS, gmsm.REDUCE_BLOCKS = saved


def merged(results: dict, specs: list[tuple[str, int, int]], reps: int = 3, groups: tuple[int, ...] = ()) -> None:
    """Emulate precomputed window multiples (every window's digits in one set of buckets) without
    building them: for (group, log2 n, c), window 0 of an MSM over E = ceil(254 / c) * n points
    (bases drawn from the 1024-point table, uniform scalars), so the sort, pair rounds,
    accumulation and one bucket reduction see E entries in 2^(c-1) buckets, as a merged MSM of n
    points with E / n stored multiples per base would (from c = 20 the radix sort takes three
    passes; each row's sum is checked against the counting sort's). Each of ``groups`` (default:
    the built-in geometry) is a number of blocks for the one window's second reduction level
    (:func:`_reduce_blocks`). Rows are tagged ``merged``; their ``madds`` is E."""
    import cupy
    import dask

    from distprove.backends.gpu import msm as gmsm
    from distprove.backends.gpu.msm import msm_windows

    named = benchlib.groups()
    rng = np.random.default_rng(7)
    for name, lg, c in specs:
        g = named[name]
        w = -(-254 // c)
        e = w << lg
        table = cupy.asarray(benchlib.base_table(g))
        bases = table[cupy.random.randint(0, benchlib.TABLE, e)]
        scalars = cupy.empty((e, 8), dtype=cupy.uint32)
        step = 1 << 24  # host memory for one chunk at a time
        for a in range(0, e, step):
            scalars[a:a + step] = cupy.asarray(benchlib.uniform_scalars(rng, min(step, e - a)))
        with dask.config.set({"distprove.msm.sort": "atomic"}):  # the counting sort's sum: the reference
            want = msm_windows(g, bases, scalars, c, 0, 1)
        for reduce_groups in groups or (None,):
            with _reduce_blocks(gmsm, reduce_groups):
                if msm_windows(g, bases, scalars, c, 0, 1) != want:
                    print(f"msm {name} 2^{lg} c={c} merged, {reduce_groups} reduction blocks: sum DIFFERS from the "
                          "counting sort's", flush=True)
                    continue
                times = benchlib.wall_ms(lambda: msm_windows(g, bases, scalars, c, 0, 1), reps)
                phases: dict[str, float] = {}
                msm_windows(g, bases, scalars, c, 0, 1, phases=phases)
                ms = statistics.median(times)
                results["rows"].append({"name": f"msm {name} c={c} merged", "log_n": lg, "c": c, "windows": w,
                                        "median_ms": ms, "times_ms": times, "madds": e, "phases_ms": phases,
                                        "scalars": "uniform", "merged": True, "reduce_groups": reduce_groups})
                ph = " ".join(f"{k}={v:.1f}" for k, v in phases.items())
                print(f"msm {name} 2^{lg} c={c} merged ({w} windows, {e} entries, {reduce_groups} reduction "
                      f"blocks): {ms:.1f} ms [{ph}]", flush=True)
        del bases, scalars
        cupy.get_default_memory_pool().free_all_blocks()


def precomputed(results: dict, specs: list[tuple[str, int, int]], reps: int = 3, groups: tuple[int, ...] = ()) -> None:
    """The precomputed-multiples MSM itself (gpu.msm.msm_merged over precompute_multiples' table)
    against the window-range MSM at the size's own width, on the same bases (the 1024-point table
    indexed at random) and uniform scalars: for (group, log2 n, c), the table is built once (its
    seconds in the row), the merged sum checked against the window MSM's combined sum, then both
    timed, alternating. ``groups`` as for :func:`merged`. Rows are tagged ``precomputed`` and
    ``window-range``."""
    import cupy

    from distprove.backends.gpu import msm as gmsm
    from distprove.stages.msm import combine, num_windows

    named = benchlib.groups()
    for name, lg, c in specs:
        g = named[name]
        _, scalars, idx, tables = benchlib.msm_inputs({name: g}, lg, 11)
        bases = cupy.ascontiguousarray(tables[name][idx])
        t0 = time.perf_counter()
        table = gmsm.precompute_multiples(g, bases, c)
        cupy.cuda.Device().synchronize()
        build_s = time.perf_counter() - t0
        c0 = gmsm.pick_window(1 << lg, g)
        want = combine(g, dict(enumerate(gmsm.msm_windows(g, bases, scalars, c0, 0, num_windows(c0)))), c0)
        for reduce_groups in groups or (None,):
            with _reduce_blocks(gmsm, reduce_groups):
                if gmsm.msm_merged(g, table, scalars, c) != want:
                    print(f"msm {name} 2^{lg} c={c} precomputed: sum DIFFERS from the window-range MSM's", flush=True)
                    continue
                merged_t, window_t = [], []
                for _ in range(reps):
                    merged_t += benchlib.wall_ms(lambda: gmsm.msm_merged(g, table, scalars, c), 1)
                    window_t += benchlib.wall_ms(lambda: gmsm.msm_windows(g, bases, scalars, c0, 0, num_windows(c0)), 1)
                phases: dict[str, float] = {}
                gmsm.msm_merged(g, table, scalars, c, phases=phases)
                for tag, cc, times, ph in (("precomputed", c, merged_t, phases), ("window-range", c0, window_t, {})):
                    madds = (1 << lg) * num_windows(cc)
                    results["rows"].append({"name": f"msm {name} c={cc} {tag}", "log_n": lg, "c": cc,
                                            "median_ms": statistics.median(times), "times_ms": times,
                                            "floor_ms": madds * MADD_MULS[name] / FQ_MUL_PER_S * 1e3, "madds": madds,
                                            "phases_ms": ph, "scalars": "uniform", "reduce_groups": reduce_groups,
                                            "table_bytes": int(table.nbytes), "table_build_s": build_s})
                ph = " ".join(f"{k}={v:.1f}" for k, v in phases.items())
                print(f"msm {name} 2^{lg} precomputed c={c} ({num_windows(c)} windows, table "
                      f"{table.nbytes / 2**30:.1f} GiB built in {build_s:.2f} s, {reduce_groups} reduction blocks): "
                      f"{statistics.median(merged_t):.1f} ms [{ph}] against c={c0} window-range "
                      f"{statistics.median(window_t):.1f} ms", flush=True)
        del table, bases, scalars
        cupy.get_default_memory_pool().free_all_blocks()


def precomputed_chunks(results: dict, specs: list[tuple[str, int, int]], chunks: tuple[int, ...], reps: int = 5) -> None:
    """The merged MSM over k tables of n / k points each (one per chunk of the bases, the same
    memory as one table), started on k streams with a scratch each and summed on the host,
    against one table, alternating: whether one chunk's digit sort (memory-bound) overlaps another
    chunk's pair rounds (compute-bound) by more than the extra bucket reductions cost. The sums
    are checked equal first. Rows are tagged ``precomputed x k``."""
    import cupy

    from distprove import curve
    from distprove.backends.gpu import msm as gmsm

    named = benchlib.groups()
    for name, lg, c in specs:
        g = named[name]
        n = 1 << lg
        _, scalars, idx, tables = benchlib.msm_inputs({name: g}, lg, 11)
        bases = cupy.ascontiguousarray(tables[name][idx])
        whole = gmsm.precompute_multiples(g, bases, c)
        want = gmsm.msm_merged(g, whole, scalars, c)
        for k in chunks:
            step = -(-n // k)
            parts = [(gmsm.precompute_multiples(g, cupy.ascontiguousarray(bases[a:a + step]), c),
                      cupy.ascontiguousarray(scalars[a:a + step]), cupy.cuda.Stream(non_blocking=True), gmsm.MsmScratch())
                     for a in range(0, n, step)]

            def run() -> Any:
                ready = cupy.cuda.Event()
                ready.record()
                started = []
                for table, sc, stream, scratch in parts:
                    stream.wait_event(ready)
                    started.append(gmsm.msm_merged_start(g, table, sc, c, scratch, stream))
                total = None
                for wait in started:
                    total = curve.add(g, total, wait())
                return total

            if run() != want:
                print(f"msm {name} 2^{lg} c={c} precomputed x {k}: sum DIFFERS from one table's", flush=True)
                continue
            chunked_t, one_t = [], []
            for _ in range(reps):
                chunked_t += benchlib.wall_ms(run, 1)
                one_t += benchlib.wall_ms(lambda: gmsm.msm_merged(g, whole, scalars, c), 1)
            for tag, times in ((f"precomputed x {k}", chunked_t), ("precomputed x 1", one_t)):
                results["rows"].append({"name": f"msm {name} c={c} {tag}", "log_n": lg, "c": c, "chunks": k,
                                        "median_ms": statistics.median(times), "times_ms": times, "scalars": "uniform"})
            print(f"msm {name} 2^{lg} c={c} precomputed in {k} chunks on {k} streams: "
                  f"{statistics.median(chunked_t):.1f} ms against one table {statistics.median(one_t):.1f} ms", flush=True)
            del parts
            cupy.get_default_memory_pool().free_all_blocks()
        del whole, bases, scalars
        cupy.get_default_memory_pool().free_all_blocks()


def witness_like(uniform: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A copy of the (n, 8) scalar limbs with 45% zeros and 45% ones (as in SHA-256-like witnesses)."""
    out = uniform.copy()
    u = rng.random(out.shape[0])
    out[u < 0.9] = 0
    out[(u >= 0.45) & (u < 0.9), 0] = 1
    return out


def _constant_work_rows(results: dict, groups: dict, tables: dict, idx_all: Any, host: np.ndarray,
                        reps: int) -> None:
    """Default vs constant-work timings of CW_CASES on uniform and witness-like scalars."""
    import cupy

    from distprove.backends.gpu import msm as gmsm
    from distprove.stages.msm import num_windows

    t0 = time.perf_counter()
    gmsm._cw_module()
    print(f"msm_cw module load: {time.perf_counter() - t0:.1f} s", flush=True)
    rng = np.random.default_rng(2)
    for name, lg in CW_CASES:
        n = 1 << lg
        g = groups[name]
        c = gmsm.pick_window(n, g)
        bases = tables[name][idx_all[:n]]
        witness = witness_like(host[:n], rng)
        for label, scal in (("uniform", cupy.asarray(host[:n])), ("witness", cupy.asarray(witness))):
            same = gmsm.msm_windows(g, bases, scal, c, 0, num_windows(c), constant_work=True) == gmsm.msm_windows(
                g, bases, scal, c, 0, num_windows(c))
            results.setdefault("msm_cw_equal", {})[f"{name} 2^{lg} {label}"] = same
            print(f"{name} 2^{lg} {label}: constant-work sums equal to the default mode's: {same}", flush=True)
            for cw in (False, True):
                _time_case(results, "default", g, name, lg, c, bases, scal, reps, constant_work=cw, label=label)


def _time_case(results: dict, variant: str, g: Any, name: str, lg: int, c: int, bases: Any, scalars: Any,
               reps: int, constant_work: bool = False, label: str = "") -> None:
    import cupy

    from distprove.backends.gpu.msm import msm_windows
    from distprove.stages.msm import num_windows

    n = 1 << lg
    w = num_windows(c)
    try:
        times = benchlib.wall_ms(lambda: msm_windows(g, bases, scalars, c, 0, w, constant_work=constant_work), reps)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        print(f"{name} 2^{lg} c={c}: out of memory ({exc})", flush=True)
        return
    ms = statistics.median(times)
    phases: dict[str, float] = {}
    msm_windows(g, bases, scalars, c, 0, w, phases=phases, constant_work=constant_work)
    floor = n * w * MADD_MULS[name] / FQ_MUL_PER_S * 1e3
    tag = f"{variant}{' constant-work' if constant_work else ''}{' ' + label if label else ''}"
    row = {"name": f"msm {name} c={c} {tag}", "log_n": lg, "c": c, "windows": w, "median_ms": ms,
           "times_ms": times, "floor_ms": floor, "madds": n * w, "phases_ms": phases,
           "constant_work": constant_work, "scalars": label or "uniform"}
    results["rows"].append(row)
    ph = " ".join(f"{k}={v:.1f}" for k, v in phases.items())
    print(f"msm {name} 2^{lg} c={c} {tag}: {ms:.1f} ms (floor {floor:.1f} ms, x{ms / floor:.2f}) [{ph}]",
          flush=True)


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="GPU MSM benchmark")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list of " + ",".join(VARIANTS))
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-constant-work", action="store_true", help="skip the constant-work rows")
    ap.add_argument("--groups", default="G1,G2", help="groups whose cases run")
    ap.add_argument("--affine-rounds", default="",
                    help="comma list of pair-round counts, e.g. table,0,1,2,3 (table: the built-in plan): "
                         "time only the main cases with each, and the witness-like ones with table and 0")
    ap.add_argument("--builds", default="", help="comma list of VARIANTS: time only the main and witness-like "
                                                  "cases with each, sums checked against the default build")
    ap.add_argument("--sorts", default="", help="comma list of digit sorts (radix,atomic): time only the main "
                                                 "and witness-like cases with each")
    ap.add_argument("--cases", default="", help="only these rows, e.g. G1:24:16-19,G2:20:15 (group:log2 n:widths)")
    ap.add_argument("--merged", default="", help="emulate precomputed window multiples for these rows "
                                                 "(group:log2 n:widths, as --cases): merged()")
    ap.add_argument("--precomputed", default="", help="the precomputed-multiples MSM for these rows "
                                                      "(group:log2 n:widths) against the window-range MSM: precomputed()")
    ap.add_argument("--precomputed-chunks", default="", help="with --precomputed: the merged MSM over this many "
                                                             "tables of n / k points on k streams, e.g. 2,4: "
                                                             "precomputed_chunks()")
    ap.add_argument("--merged-groups", default="", help="second-level reduction blocks of the --merged rows' one "
                                                        "window (and --precomputed's), e.g. 8,64,256 (default: "
                                                        "REDUCE_GROUPS)")
    ap.add_argument("--reduce", default="", help="window-reduction geometries SEG:GROUPS, e.g. 16:4,16:32: "
                                                 "host_settings()")
    ap.add_argument("--pair-k", default="", help="most jobs per thread of a pair round (PAIR_K[1]), e.g. "
                                                 "512,2048,8192: host_settings()")
    ap.add_argument("--witness", action="store_true", help="--cases rows with witness-like scalars")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    import datetime

    r: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "git_commit": benchlib.git_commit(),
               **benchlib.device_info(), "rows": []}
    if a.reduce:
        geometries = [tuple(int(x) for x in gs.split(":")) for gs in a.reduce.split(",")]
        host_settings(r, "msm_reduce_equal", [(f"reduce-{s}-{g}", {"REDUCE_SEG": s, "REDUCE_GROUPS": g})
                                              for s, g in geometries])
    elif a.pair_k:
        host_settings(r, "msm_pair_k_equal", [(f"pair-k-{k}", {"PAIR_K": (16, int(k))}) for k in a.pair_k.split(",")])
    elif a.merged:
        merged(r, parse_cases(a.merged), groups=tuple(int(x) for x in a.merged_groups.split(",") if x))
    elif a.precomputed and a.precomputed_chunks:
        precomputed_chunks(r, parse_cases(a.precomputed), tuple(int(x) for x in a.precomputed_chunks.split(",")))
    elif a.precomputed:
        precomputed(r, parse_cases(a.precomputed), groups=tuple(int(x) for x in a.merged_groups.split(",") if x))
    elif a.builds:
        builds(r, tuple(a.builds.split(",")), groups_only=tuple(a.groups.split(",")))
    elif a.sorts:
        sorts(r, kinds=tuple(a.sorts.split(",")), groups_only=tuple(a.groups.split(",")))
    elif a.affine_rounds:
        affine(r, rounds=tuple(x if x == "table" else int(x) for x in a.affine_rounds.split(",")),
               groups_only=tuple(a.groups.split(",")))
    else:
        run(r, variants=tuple(a.variants.split(",")), sweep=not a.no_sweep, constant_work=not a.no_constant_work,
            groups_only=tuple(a.groups.split(",")), cases=parse_cases(a.cases) or None, witness=a.witness)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(r, fh, indent=1, default=str)
