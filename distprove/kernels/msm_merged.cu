// msm_merged.cu - precomputed window multiples: every window's digits in one set of buckets.
// Needs field.cuh, curve.cuh, msm.cu and msm_sort.cu.
//
// WHAT THIS FILE DECIDES, AND WHY (host side: distprove/backends/gpu/msm.py msm_merged_start)
// * Bases fixed by a key allow a table T[w n + i] = 2^(c w) P_i for the W = ceil(256 / c)
//   windows. An MSM is then one window of W n points whose scalars are the digits: the bucket
//   reduction runs once over 2^(c-1) buckets instead of W times, so c can be wider. G1 2^24 at
//   c = 22 has 12 windows (201 M entries) against 16 at c = 17 (252 M), for 12 times the bases'
//   memory (1.07 GB a window); on an H200 it takes H's MSM at G1 2^24 from ~60 to ~51 ms. This
//   file is what the design needs beyond the window-range MSM.
// * msm_precompute_{g1,g2}: thread i writes P_i, then doubles it c times a window in XYZZ and
//   writes each multiple affine, one inversion each: a one-time cost when the key loads
//   (~550 Fq products a point and window: ~2 s for a G1 2^24 vector by count). Infinity stays
//   the all-zero row.
// * msm_radix_flat_hist: pass 1's histogram over the digit words of all windows as one array
//   (tiles cross window boundaries), so msm_sort.cu's passes run as for one window of W n items
//   whose point index is the word's position: the table row.

#ifndef DP_MSM_MERGED_CU
#define DP_MSM_MERGED_CU

// p in affine coordinates (infinity: all zero), with one inversion of ZZ * ZZZ.
template <typename F> DP_INLINE Aff<F> aff_from_xyzz_t(const Xyzz<F>& p) {
    Aff<F> r;
    if (f_is_zero(p.zz)) {
        f_set_zero(r.x);
        f_set_zero(r.y);
        return r;
    }
    F inv = f_inv(f_mul(p.zz, p.zzz));
    r.x = f_mul(p.x, f_mul(inv, p.zzz));  // 1 / ZZ = inv ZZZ
    r.y = f_mul(p.y, f_mul(inv, p.zz));   // 1 / ZZZ = inv ZZ
    return r;
}

template <typename F>
DP_INLINE void msm_precompute_body(const Aff<F>* bases, u32 n, u32 c, u32 windows, Aff<F>* table, u32 i) {
    Aff<F> p = bases[i];
    table[i] = p;
    Xyzz<F> acc = xyzz_from_aff_t(p);
    for (u32 w = 1; w < windows; w++) {
        for (u32 k = 0; k < c; k++) acc = pt_dbl(acc);
        table[(u64)w * n + i] = aff_from_xyzz_t(acc);
    }
}

#define DP_MSM_PRECOMPUTE(G, F)                                                                          \
    extern "C" __global__ void msm_precompute_##G(const Aff<F>* bases, u32 n, u32 c, u32 windows,         \
                                                  Aff<F>* table) {                                       \
        u32 i = blockIdx.x * blockDim.x + threadIdx.x;                                                   \
        if (i < n) msm_precompute_body(bases, n, c, windows, table, i);                                  \
    }
DP_MSM_PRECOMPUTE(g1, Fq)
DP_MSM_PRECOMPUTE(g2, Fq2)
#undef DP_MSM_PRECOMPUTE

// Pass 1's histogram of the merged sort, block t: the low d1 bits of digit words
// [t tile, (t + 1) tile) of all windows as one array of `total` (RADIX_NONE skipped), at
// hist[bin * tiles + t]: msm_radix_pass1's layout for one window.
extern "C" __global__ void msm_radix_flat_hist(const u32* plan, const u32* digits, u32 total, u32* hist, u32 tile,
                                               u32 d1, u32 tiles) {
    __shared__ u32 h[RADIX_MAX_BINS];
    if (plan[0] == 0u) return;
    u32 bins = 1u << d1, t = blockIdx.x;
    for (u32 j = threadIdx.x; j < bins; j += blockDim.x) h[j] = 0u;
    __syncthreads();
    u64 lo = (u64)t * tile;
    if (lo < total) radix_count_bits(digits, (u32)lo, (u32)(lo + tile < total ? lo + tile : total), 0u, bins - 1u, h);
    __syncthreads();
    for (u32 j = threadIdx.x; j < bins; j += blockDim.x) hist[j * tiles + t] = h[j];
}

#endif  // DP_MSM_MERGED_CU
