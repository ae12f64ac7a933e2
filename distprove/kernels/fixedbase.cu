// fixedbase.cu - fixed-base scalar multiplication [s]G of the generator, for the dev setup.
// Needs field.cuh and curve.cuh (the loader concatenates them in front of this unit).
//
// WHAT THIS FILE DECIDES, AND WHY
// * Table: FB_WINDOWS = 32 windows of 8 bits, FB_ENTRIES = 256 affine points per window,
//   table[w * 256 + d] = d * 2^(8w) * G in the disk layout (Montgomery limbs, entry d = 0 is
//   the all-zero infinity and never read). 512 KiB for G1, 1 MiB for G2, in global memory:
//   every thread reads 32 random entries, which the L2 cache keeps.
// * One thread per scalar (standard-form 8 x u32 limbs, as the setup produces them): one
//   XYZZ mixed addition (curve.cuh) per nonzero byte of the scalar, no doublings.
// * Affine output in the (n, 16) / (n, 32) limb layout, infinity = zero row, two ways:
//   - fixedbase_*: fused, each thread inverts its own ZZ*ZZZ by Fermat (f_inv, a^(q-2) in 4-bit
//     windows); simplest, about 330 extra field products per point;
//   - fixedbase_acc_* writes XYZZ points, then fixedbase_affine_* converts FB_BATCH
//     consecutive points per thread with Montgomery's trick (one Fermat inversion per batch,
//     3 products per point more). The Python wrapper picks; both give identical bytes.
// * 1/ZZ and 1/ZZZ come from one inversion of d = ZZ*ZZZ: 1/ZZ = ZZZ/d, 1/ZZZ = ZZ/d.
// * Host-compilable like field.cuh/curve.cuh: without a CUDA compiler the kernels are left out
//   and fixedbase_*_host loops run the same per-point code (tests/test_devsetup.py uses them).

#ifndef DP_FIXEDBASE_CU
#define DP_FIXEDBASE_CU

#define FB_WINDOWS 32
#define FB_ENTRIES 256
#define FB_BATCH 16

DP_INLINE void fb_load(AffG1& a, const u32* p) { a.x = fq_load(p); a.y = fq_load(p + 8); }
DP_INLINE void fb_load(AffG2& a, const u32* p) { a.x = fq2_load(p); a.y = fq2_load(p + 16); }
DP_INLINE void fb_put(u32* p, const Fq& a) { fq_store(p, a); }
DP_INLINE void fb_put(u32* p, const Fq2& a) { fq2_store(p, a); }
DP_INLINE Fq fb_get(const u32* p, Fq) { return fq_load(p); }
DP_INLINE Fq2 fb_get(const u32* p, Fq2) { return fq2_load(p); }

// sum over the windows of table[w][byte w of s]; W = u32 words per affine table entry.
template <typename F, int W>
DP_INLINE Xyzz<F> fb_accumulate(const u32* table, const u32* s) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (int w = 0; w < FB_WINDOWS; w++) {
        u32 d = (s[w >> 2] >> ((w & 3) * 8)) & 0xffu;
        if (d == 0u) continue;
        Aff<F> q;
        fb_load(q, table + (u64)(w * FB_ENTRIES + d) * W);
        acc = pt_madd(acc, q);
    }
    return acc;
}

// affine x = X/ZZ, y = Y/ZZZ given inv = 1/(ZZ*ZZZ); writes 2 field elements (W words).
template <typename F, int W>
DP_INLINE void fb_store_affine(u32* out, const Xyzz<F>& p, F inv) {
    fb_put(out, f_mul(p.x, f_mul(inv, p.zzz)));
    fb_put(out + W / 2, f_mul(p.y, f_mul(inv, p.zz)));
}

template <typename F, int W>
DP_INLINE void fb_store_zero(u32* out) {
    for (int i = 0; i < W; i++) out[i] = 0u;
}

// Fused: accumulate and convert with a per-point Fermat inversion.
template <typename F, int W>
DP_INLINE void fb_point(const u32* table, const u32* s, u32* out) {
    Xyzz<F> p = fb_accumulate<F, W>(table, s);
    if (pt_is_inf(p)) {
        fb_store_zero<F, W>(out);
        return;
    }
    fb_store_affine<F, W>(out, p, f_inv(f_mul(p.zz, p.zzz)));
}

// XYZZ buffer rows: x | y | zz | zzz, 2W words per point.
template <typename F, int W>
DP_INLINE void fb_point_xyzz(const u32* table, const u32* s, u32* out) {
    Xyzz<F> p = fb_accumulate<F, W>(table, s);
    const int h = W / 2;
    fb_put(out, p.x);
    fb_put(out + h, p.y);
    fb_put(out + 2 * h, p.zz);
    fb_put(out + 3 * h, p.zzz);
}

// Points [first, first + count) of an XYZZ buffer to affine with one inversion (count <= FB_BATCH).
template <typename F, int W>
DP_INLINE void fb_batch_affine(const u32* xyzz, u32* out, u32 first, u32 count) {
    const int h = W / 2;
    F prefix[FB_BATCH];
    F acc;
    f_set_one(acc);
    for (u32 j = 0; j < count; j++) {
        const u32* p = xyzz + (u64)(first + j) * 2 * W;
        F zz = fb_get(p + 2 * h, F());
        prefix[j] = acc;
        if (!f_is_zero(zz)) acc = f_mul(acc, f_mul(zz, fb_get(p + 3 * h, F())));
    }
    F inv = f_inv(acc);
    for (int j = (int)count - 1; j >= 0; j--) {
        const u32* p = xyzz + (u64)(first + j) * 2 * W;
        u32* o = out + (u64)(first + j) * W;
        Xyzz<F> pt;
        pt.x = fb_get(p, F());
        pt.y = fb_get(p + h, F());
        pt.zz = fb_get(p + 2 * h, F());
        pt.zzz = fb_get(p + 3 * h, F());
        if (f_is_zero(pt.zz)) {
            fb_store_zero<F, W>(o);
            continue;
        }
        F d = f_mul(pt.zz, pt.zzz);
        fb_store_affine<F, W>(o, pt, f_mul(inv, prefix[j]));
        inv = f_mul(inv, d);
    }
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

#define FB_KERNELS(G, F, W)                                                                     \
    extern "C" __global__ void fixedbase_##G(const u32* __restrict__ table,                     \
                                             const u32* __restrict__ scalars,                   \
                                             u32* __restrict__ out, u32 n) {                    \
        u32 i = blockIdx.x * blockDim.x + threadIdx.x;                                          \
        if (i < n) fb_point<F, W>(table, scalars + (u64)i * 8, out + (u64)i * W);          \
    }                                                                                           \
    extern "C" __global__ void fixedbase_acc_##G(const u32* __restrict__ table,                 \
                                                 const u32* __restrict__ scalars,               \
                                                 u32* __restrict__ xyzz, u32 n) {               \
        u32 i = blockIdx.x * blockDim.x + threadIdx.x;                                          \
        if (i < n) fb_point_xyzz<F, W>(table, scalars + (u64)i * 8, xyzz + (u64)i * 2 * W); \
    }                                                                                           \
    extern "C" __global__ void fixedbase_affine_##G(const u32* __restrict__ xyzz,                \
                                                    u32* __restrict__ out, u32 n) {             \
        u32 t = blockIdx.x * blockDim.x + threadIdx.x;                                          \
        u32 first = t * FB_BATCH;                                                               \
        if (first >= n) return;                                                                 \
        u32 count = n - first < FB_BATCH ? n - first : FB_BATCH;                                \
        fb_batch_affine<F, W>(xyzz, out, first, count);                                         \
    }

FB_KERNELS(g1, Fq, 16)
FB_KERNELS(g2, Fq2, 32)

#undef FB_KERNELS

#else  // host build, for tests

extern "C" void fixedbase_g1_host(const u32* table, const u32* scalars, u32* out, u32 n) {
    for (u32 i = 0; i < n; i++) fb_point<Fq, 16>(table, scalars + (u64)i * 8, out + (u64)i * 16);
}

extern "C" void fixedbase_g2_host(const u32* table, const u32* scalars, u32* out, u32 n) {
    for (u32 i = 0; i < n; i++) fb_point<Fq2, 32>(table, scalars + (u64)i * 8, out + (u64)i * 32);
}

// The two-pass path: accumulate into an XYZZ buffer (n * 2W words), then batch-convert.
extern "C" void fixedbase_batch_g1_host(const u32* table, const u32* scalars, u32* xyzz, u32* out, u32 n) {
    for (u32 i = 0; i < n; i++) fb_point_xyzz<Fq, 16>(table, scalars + (u64)i * 8, xyzz + (u64)i * 32);
    for (u32 f = 0; f < n; f += FB_BATCH) fb_batch_affine<Fq, 16>(xyzz, out, f, n - f < FB_BATCH ? n - f : FB_BATCH);
}

extern "C" void fixedbase_batch_g2_host(const u32* table, const u32* scalars, u32* xyzz, u32* out, u32 n) {
    for (u32 i = 0; i < n; i++) fb_point_xyzz<Fq2, 32>(table, scalars + (u64)i * 8, xyzz + (u64)i * 64);
    for (u32 f = 0; f < n; f += FB_BATCH) fb_batch_affine<Fq2, 32>(xyzz, out, f, n - f < FB_BATCH ? n - f : FB_BATCH);
}

#endif

#endif  // DP_FIXEDBASE_CU
