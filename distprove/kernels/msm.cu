// msm.cu - Pippenger window sums over BN254 G1 and G2. Needs field.cuh and curve.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY (host side: distprove/backends/gpu/msm.py)
// * Digits are DESIGN.md's signed c-bit digits, computed per scalar from window 0 upwards so
//   the carry is exact, and only windows [lo, lo + nw) are emitted. Digit d != 0 goes to
//   bucket row (w - lo) * nb + |d| - 1, the base negated when d < 0; the CPU backend uses the
//   same digits, so window sums agree point for point.
// * Scalars 0 and 1 never reach a bucket. 0 contributes nothing; the bases of scalar 1 are
//   summed by msm_ones (strided, block tree) and the host adds that to window 0. Without this
//   a witness full of bits would pile every one-scalar into bucket (0, 0).
// * Bucketing is a counting sort with 32-bit atomics only: msm_count histograms rows, the
//   host takes an inclusive prefix sum (cupy.cumsum) into `cursor`, msm_scatter claims slots
//   with atomicSub from each row's end, leaving cursor[row] = the row's start. Entries of all
//   windows form one array sorted by row; no atomic ever touches a point.
// * Accumulation is segmented: one thread per fixed-length slice of the entry array, so no
//   bucket (e.g. all-equal scalars) can serialise a window. Runs wholly inside a slice are
//   written straight to their bucket; a slice's first and last runs go to two tagged spill
//   slots. msm_fold applies the same rule to the spill array (still sorted by row) with
//   groups of `len` slots, until one group remains; a fat bucket thus costs
//   len * log_len(spills) serial additions instead of count / slice_len.
// * Every bucket is cleared (ZZ = 0: the XYZZ identity) before accumulation, because device
//   memory is not zeroed and empty rows are written by nobody else. Counts are zeroed by the
//   host (memset) before msm_count.
// * The window reduction sum_j (j+1) B_j runs on the device: each thread takes a contiguous
//   segment [a, b) and forms T = sum (j-a+1) B_j and R = sum B_j by a reverse running sum,
//   contributes T + a R, and a block tree leaves one partial per block; msm_sum_groups adds
//   each window's partials (and the ones partials), so the host reads nw + 1 XYZZ points.
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

// The c bits of s starting at bit `off` (c <= 24, so they span at most two limbs).
DP_INLINE u32 sc_bits(const u32 s[8], u32 off, u32 c) {
    u32 k = off >> 5, sh = off & 31u;
    u32 lo = 0u, hi = 0u;
DP_UNROLL
    for (u32 i = 0; i < 8u; i++) {
        lo = (i == k) ? s[i] : lo;
        hi = (i == k + 1u) ? s[i] : hi;
    }
    u64 pair = ((u64)hi << 32) | lo;
    return (u32)(pair >> sh) & ((1u << c) - 1u);
}

// Walks the signed digits of windows [0, lo + nw) and calls emit(row, neg) for each nonzero
// digit of window lo..lo+nw-1.
template <typename Emit>
DP_INLINE void sc_for_each_digit(const u32 s[8], u32 c, u32 lo, u32 nw, u32 nb, Emit emit) {
    u32 carry = 0u;
    u32 half = 1u << (c - 1u);
    u32 full = 1u << c;
    for (u32 w = 0; w < lo + nw; w++) {
        u32 d = sc_bits(s, w * c, c) + carry;
        bool neg = d >= half;
        carry = neg ? 1u : 0u;
        u32 mag = neg ? full - d : d;
        if (w >= lo && mag != 0u) emit((w - lo) * nb + mag - 1u, neg);
    }
}

// ---------------------------------------------------------------------------------------
// Counting sort.
// ---------------------------------------------------------------------------------------

extern "C" __global__ void msm_count(const u32* scalars, u32* counts, u32 n, u32 c, u32 lo, u32 nw, u32 nb) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(scalars, i, s);
    if (sc_is_zero_or_one(s)) return;
    sc_for_each_digit(s, c, lo, nw, nb, [&](u32 row, bool) { atomicAdd(&counts[row], 1u); });
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
extern "C" __global__ void msm_scatter(const u32* scalars, u32* cursor, MsmEntry* entries, u32 n, u32 c, u32 lo,
                                       u32 nw, u32 nb) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s[8];
    sc_load(scalars, i, s);
    if (sc_is_zero_or_one(s)) return;
    sc_for_each_digit(s, c, lo, nw, nb, [&](u32 row, bool neg) { msm_put_entry(cursor, entries, row, i, neg); });
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
        acc = pt_add(acc, in_pts[i]);
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
        if (t < s) sh[t] = pt_add(sh[t], sh[t + s]);
    }
    __syncthreads();
}

// grid (blocks_per_window, nw): block x of window y covers buckets
// [x * blockDim * seg, (x+1) * blockDim * seg); thread segments of `seg` buckets.
template <typename F>
DP_INLINE void msm_reduce_impl(const Xyzz<F>* buckets, u32 nb, u32 seg, Xyzz<F>* partials, Xyzz<F>* sh) {
    u32 w = blockIdx.y;
    u32 a = (blockIdx.x * blockDim.x + threadIdx.x) * seg;
    u32 b = a + seg < nb ? a + seg : nb;
    Xyzz<F> mine = xyzz_zero_t<F>();
    if (a < b) {
        Xyzz<F> run = xyzz_zero_t<F>();
        Xyzz<F> tot = xyzz_zero_t<F>();
        for (u32 j = b; j > a; j--) {
            run = pt_add(run, buckets[(u64)w * nb + j - 1u]);
            tot = pt_add(tot, run);
        }
        mine = a ? pt_add(tot, pt_mul_u32(run, a)) : tot;
    }
    sh[threadIdx.x] = mine;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) partials[w * gridDim.x + blockIdx.x] = sh[0];
}

// Sum of the bases whose scalar is exactly 1; block x writes out[x].
template <typename F>
DP_INLINE void msm_ones_impl(const u32* scalars, const Aff<F>* bases, u32 n, Xyzz<F>* out, Xyzz<F>* sh) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u32 s[8];
        sc_load(scalars, i, s);
        if (sc_is_one(s)) acc = pt_madd(acc, bases[i]);
    }
    sh[threadIdx.x] = acc;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) out[blockIdx.x] = sh[0];
}

// Block g sums in[g * count, (g+1) * count) into out[g].
template <typename F>
DP_INLINE void msm_sum_groups_impl(const Xyzz<F>* in, u32 count, Xyzz<F>* out, Xyzz<F>* sh) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) acc = pt_add(acc, in[(u64)blockIdx.x * count + i]);
    sh[threadIdx.x] = acc;
    msm_block_tree(sh);
    if (threadIdx.x == 0u) out[blockIdx.x] = sh[0];
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

#define DP_MSM_ENTRIES(G, F)                                                                          \
    DP_MSM_DEFAULT_ONLY(                                                                              \
    extern "C" __global__ void msm_clear_##G(Xyzz<F>* buckets, u32 rows) { msm_clear_impl<F>(buckets, rows); }) \
    extern "C" __global__ void msm_accumulate_##G(const MsmEntry* entries, const Aff<F>* bases,          \
                                                  const u32* cursor, const u32* counts, u32 rows, u32 len, \
                                                  u32 slices, Xyzz<F>* buckets, u32* spill_rows,        \
                                                  Xyzz<F>* spill_pts) {                                 \
        msm_accumulate_impl<F>(entries, bases, cursor, counts, rows, len, slices, buckets, spill_rows,  \
                               spill_pts);                                                              \
    }                                                                                                   \
    DP_MSM_DEFAULT_ONLY(                                                                              \
    extern "C" __global__ void msm_fold_##G(const u32* in_rows, const Xyzz<F>* in_pts, u32 m, u32 len,  \
                                            u32 groups, Xyzz<F>* buckets, u32* out_rows,                \
                                            Xyzz<F>* out_pts) {                                         \
        msm_fold_impl<F>(in_rows, in_pts, m, len, groups, buckets, out_rows, out_pts);                  \
    }                                                                                                   \
    extern "C" __global__ void msm_reduce_##G(const Xyzz<F>* buckets, u32 nb, u32 seg, Xyzz<F>* partials) { \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        msm_reduce_impl<F>(buckets, nb, seg, partials, sh);                                             \
    }                                                                                                   \
    extern "C" __global__ void msm_ones_##G(const u32* scalars, const Aff<F>* bases, u32 n, Xyzz<F>* out) { \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        msm_ones_impl<F>(scalars, bases, n, out, sh);                                                   \
    }                                                                                                   \
    extern "C" __global__ void msm_sum_groups_##G(const Xyzz<F>* in, u32 count, Xyzz<F>* out) {         \
        __shared__ Xyzz<F> sh[DP_TREE_MAX];                                                             \
        msm_sum_groups_impl<F>(in, count, out, sh);                                                     \
    })

DP_MSM_ENTRIES(g1, Fq)
DP_MSM_ENTRIES(g2, Fq2)

#undef DP_MSM_ENTRIES
#undef DP_MSM_DEFAULT_ONLY

#endif  // DP_MSM_CU
