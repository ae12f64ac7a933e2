// msm_cw.cu - the constant-work MSM mode (docs/CONSTANT_WORK.md). Needs field.cuh, curve.cuh
// and msm.cu (MsmEntry, the scalar helpers, DP_NO_ROW, and msm_accumulate_* unchanged). The
// host builds this module with -DDP_MSM_CW_ONLY, which drops msm.cu's default-only point kernels.
//
// WHAT THIS FILE DECIDES, AND WHY (host side: distprove/backends/gpu/msm.py, constant_work=True)
// * Every scalar emits one entry in every window of [lo, lo + nw), 0 and 1 included: digit
//   d != 0 goes to row (w - lo) * nb + |d| - 1 exactly as in msm.cu, digit 0 to a dummy row
//   nw * nb + (w - lo) * dummy + (i mod dummy), `dummy` a power of two. Dummy rows sit after
//   all bucket rows, so the entry array stays sorted by row, and the reduction (which reads
//   rows w * nb + j only) never sees them. Spreading scalar i over `dummy` rows spreads the
//   count/scatter atomics of the zero digits, which are most digits of a witness. There is
//   no ones path: a scalar 1 is digit +1 of window 0 like any other.
// * So the entry array always holds nw * n entries, and the slice and fold geometry, which the
//   host derives from nw * n, depends on n only. msm_accumulate_* is reused as it is (mixed
//   XYZZ additions, whose identity and doubling branches remain data-dependent).
// * The fold runs `len` iterations in every group (slots past the end and empty slots add
//   the identity) and the reduction and the group sums use the complete projective formulas
//   of curve.cuh, converting from and to XYZZ at loads and stores (a run boundary in the
//   fold costs one conversion: run boundaries are data).
// * Buckets are cleared in full (all four coordinates): the conversion to projective reads
//   X and ZZZ of an empty bucket as well as ZZ.
// * NOT constant-time: atomics, addresses, run boundaries and the accumulation's mixed-add
//   exceptions still depend on the scalars, and so does host-side code.

#ifndef DP_MSM_CW_CU
#define DP_MSM_CW_CU

// emit(row, neg) for every window of lo..lo+nw-1, zero digits included (to scalar i's dummy row).
template <typename Emit>
DP_INLINE void sc_for_each_window_cw(const u32 s[8], u32 i, u32 c, u32 lo, u32 nw, u32 nb, u32 dummy, Emit emit) {
    u32 spread = i & (dummy - 1u);
    sc_for_each_window(s, c, lo, nw, [&](u32 wi, u32 mag, bool neg) {
        emit(mag != 0u ? wi * nb + mag - 1u : nw * nb + wi * dummy + spread, neg);
    });
}

extern "C" __global__ void msm_count_cw(const u32* scalars, u32* counts, u32 n, u32 c, u32 lo, u32 nw, u32 nb,
                                        u32 dummy) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(scalars, i, s);
    sc_for_each_window_cw(s, i, c, lo, nw, nb, dummy, [&](u32 row, bool) { atomicAdd(&counts[row], 1u); });
}

// As msm_scatter: `cursor` holds each row's end and is left at each row's start.
extern "C" __global__ void msm_scatter_cw(const u32* scalars, u32* cursor, MsmEntry* entries, u32 n, u32 c, u32 lo,
                                          u32 nw, u32 nb, u32 dummy) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(scalars, i, s);
    sc_for_each_window_cw(s, i, c, lo, nw, nb, dummy,
                          [&](u32 row, bool neg) { msm_put_entry(cursor, entries, row, i, neg); });
}

template <typename F> DP_INLINE void msm_clear_cw_impl(Xyzz<F>* buckets, u32 rows) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) buckets[r] = xyzz_zero_t<F>();
}

// msm_fold_impl with a fixed trip count and complete additions: every group adds `len` slots
// (an empty or out-of-range slot adds the identity).
template <typename F>
DP_INLINE void msm_fold_cw_impl(const u32* in_rows, const Xyzz<F>* in_pts, u32 m, u32 len, u32 groups,
                                Xyzz<F>* buckets, u32* out_rows, Xyzz<F>* out_pts) {
    u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    bool last_level = groups == 1u;
    if (!last_level) {
        out_rows[2u * g] = DP_NO_ROW;
        out_rows[2u * g + 1u] = DP_NO_ROW;
    }
    u32 a = g * len;
    u32 cur = DP_NO_ROW;
    bool first = true;
    Proj<F> acc = proj_zero_t<F>();
    Proj<F> zero = proj_zero_t<F>();
    for (u32 i = a; i < a + len; i++) {
        bool inside = i < m;
        u32 j = inside ? i : m - 1u;
        u32 r = inside ? in_rows[j] : DP_NO_ROW;
        bool empty = r == DP_NO_ROW;
        if (!empty && r != cur) {
            if (cur != DP_NO_ROW) {
                Xyzz<F> acc_out = xyzz_from_proj_t(acc);
                if (first && !last_level) {
                    out_rows[2u * g] = cur;
                    out_pts[2u * g] = acc_out;
                } else {
                    buckets[cur] = acc_out;
                }
                first = false;
            }
            acc = zero;
            cur = r;
        }
        Proj<F> q = proj_from_xyzz_t(in_pts[j]);
        acc = pt_add(acc, empty ? zero : q);
    }
    if (cur == DP_NO_ROW) return;
    Xyzz<F> acc_out = xyzz_from_proj_t(acc);
    if (last_level) {
        buckets[cur] = acc_out;
    } else {
        u32 slot = first ? 2u * g : 2u * g + 1u;
        out_rows[slot] = cur;
        out_pts[slot] = acc_out;
    }
}

// The window reduction in one level on the complete formulas: each thread a running sum over
// seg buckets [a, a + seg) plus the multiple a * R; a depends on the launch geometry only,
// and a = 0 runs an empty ladder.
template <typename F>
DP_INLINE void msm_reduce_cw_impl(const Xyzz<F>* buckets, u32 nb, u32 seg, Xyzz<F>* partials, Proj<F>* sh) {
    u32 w = blockIdx.y;
    u32 a = (blockIdx.x * blockDim.x + threadIdx.x) * seg;
    u32 b = a + seg < nb ? a + seg : nb;
    Proj<F> mine = proj_zero_t<F>();
    if (a < b) {
        Proj<F> run = proj_zero_t<F>();
        Proj<F> tot = proj_zero_t<F>();
        for (u32 j = b; j > a; j--) {
            run = pt_add(run, proj_from_xyzz_t(buckets[(u64)w * nb + j - 1u]));
            tot = pt_add(tot, run);
        }
        mine = pt_add(tot, pt_mul_u32(run, a));
    }
    sh[threadIdx.x] = mine;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) partials[w * gridDim.x + blockIdx.x] = xyzz_from_proj_t(sh[0]);
}

// Block g sums in[g * count, (g+1) * count) into out[g], complete formulas.
template <typename F>
DP_INLINE void msm_sum_groups_cw_impl(const Xyzz<F>* in, u32 count, Xyzz<F>* out, Proj<F>* sh) {
    Proj<F> acc = proj_zero_t<F>();
    for (u32 i = threadIdx.x; i < count; i += blockDim.x)
        acc = pt_add(acc, proj_from_xyzz_t(in[(u64)blockIdx.x * count + i]));
    sh[threadIdx.x] = acc;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) out[blockIdx.x] = xyzz_from_proj_t(sh[0]);
}

#define DP_MSM_CW_ENTRIES(G, F)                                                                         \
    extern "C" __global__ void msm_clear_cw_##G(Xyzz<F>* buckets, u32 rows) {                           \
        msm_clear_cw_impl<F>(buckets, rows);                                                            \
    }                                                                                                   \
    extern "C" __global__ void msm_fold_cw_##G(const u32* in_rows, const Xyzz<F>* in_pts, u32 m, u32 len, \
                                               u32 groups, Xyzz<F>* buckets, u32* out_rows,             \
                                               Xyzz<F>* out_pts) {                                      \
        msm_fold_cw_impl<F>(in_rows, in_pts, m, len, groups, buckets, out_rows, out_pts);               \
    }                                                                                                   \
    extern "C" __global__ void msm_reduce_cw_##G(const Xyzz<F>* buckets, u32 nb, u32 seg, Xyzz<F>* partials) { \
        __shared__ Proj<F> sh[DP_TREE_MAX];                                                             \
        msm_reduce_cw_impl<F>(buckets, nb, seg, partials, sh);                                          \
    }                                                                                                   \
    extern "C" __global__ void msm_sum_groups_cw_##G(const Xyzz<F>* in, u32 count, Xyzz<F>* out) {      \
        __shared__ Proj<F> sh[DP_TREE_MAX];                                                             \
        msm_sum_groups_cw_impl<F>(in, count, out, sh);                                                  \
    }

DP_MSM_CW_ENTRIES(g1, Fq)
DP_MSM_CW_ENTRIES(g2, Fq2)

#undef DP_MSM_CW_ENTRIES

#endif  // DP_MSM_CW_CU
