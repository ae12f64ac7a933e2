// msm_affine.cu - batch-affine pair rounds ahead of the XYZZ bucket accumulation. Needs
// field.cuh, curve.cuh and msm.cu (MsmEntry, DP_NO_ROW).
//
// WHAT THIS FILE DECIDES, AND WHY (host side: _pair_rounds in distprove/backends/gpu/msm.py)
// * The XYZZ accumulation costs 8M + 2S per entry and, on G2, 255 registers per thread. An
//   affine addition whose slope denominator is inverted together with many others
//   (Montgomery's trick: one inversion per thread, 3 products per element) costs 6 products
//   and keeps one running product in registers. So before the accumulation the host runs R
//   pair rounds: each adds the entries of every bucket two by two in affine coordinates,
//   halving the bucket, and the unchanged msm_accumulate_* then reads the last round's points.
// * A round maps (entries sorted by row, points, counts_in, cursor_in = each row's start) to
//   counts_out[row] = ceil(counts_in[row] / 2) (msm_pair_counts), cursor_out = its exclusive
//   prefix sum (the host), and slot j = cursor_out[row] + o/2 for the entry at offset o (even)
//   of its row: entry (row, j << 1) and affine point sums[j], paired with the next entry when
//   that is in the same row, copied (negation applied) when it is the row's odd last entry.
//   Pairing is relative to the row's start, so no pair ever crosses a bucket and the output is
//   sorted by row like the input. Output points have the bases' layout (infinity all zero) and
//   output entries are never negated.
// * Thread t owns the pairs whose FIRST entry lies in [2kt, 2k(t+1)) (at most k pairs: pairs
//   are disjoint; reading the second entry past the range end is fine), so threads cut through
//   buckets freely and no bucket serialises a round. k is the host's, per round: the inversion
//   (about 330 Fq products) is amortised over k pairs, but a small round needs threads.
// * Forward pass: each pair's denominator d enters the running product, and the product
//   BEFORE it is parked in sums[j].x (the thread's own slot: no extra buffer). One Fermat
//   inversion (4-bit windows; Fq2 through the norm, 1/(a + bu) = (a - bu) / (a^2 + b^2)).
//   Backward pass: 1/d = inv * parked product, inv *= d, lambda = num / d,
//   x3 = lambda^2 - x1 - x2, y3 = lambda (x1 - x3) - y1. The points are read again rather
//   than kept: k pairs of G2 points would not fit in registers.
// * Special cases go through the same chain with no second inversion: an infinity operand
//   (the sum is the other) and q = -p (the sum is infinity) need no denominator and are
//   written in the forward pass; p = q is a doubling, d = 2 y1 and num = 3 x1^2. No finite
//   point has y = 0 (both groups have odd prime order), so d is never 0.
// * Per-thread bodies are DP_INLINE functions of (arguments, thread index), so a host build
//   runs them one thread after another (tests/test_kernels_host.py).
// * Measured on an H200 (2026-11-30, bench/results/2026-11-30_kernels-msm-affine-rounds_h200.json):
//   SLOWER than the XYZZ accumulation alone at every size, so rounds are off by default. G1 2^24:
//   one round does its E/2 additions in 63.7 ms where the XYZZ pass did E in 83.3 (0.51 ns
//   against 0.33 ns per addition; ~14 G products/s against ~30): a thread walks k = 256 pairs
//   twice through global memory (parked products, both points read again), one dependent load
//   after another, at 92 registers. G2 2^22 likewise (round 65.9 ms, accumulation 96.3 -> 48.7).
//   What it would take: more pairs in flight per SM (prefetching the next pair's points,
//   shorter k with the inversion shared by a warp), before it can pay.

#ifndef DP_MSM_AFFINE_CU
#define DP_MSM_AFFINE_CU

// How a pair p + q is formed.
#define DP_PAIR_COPY 0u  // an operand is infinity (the sum is the other) or q = -p (infinity)
#define DP_PAIR_ADD 1u   // x_p != x_q: d = x_q - x_p, num = y_q - y_p
#define DP_PAIR_DBL 2u   // p = q: d = 2 y_p, num = 3 x_p^2

// The kind of p + q, and the slope's denominator d unless the kind is DP_PAIR_COPY.
template <typename F> DP_INLINE u32 pair_kind(const Aff<F>& p, const Aff<F>& q, F& d) {
    if (aff_is_inf_t(p) || aff_is_inf_t(q)) return DP_PAIR_COPY;
    d = f_sub(q.x, p.x);
    if (!f_is_zero(d)) return DP_PAIR_ADD;
    if (!f_is_zero(f_sub(q.y, p.y))) return DP_PAIR_COPY;  // same x, other y: q = -p
    d = f_add(p.y, p.y);
    return DP_PAIR_DBL;
}

// p + q of kind DP_PAIR_COPY.
template <typename F> DP_INLINE Aff<F> pair_copy_sum(const Aff<F>& p, const Aff<F>& q) {
    if (aff_is_inf_t(p)) return q;
    if (aff_is_inf_t(q)) return p;
    Aff<F> z;
    f_set_zero(z.x);
    f_set_zero(z.y);
    return z;
}

// p + q of kind DP_PAIR_ADD or DP_PAIR_DBL, given inv = 1/d.
template <typename F> DP_INLINE Aff<F> pair_finish(const Aff<F>& p, const Aff<F>& q, u32 kind, F inv) {
    F num;
    if (kind == DP_PAIR_ADD) {
        num = f_sub(q.y, p.y);
    } else {
        F x2 = f_sqr(p.x);
        num = f_add(f_add(x2, x2), x2);
    }
    F lambda = f_mul(num, inv);
    Aff<F> r;
    r.x = f_sub(f_sub(f_sqr(lambda), p.x), q.x);
    r.y = f_sub(f_mul(lambda, f_sub(p.x, r.x)), p.y);
    return r;
}

// Point `pt` (index << 1 | negated) of a round's input.
template <typename F> DP_INLINE Aff<F> pair_load(const Aff<F>* pts, u32 pt) {
    Aff<F> q = pts[pt >> 1];
    return (pt & 1u) ? aff_neg_t(q) : q;
}

// One pair round's arguments (see the banner).
template <typename F> struct PairRound {
    const MsmEntry* in;    // sorted by row
    const Aff<F>* pts;     // the points `in` indexes
    const u32* cursor_in;  // each row's first entry
    const u32* counts_in;
    const u32* cursor_out;  // each row's first output slot
    u32 rows;
    u32 k;  // pairs per thread
    MsmEntry* out;
    Aff<F>* sums;
};

// The row a thread is in: its first input entry, entry count and first output slot, reloaded
// only when the row changes (a thread's entries are sorted by row).
struct PairRow {
    u32 row, start, count, out;
};

template <typename F> DP_INLINE void pair_row(const PairRound<F>& a, u32 row, PairRow& r) {
    if (row == r.row) return;
    r.row = row;
    r.start = a.cursor_in[row];
    r.count = a.counts_in[row];
    r.out = a.cursor_out[row];
}

// Thread t of a pair round: the pairs (and odd last entries) whose first entry lies in
// [2kt, 2k(t+1)).
template <typename F> DP_INLINE void msm_pairs_body(const PairRound<F>& a, u32 t) {
    u32 total = a.cursor_in[a.rows - 1u] + a.counts_in[a.rows - 1u];
    u64 first = (u64)t * 2u * a.k;
    if (first >= total) return;
    u32 lo = (u32)first;
    u32 hi = first + 2u * a.k < total ? (u32)(first + 2u * a.k) : total;
    F acc;
    f_set_one(acc);
    bool any = false;
    PairRow r = {DP_NO_ROW, 0u, 0u, 0u};
    for (u32 i = lo; i < hi; i++) {
        MsmEntry e = a.in[i];
        pair_row(a, e.row, r);
        u32 o = i - r.start;
        if (o & 1u) continue;
        u32 j = r.out + (o >> 1);
        MsmEntry oe;
        oe.row = e.row;
        oe.pt = j << 1;
        a.out[j] = oe;
        Aff<F> p = pair_load(a.pts, e.pt);
        if (o + 1u >= r.count) {
            a.sums[j] = p;
            continue;
        }
        Aff<F> q = pair_load(a.pts, a.in[i + 1u].pt);
        F d;
        if (pair_kind(p, q, d) == DP_PAIR_COPY) {
            a.sums[j] = pair_copy_sum(p, q);
            continue;
        }
        a.sums[j].x = acc;
        acc = f_mul(acc, d);
        any = true;
    }
    if (!any) return;
    F inv = f_inv(acc);
    for (u32 i = hi; i-- > lo;) {
        MsmEntry e = a.in[i];
        pair_row(a, e.row, r);
        u32 o = i - r.start;
        if ((o & 1u) || o + 1u >= r.count) continue;
        Aff<F> p = pair_load(a.pts, e.pt);
        Aff<F> q = pair_load(a.pts, a.in[i + 1u].pt);
        F d;
        u32 kind = pair_kind(p, q, d);
        if (kind == DP_PAIR_COPY) continue;
        u32 j = r.out + (o >> 1);
        F inv_d = f_mul(inv, a.sums[j].x);
        inv = f_mul(inv, d);
        a.sums[j] = pair_finish(p, q, kind, inv_d);
    }
}

// counts_out[row] = ceil(counts_in[row] / 2).
extern "C" __global__ void msm_pair_counts(const u32* counts_in, u32* counts_out, u32 rows) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) counts_out[r] = (counts_in[r] >> 1) + (counts_in[r] & 1u);
}

#define DP_MSM_PAIRS(G, F)                                                                              \
    extern "C" __global__ void msm_pairs_##G(const MsmEntry* in, const Aff<F>* pts, const u32* cursor_in, \
                                             const u32* counts_in, const u32* cursor_out, u32 rows, u32 k, \
                                             MsmEntry* out, Aff<F>* sums) {                              \
        PairRound<F> a = {in, pts, cursor_in, counts_in, cursor_out, rows, k, out, sums};               \
        msm_pairs_body(a, blockIdx.x * blockDim.x + threadIdx.x);                                       \
    }

DP_MSM_PAIRS(g1, Fq)
DP_MSM_PAIRS(g2, Fq2)

#undef DP_MSM_PAIRS

#endif  // DP_MSM_AFFINE_CU
