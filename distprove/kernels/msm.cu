// msm.cu - Pippenger window sums over BN254 G1 and G2. Needs field.cuh and curve.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY (host side: distprove/backends/gpu/msm.py)
// * Digits are DESIGN.md's signed c-bit digits, computed per scalar from window 0 upwards so
//   the carry is exact, and only windows [lo, lo + nw) are emitted. Digit d != 0 goes to
//   bucket row (w - lo) * nb + |d| - 1, the base negated when d < 0; the CPU backend uses the
//   same digits, so window sums agree point for point.
// * Scalars 0 and 1 never reach a bucket. 0 contributes nothing; the bases of scalar 1 are
//   summed by msm_ones (per-warp queues of the ones, so every lane adds; block tree) and the
//   host adds that to window 0. Without this a witness full of bits would pile every
//   one-scalar into bucket (0, 0).
// * Bucketing is a counting sort with 32-bit atomics only: msm_count histograms rows, the
//   host takes an inclusive prefix sum (cupy.cumsum) into `cursor`, msm_scatter claims slots
//   with atomicSub from each row's end, leaving cursor[row] = the row's start. Entries of all
//   windows form one array sorted by row; no atomic ever touches a point. The scatter is ~85%
//   of the sort (H200, 2^24: 13.7 of 16.2 ms), bound by the returning atomics' rate (~17 G/s
//   against ~100 G/s for the count's fire-and-forget ones): a thread claiming 16 windows' slots
//   at once measured no faster (14.5 ms), so each digit claims its own. Larger MSMs whose
//   scalars are mostly live take msm_sort.cu's radix sort instead (same entries, cursor, counts).
// * Accumulation is segmented: one thread per fixed-length slice of the entry array, so no
//   bucket (e.g. all-equal scalars) can serialise a window. Runs wholly inside a slice are
//   written straight to their bucket; a slice's first and last runs go to two tagged spill
//   slots. msm_fold applies the same rule to the spill array (still sorted by row) with
//   groups of `len` slots, until one group remains; a fat bucket thus costs
//   len * log_len(spills) serial additions instead of count / slice_len.
// * Every bucket is cleared (ZZ = 0: the XYZZ identity) before accumulation, because device
//   memory is not zeroed and empty rows are written by nobody else. Counts are zeroed by the
//   host (memset) before msm_count.
// * The window reduction sum_j (j+1) B_j runs on the device in two levels of running sums:
//   one thread per segment of seg buckets forms T = sum (j-a+1) B_j and R = sum B_j; then
//   fewer threads per window combine the segments' (T, R) the same way (S = sum T + seg *
//   sum s R_s), each with one small multiple s0 * R, and block trees leave partials that
//   msm_sum_groups adds (with the ones partials), so the host reads nw + 1 XYZZ points.
//   The multiples stay off the many level-1 threads: as a ladder there (the first design)
//   they were as long as the running sum itself, on 255-register G2 threads that spilled.
//   The fold, the reductions and the trees add through pt_add_tail: for G2 one out-of-line
//   copy (curve.cuh), as the inlined ones spilled heavily with three points live.
// * Grouped MSMs (G proofs of one key, the same bases): G scalar vectors of n are G * nw
//   "virtual windows" over the n points, v = p * nw + (w - lo). Only the digit kernels (the
//   counting sort's, msm_sort.cu's msm_radix_digits) and msm_ones know of the proofs, through
//   grid y = p; accumulation, fold and reduction work on generic (window, bucket) rows, and the
//   ones give one sum per proof. A whole MSM's windows can be combined on the device
//   (msm_combine: sum_w 2^(c w) S_w plus the ones, one point per proof), which also makes the
//   point affine in standard form, by a Fermat inversion in its thread: the host then copies
//   bytes into integers instead of converting XYZZ Montgomery rows in Python (at 2^12 that
//   conversion was a tenth of the proving thread's time holding the GIL).
// * Kernels are templates over the field (Fq: G1, Fq2: G2) behind extern "C" wrappers.
//   Launch geometry is the host's; the tree kernels need a power-of-two block of at most
//   DP_TREE_MAX threads.

#ifndef DP_MSM_CU
#define DP_MSM_CU

#define DP_TREE_MAX 128
#define DP_NO_ROW 0xffffffffu

struct alignas(8) MsmEntry {
    u32 row;  // (w - lo) * nb + |d| - 1
    u32 pt;   // point index << 1 | (d < 0)
};

// ---------------------------------------------------------------------------------------
// Scalars: standard form, 8 little-endian limbs.
// ---------------------------------------------------------------------------------------

// Scalar i of a (n, 8) array, as two 128-bit loads (the array is 16-byte aligned).
DP_INLINE void sc_load(const u32* scalars, u32 i, u32 s[8]) {
    Fr v = reinterpret_cast<const Fr*>(scalars)[i];
DP_UNROLL
    for (int k = 0; k < 8; k++) s[k] = v.v[k];
}

DP_INLINE bool sc_is_zero_or_one(const u32 s[8]) {
    u32 hi = s[1] | s[2] | s[3] | s[4] | s[5] | s[6] | s[7];
    return hi == 0u && s[0] <= 1u;
}

DP_INLINE bool sc_is_one(const u32 s[8]) {
    u32 hi = s[1] | s[2] | s[3] | s[4] | s[5] | s[6] | s[7];
    return hi == 0u && s[0] == 1u;
}

// Walks the signed digits of windows [0, lo + nw) (the carry needs every window from 0) and
// calls each(w - lo, |digit|, digit < 0) for windows lo..lo+nw-1, zero digits included. The
// scalar streams through a 64-bit buffer limb by limb (c < 32 bits a window; bits above the
// 256 are zero): picking each window's two limbs out of the eight by index took 16 selects and
// left msm_radix_digits issue-bound (0.74 ms at G1 2^24 merged, 1.8 TB/s).
template <typename Each>
DP_INLINE void sc_for_each_window(const u32 s[8], u32 c, u32 lo, u32 nw, Each each) {
    u32 carry = 0u;
    u32 half = 1u << (c - 1u);
    u32 full = 1u << c;
    u32 mask = full - 1u;
    u32 end = lo + nw, w = 0u, have = 0u;
    u64 buf = 0u;
    auto next = [&]() {
        u32 d = ((u32)buf & mask) + carry;
        buf >>= c;
        bool neg = d >= half;
        carry = neg ? 1u : 0u;
        u32 mag = neg ? full - d : d;
        if (w >= lo) each(w - lo, mag, neg);
        w++;
    };
DP_UNROLL
    for (u32 k = 0; k < 8u; k++) {
        if (w >= end) return;
        buf |= (u64)s[k] << have;  // have < c < 32 here
        have += 32u;
        for (; have >= c && w < end; have -= c) next();
    }
    while (w < end) next();
}

// emit(row, neg) for each nonzero digit of windows lo..lo+nw-1 (row = window * nb + |digit| - 1).
template <typename Emit>
DP_INLINE void sc_for_each_digit(const u32 s[8], u32 c, u32 lo, u32 nw, u32 nb, Emit emit) {
    sc_for_each_window(s, c, lo, nw, [&](u32 w, u32 mag, bool neg) {
        if (mag != 0u) emit(w * nb + mag - 1u, neg);
    });
}

// ---------------------------------------------------------------------------------------
// Counting sort.
// ---------------------------------------------------------------------------------------

// Grouped MSMs (grid y = G > 1): G scalar vectors of n against the same n bases, block row p
// reading vector p (scalars[p * n + i]) into the rows of virtual windows p * nw .. p * nw + nw - 1;
// the entries keep the point index i < n, so every later phase sees an MSM of G * nw windows.
DP_INLINE const u32* sc_group_vector(const u32* scalars, u32 n) { return scalars + (u64)blockIdx.y * n * 8u; }

DP_INLINE u32 sc_group_rows(u32 nw, u32 nb) { return blockIdx.y * nw * nb; }

DP_INLINE void msm_count_body(const u32* scalars, u32* counts, u32 n, u32 c, u32 lo, u32 nw, u32 nb) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(sc_group_vector(scalars, n), i, s);
    if (sc_is_zero_or_one(s)) return;
    u32* group_counts = counts + sc_group_rows(nw, nb);
    sc_for_each_digit(s, c, lo, nw, nb, [&](u32 row, bool) { atomicAdd(&group_counts[row], 1u); });
}

extern "C" __global__ void msm_count(const u32* scalars, u32* counts, u32 n, u32 c, u32 lo, u32 nw, u32 nb) {
    msm_count_body(scalars, counts, n, c, lo, nw, nb);
}

// Claim the next free slot of `row` (counting down from its end) for point i, negated or not.
DP_INLINE void msm_put_entry(u32* cursor, MsmEntry* entries, u32 row, u32 i, bool neg) {
    u32 slot = atomicSub(&cursor[row], 1u) - 1u;
    MsmEntry e;
    e.row = row;
    e.pt = (i << 1) | (neg ? 1u : 0u);
    entries[slot] = e;
}

// `cursor` holds the inclusive prefix sum of counts (each row's end) and is left at each
// row's start.
DP_INLINE void msm_scatter_body(const u32* scalars, u32* cursor, MsmEntry* entries, u32 n, u32 c, u32 lo, u32 nw,
                                u32 nb) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(sc_group_vector(scalars, n), i, s);
    if (sc_is_zero_or_one(s)) return;
    u32 first = sc_group_rows(nw, nb);
    sc_for_each_digit(s, c, lo, nw, nb,
                      [&](u32 row, bool neg) { msm_put_entry(cursor, entries, first + row, i, neg); });
}

extern "C" __global__ void msm_scatter(const u32* scalars, u32* cursor, MsmEntry* entries, u32 n, u32 c, u32 lo,
                                       u32 nw, u32 nb) {
    msm_scatter_body(scalars, cursor, entries, n, c, lo, nw, nb);
}

// ---------------------------------------------------------------------------------------
// Bucket accumulation.
// ---------------------------------------------------------------------------------------

template <typename F> DP_INLINE void msm_clear_impl(Xyzz<F>* buckets, u32 rows) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) f_set_zero(buckets[r].zz);
}

// One thread per slice [k*len, (k+1)*len) of the entries. Interior runs are complete buckets;
// the first run goes to spill slot 2k, the last (if different) to 2k+1.
template <typename F>
DP_INLINE void msm_accumulate_impl(const MsmEntry* entries, const Aff<F>* bases, const u32* cursor,
                                   const u32* counts, u32 rows, u32 len, u32 slices, Xyzz<F>* buckets,
                                   u32* spill_rows, Xyzz<F>* spill_pts) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= slices) return;
    u32 total = cursor[rows - 1u] + counts[rows - 1u];
    u32 a = k * len;
    spill_rows[2u * k] = DP_NO_ROW;
    spill_rows[2u * k + 1u] = DP_NO_ROW;
    if (a >= total) return;
    u32 b = a + len < total ? a + len : total;
    u32 cur = entries[a].row;
    bool first = true;
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (u32 i = a; i < b; i++) {
        MsmEntry e = entries[i];
        if (e.row != cur) {
            if (first) {
                spill_rows[2u * k] = cur;
                spill_pts[2u * k] = acc;
                first = false;
            } else {
                buckets[cur] = acc;
            }
            acc = xyzz_zero_t<F>();
            cur = e.row;
        }
        Aff<F> q = bases[e.pt >> 1];
        if (e.pt & 1u) q = aff_neg_t(q);
        acc = pt_madd(acc, q);
    }
    u32 slot = first ? 2u * k : 2u * k + 1u;
    spill_rows[slot] = cur;
    spill_pts[slot] = acc;
}

// One thread per group of `len` slots of a spill array (sorted by row, DP_NO_ROW = empty).
// On the last level (one group) every run is final and goes to its bucket.
template <typename F>
DP_INLINE void msm_fold_impl(const u32* in_rows, const Xyzz<F>* in_pts, u32 m, u32 len, u32 groups,
                             Xyzz<F>* buckets, u32* out_rows, Xyzz<F>* out_pts) {
    u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    bool last_level = groups == 1u;
    if (!last_level) {
        out_rows[2u * g] = DP_NO_ROW;
        out_rows[2u * g + 1u] = DP_NO_ROW;
    }
    u32 a = g * len;
    u32 b = a + len < m ? a + len : m;
    u32 cur = DP_NO_ROW;
    bool first = true;
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (u32 i = a; i < b; i++) {
        u32 r = in_rows[i];
        if (r == DP_NO_ROW) continue;
        if (r != cur) {
            if (cur != DP_NO_ROW) {
                if (first && !last_level) {
                    out_rows[2u * g] = cur;
                    out_pts[2u * g] = acc;
                } else {
                    buckets[cur] = acc;
                }
                first = false;
            }
            acc = xyzz_zero_t<F>();
            cur = r;
        }
        acc = pt_add_tail(acc, in_pts[i]);
    }
    if (cur == DP_NO_ROW) return;
    if (last_level) {
        buckets[cur] = acc;
    } else {
        u32 slot = first ? 2u * g : 2u * g + 1u;
        out_rows[slot] = cur;
        out_pts[slot] = acc;
    }
}

// ---------------------------------------------------------------------------------------
// Reductions.
// ---------------------------------------------------------------------------------------

// Block tree over sh[0..blockDim.x); the result lands in sh[0]. Every thread reaches every
// barrier (the trip count depends on blockDim.x only). P is Xyzz<F>, or Proj<F> for the
// complete formulas of the constant-work unit (pt_add is overloaded for both).
template <typename P> DP_INLINE void msm_block_tree(P* sh) {
    u32 t = threadIdx.x;
    for (u32 s = blockDim.x >> 1; s > 0u; s >>= 1) {
        __syncthreads();
        if (t < s) sh[t] = pt_add_tail(sh[t], sh[t + s]);
    }
    __syncthreads();
}

// Window reduction, level 1: one thread per segment of `seg` buckets, counted over all
// windows at once (each window's nb buckets are contiguous and seg divides nb): segment i
// leaves T_i = sum_j (j+1) B_{i*seg+j} and R_i = sum_j B_{i*seg+j}, by a reverse running sum.
template <typename F>
DP_INLINE void msm_reduce_seg_impl(const Xyzz<F>* buckets, u32 segs, u32 seg, Xyzz<F>* t_out, Xyzz<F>* r_out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= segs) return;
    const Xyzz<F>* b = buckets + (u64)i * seg;
    Xyzz<F> run = b[seg - 1u];
    Xyzz<F> tot = run;
    for (u32 j = seg - 1u; j > 0u; j--) {
        run = pt_add_tail(run, b[j - 1u]);
        tot = pt_add_tail(tot, run);
    }
    t_out[i] = tot;
    r_out[i] = run;
}

// Level 2, grid (groups, nw): with bucket index s*seg + j, S_w = sum_s T_s + seg * sum_s s R_s
// over window w's nseg segments. Thread k of the window's groups*blockDim threads takes
// segments [s0, s0 + len), s0 = k * len, and contributes sum T + 2^seg_log (sum_k k R_{s0+k}
// + s0 sum R) (the inner weighted sum by a running sum again, so only one small multiple,
// s0 * sum R, per thread); a block tree leaves one partial per group, summed by
// msm_sum_groups.
template <typename F>
DP_INLINE void msm_reduce_win_impl(const Xyzz<F>* t_in, const Xyzz<F>* r_in, u32 nseg, u32 seg_log,
                                   Xyzz<F>* partials, Xyzz<F>* sh) {
    u32 len = nseg / (gridDim.x * blockDim.x);
    u32 s0 = (blockIdx.x * blockDim.x + threadIdx.x) * len;
    u64 base = (u64)blockIdx.y * nseg + s0;
    const Xyzz<F>* t = t_in + base;
    const Xyzz<F>* r = r_in + base;
    Xyzz<F> tsum = t[len - 1u];
    Xyzz<F> run = r[len - 1u];
    Xyzz<F> wsum = len > 1u ? run : xyzz_zero_t<F>();
    for (u32 k = len - 1u; k > 1u; k--) {
        tsum = pt_add_tail(tsum, t[k - 1u]);
        run = pt_add_tail(run, r[k - 1u]);
        wsum = pt_add_tail(wsum, run);
    }
    if (len > 1u) {
        tsum = pt_add_tail(tsum, t[0]);
        run = pt_add_tail(run, r[0]);
    }
    if (s0) wsum = pt_add_tail(wsum, pt_mul_u32(run, s0));
    for (u32 d = 0; d < seg_log; d++) wsum = pt_dbl_tail(wsum);
    sh[threadIdx.x] = pt_add_tail(tsum, wsum);
    msm_block_tree(sh);
    if (threadIdx.x == 0u) partials[blockIdx.y * gridDim.x + blockIdx.x] = sh[0];
}

// Sum of the bases whose scalar is exactly 1; block x writes out[x]. Grouped (grid y = G), block
// (x, p) sums over scalar vector p and writes out[p * gridDim.x + x].
template <typename F>
DP_INLINE void msm_ones_impl(const u32* scalars, const Aff<F>* bases, u32 n, Xyzz<F>* out, Xyzz<F>* sh,
                             u32* queue) {
    scalars = sc_group_vector(scalars, n);
    out += blockIdx.y * gridDim.x;
    Xyzz<F> acc = xyzz_zero_t<F>();
#ifdef __CUDA_ARCH__
    // A witness's ones are about half its scalars, scattered: one lane per scalar would run
    // every addition with half the warp idle. Each warp reads 32 scalars at a time, queues the
    // indices of the ones in shared memory (64 slots: < 32 waiting + 32 new) and adds them 32 at
    // a time, every lane busy.
    u32 lane = threadIdx.x & 31u;
    u32* q = queue + (threadIdx.x >> 5) * 64u;
    u32 pending = 0u;
    u64 step = (u64)(gridDim.x * blockDim.x);
    for (u64 base = (u64)(blockIdx.x * blockDim.x + (threadIdx.x & ~31u)); base < n; base += step) {
        u32 i = (u32)base + lane;
        bool one = false;
        if (i < n) {
            u32 s[8];
            sc_load(scalars, i, s);
            one = sc_is_one(s);
        }
        u32 mask = __ballot_sync(0xffffffffu, one);
        if (one) q[pending + __popc(mask & ((1u << lane) - 1u))] = i;
        pending += __popc(mask);
        __syncwarp();
        if (pending >= 32u) {
            pending -= 32u;
            u32 idx = q[pending + lane];
            __syncwarp();  // every lane has its index before the next scalars' ones reuse the slots
            acc = pt_madd(acc, bases[idx]);
        }
    }
    if (lane < pending) acc = pt_madd(acc, bases[q[lane]]);
#else
    (void)queue;
    u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u32 s[8];
        sc_load(scalars, i, s);
        if (sc_is_one(s)) acc = pt_madd(acc, bases[i]);
    }
#endif
    sh[threadIdx.x] = acc;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) out[blockIdx.x] = sh[0];
}

// Block g sums in[g * count, (g+1) * count) into out[g].
template <typename F>
DP_INLINE void msm_sum_groups_impl(const Xyzz<F>* in, u32 count, Xyzz<F>* out, Xyzz<F>* sh) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) acc = pt_add_tail(acc, in[(u64)blockIdx.x * count + i]);
    sh[threadIdx.x] = acc;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) out[blockIdx.x] = sh[0];
}

// Horner combine of whole MSMs on the device: vector p's windows 0 .. span-1 lie at
// sums[p * span + w] (as msm_sum_groups leaves them) and, with `with_ones`, its ones sum at
// sums[proofs * span + p]; thread p writes out[p] = sum_w 2^(c w) S_w (+ ones): c doublings and
// one addition per window, so the host reads one point per proof instead of span + 1, as a
// standard-form affine row (curve.cuh's pt_store_affine_std: its inversion costs under the
// Horner chain).
template <typename F>
DP_INLINE void msm_combine_impl(const Xyzz<F>* sums, u32 span, u32 c, u32 proofs, u32 with_ones, u32* out) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= proofs) return;
    const Xyzz<F>* s = sums + (u64)p * span;
    Xyzz<F> acc = s[span - 1u];
    for (u32 w = span - 1u; w > 0u; w--) {
        for (u32 d = 0; d < c; d++) acc = pt_dbl_tail(acc);
        acc = pt_add_tail(acc, s[w - 1u]);
    }
    if (with_ones) acc = pt_add_tail(acc, sums[(u64)proofs * span + p]);
    pt_store_affine_std(out + (u64)p * 2u * (sizeof(F) / sizeof(u32)), acc);
}

// ---------------------------------------------------------------------------------------
// extern "C" entry points, one per group.
// ---------------------------------------------------------------------------------------

// DP_MSM_CW_ONLY (defined when the msm_cw module builds on this file) leaves out the point
// kernels that only the default mode launches, and their ptxas time; msm_accumulate_* stays,
// and so do msm_count / msm_scatter (cheap, and the loader probes the first entry point).
#ifdef DP_MSM_CW_ONLY
#define DP_MSM_DEFAULT_ONLY(...)
#else
#define DP_MSM_DEFAULT_ONLY(...) __VA_ARGS__
#endif

#define DP_MSM_ENTRIES(G, F, ACC_BOUNDS, TAIL_BOUNDS)                                                 \
    DP_MSM_DEFAULT_ONLY(                                                                              \
    extern "C" __global__ void msm_clear_##G(Xyzz<F>* buckets, u32 rows) { msm_clear_impl<F>(buckets, rows); }) \
    extern "C" __global__ void ACC_BOUNDS msm_accumulate_##G(const MsmEntry* entries, const Aff<F>* bases, \
                                                  const u32* cursor, const u32* counts, u32 rows, u32 len, \
                                                  u32 slices, Xyzz<F>* buckets, u32* spill_rows,        \
                                                  Xyzz<F>* spill_pts) {                                 \
        msm_accumulate_impl<F>(entries, bases, cursor, counts, rows, len, slices, buckets, spill_rows,  \
                               spill_pts);                                                              \
    }                                                                                                   \
    DP_MSM_DEFAULT_ONLY(                                                                              \
    extern "C" __global__ void TAIL_BOUNDS msm_fold_##G(const u32* in_rows, const Xyzz<F>* in_pts, u32 m, u32 len,  \
                                            u32 groups, Xyzz<F>* buckets, u32* out_rows,                \
                                            Xyzz<F>* out_pts) {                                         \
        msm_fold_impl<F>(in_rows, in_pts, m, len, groups, buckets, out_rows, out_pts);                  \
    }                                                                                                   \
    extern "C" __global__ void TAIL_BOUNDS msm_reduce_seg_##G(const Xyzz<F>* buckets, u32 segs, u32 seg, Xyzz<F>* t_out, \
                                                  Xyzz<F>* r_out) {                                     \
        msm_reduce_seg_impl<F>(buckets, segs, seg, t_out, r_out);                                       \
    }                                                                                                   \
    extern "C" __global__ void msm_reduce_win_##G(const Xyzz<F>* t_in, const Xyzz<F>* r_in, u32 nseg,    \
                                                  u32 seg_log, Xyzz<F>* partials) {                     \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        msm_reduce_win_impl<F>(t_in, r_in, nseg, seg_log, partials, sh);                                \
    }                                                                                                   \
    extern "C" __global__ void msm_ones_##G(const u32* scalars, const Aff<F>* bases, u32 n, Xyzz<F>* out) { \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        __shared__ u32 queue[DP_TREE_MAX * 2];                                                          \
        msm_ones_impl<F>(scalars, bases, n, out, sh, queue);                                            \
    }                                                                                                   \
    extern "C" __global__ void msm_sum_groups_##G(const Xyzz<F>* in, u32 count, Xyzz<F>* out) {         \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        msm_sum_groups_impl<F>(in, count, out, sh);                                                     \
    }                                                                                                   \
    extern "C" __global__ void msm_combine_##G(const Xyzz<F>* sums, u32 span, u32 c, u32 proofs,         \
                                               u32 with_ones, u32* out) {                               \
        msm_combine_impl<F>(sums, span, c, proofs, with_ones, out);                                     \
    })

// Registers per thread of the point kernels, through __launch_bounds__(128, k): k blocks of 128
// threads per SM must fit, so ptxas keeps to 65536 / (128 k) registers and spills the rest
// (the host launches these kernels with at most 128 threads). k = 0 leaves a kernel unbounded,
// as does the host C++ build of the tests. With the Fq products as calls (field.cuh) unbounded
// is best: on an H200, G2 2^20 takes 23.4 ms against 24.9 at k = 3 and 23.9 at k = 4, and G1's
// accumulation at 6 blocks is 4-6% slower. The bounds stay settable for bench_msm.py's builds;
// DP_G2_TAIL_MIN_BLOCKS bounds G2's fold and first reduction level.
#ifndef DP_G1_ACC_MIN_BLOCKS
#define DP_G1_ACC_MIN_BLOCKS 0
#endif
#ifndef DP_G2_ACC_MIN_BLOCKS
#define DP_G2_ACC_MIN_BLOCKS 0
#endif
#ifndef DP_G2_TAIL_MIN_BLOCKS
#define DP_G2_TAIL_MIN_BLOCKS 0
#endif
#if DP_G1_ACC_MIN_BLOCKS && defined(__CUDACC__)
#define DP_G1_ACC_BOUNDS __launch_bounds__(128, DP_G1_ACC_MIN_BLOCKS)
#else
#define DP_G1_ACC_BOUNDS
#endif
#if DP_G2_ACC_MIN_BLOCKS && defined(__CUDACC__)
#define DP_G2_ACC_BOUNDS __launch_bounds__(128, DP_G2_ACC_MIN_BLOCKS)
#else
#define DP_G2_ACC_BOUNDS
#endif
#if DP_G2_TAIL_MIN_BLOCKS && defined(__CUDACC__)
#define DP_G2_TAIL_BOUNDS __launch_bounds__(128, DP_G2_TAIL_MIN_BLOCKS)
#else
#define DP_G2_TAIL_BOUNDS
#endif
DP_MSM_ENTRIES(g1, Fq, DP_G1_ACC_BOUNDS, )
DP_MSM_ENTRIES(g2, Fq2, DP_G2_ACC_BOUNDS, DP_G2_TAIL_BOUNDS)

#undef DP_MSM_ENTRIES
#undef DP_MSM_DEFAULT_ONLY

#endif  // DP_MSM_CU
