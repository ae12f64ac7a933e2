// groupfft.cu - the group (G1/G2) inverse DFT of `ptau prepare` (snarkjs powersoftau prepare phase2).
// Needs field.cuh, curve.cuh and fixedbase.cu (for the batch conversion to affine); the loader
// concatenates them in front of this unit (compile.MODULES["groupfft"]).
//
// WHAT THIS FILE DECIDES, AND WHY
// * One level of size n = 2^p: out[i] = s * sum_j w^(-ij) in[j], s = 1/n (SNARKJS_FORMATS.md §9).
//   Radix-2 DIT: gfft_load permutes the affine input into bit-reversed order as XYZZ points,
//   log2(n) - 1 gfft_pass launches do the butterflies u + [w^j]v, u - [w^j]v out of place
//   (ping-pong buffers, `in` never written, so any launch can simply be repeated), gfft_last does
//   the last stage with the scaling fused in ([s]u +- [s w^j]v: the host folds s into that stage's
//   twiddles and appends s itself as entry n/2), and gfft_affine converts with Montgomery's trick
//   (fb_batch_affine from fixedbase.cu). Any correct algorithm gives the same affine points, so the
//   CPU reference (backends/cpu/groupfft.py) and this file may differ in every internal choice.
// * Twiddle multiplication is a GLV-split fixed-window ladder. The host reduces each scalar k
//   over the lattice, k = k1 + k2*lambda (mod r) with |k1|, |k2| < 2^127, and packs it as
//   GFFT_GLV_WORDS u32: |k1| (4 words), |k2| (4 words), signs (bit 0: k1 < 0, bit 1: k2 < 0).
//   [lambda]P = phi(P) = (beta x, y), i.e. X -> beta X in XYZZ, so ONE table of the multiples
//   [1 .. 2^(C-1)] of +-P serves both halves, and the doubling chain is 128 bits, not 254.
//   lambda is the same for both groups; beta differs (G2's is the square of G1's).
// * Digits are Booth-recoded per window, statelessly: d_i = b_i + bit(iC - 1) - 2^C bit(iC + C - 1)
//   with b_i the C bits of window i, so |d_i| <= 2^(C-1) and the top-down ladder needs no carry
//   from below. Bits above 127 are zero, so the recoding is exact.
// * The ladder runs in XYZZ (curve.cuh's complete add/dbl), G2 through its out-of-line ops.
// * The j == 0 butterflies need no ladder. The grid of gfft_pass is dense over the ladder
//   butterflies (j != 0): thread d does butterfly j = 1 + d % (h - 1) of group d / (h - 1), and the
//   first n / 2h threads also do their group's j == 0 butterfly, so no warp idles at small spans.
// * gfft_coset: the pre-step of the level-29 (power 28) Lagrange construction, H u gH with
//   g = 25 (§5.1): t0' = [K](t1 + [-S]t0), t1'[j] = [K g^-j](t0 - t1) with the per-j scalar split
//   as (K g^-jlo) * g^-(jhi 2^L): two ladders off two host tables of 2^L entries.
// * gfft_twiddles makes the packed twiddle tables on the device (packing them on the host took
//   ~3 us per scalar, about 40% of a power-20 prepare, and every Dask worker packed its own):
//   entry j is k = lo[j mod 2^L] * hi[j >> L] (lo in Montgomery form, hi standard, so one Fr
//   product gives k in standard form), split as k = k1 + k2*lambda with c1, c2 rounded from k times
//   2^256-scaled constants instead of the host's exact division. The rounding is off by at most
//   3/4, so |k1|, |k2| <= 3/4 (|a1| + |a2|) < 2^127 still: the ladder's Booth digits stay exact.
//   Any split gives the same point; the packed words may differ from glv_pack's.
// * Host-compilable: the *_body functions are DP_INLINE and take the thread index; only the
//   __global__ wrappers need a CUDA compiler (tests/test_groupfft_host.py loops the bodies).

#ifndef DP_GROUPFFT_CU
#define DP_GROUPFFT_CU

#define GFFT_WINDOW 5
#define GFFT_GLV_WORDS 9
#define GFFT_RECODE_BITS 128

// beta in Montgomery form: G1's (cube root of unity of Fq with [lambda]P = (beta x, y)) and G2's.
#define GFFT_BETA_G1 {0xd782e155u, 0x71930c11u, 0xffbe3323u, 0xa6bb947cu, 0xd4741444u, 0xaa303344u, 0x26594943u, 0x2c3b3f0du}
#define GFFT_BETA_G2 {0x13e80b9cu, 0x3350c88eu, 0xdb5e56b9u, 0x7dce557cu, 0xb615564au, 0x6001b4b8u, 0x020217e0u, 0x2682e617u}

DP_INLINE Fq gfft_endo_x(Fq x) {
    Fq b = {GFFT_BETA_G1};
    return fq_mul(x, b);
}

DP_INLINE Fq2 gfft_endo_x(Fq2 x) {
    Fq b = {GFFT_BETA_G2};
    Fq2 r;
    r.c0 = fq_mul(x.c0, b);
    r.c1 = fq_mul(x.c1, b);
    return r;
}

// `width` (<= 32) bits of the 128-bit value v[0..4) starting at bit `off`; bits outside [0, 128) read 0.
DP_INLINE u32 gfft_bits(const u32* v, int off, int width) {
    u64 acc = 0;
    for (int b = 0; b < width; b++) {
        int pos = off + b;
        if (pos >= 0 && pos < GFFT_RECODE_BITS) acc |= (u64)((v[pos >> 5] >> (pos & 31)) & 1u) << b;
    }
    return (u32)acc;
}

// Booth digit i of a 128-bit magnitude: returns |d|, sets neg.
template <int C>
DP_INLINE u32 gfft_digit(const u32* v, int i, bool& neg) {
    u32 b = gfft_bits(v, i * C, C);
    u32 low = gfft_bits(v, i * C - 1, 1);
    u32 top = b >> (C - 1);
    int d = (int)(b + low) - (int)(top << C);
    neg = d < 0;
    return (u32)(neg ? -d : d);
}

// [k]P for a packed GLV scalar k (GFFT_GLV_WORDS words).
template <typename F, int C>
DP_INLINE Xyzz<F> gfft_mul(const Xyzz<F>& p, const u32* k) {
    if (pt_is_inf(p)) return p;
    u32 sign = k[8];
    Xyzz<F> base = (sign & 1u) ? pt_neg(p) : p;
    bool flip = ((sign ^ (sign >> 1)) & 1u) != 0u;  // k2's sign differs from k1's
    Xyzz<F> tbl[1 << (C - 1)];
    tbl[0] = base;
    for (int i = 1; i < (1 << (C - 1)); i++) tbl[i] = (i == 1) ? pt_dbl(base) : pt_add(tbl[i - 1], base);
    Xyzz<F> acc = xyzz_zero_t<F>();
    const int nw = (GFFT_RECODE_BITS + C - 1) / C;
    for (int w = nw - 1; w >= 0; w--) {
        for (int j = 0; j < C; j++) acc = pt_dbl(acc);  // the identity doubles to itself
        bool neg;
        u32 mag = gfft_digit<C>(k, w, neg);
        if (mag) {
            Xyzz<F> e = tbl[mag - 1];
            acc = pt_add(acc, neg ? pt_neg(e) : e);
        }
        mag = gfft_digit<C>(k + 4, w, neg);
        if (mag) {
            Xyzz<F> e = tbl[mag - 1];
            e.x = gfft_endo_x(e.x);
            acc = pt_add(acc, (neg != flip) ? pt_neg(e) : e);
        }
    }
    return acc;
}

DP_INLINE u32 gfft_rev(u32 i, u32 bits) {
    u32 r = 0;
    for (u32 b = 0; b < bits; b++) r |= ((i >> b) & 1u) << (bits - 1 - b);
    return r;
}

DP_INLINE void gfft_load_aff(AffG1& a, const u32* p) { a.x = fq_load(p); a.y = fq_load(p + 8); }
DP_INLINE void gfft_load_aff(AffG2& a, const u32* p) { a.x = fq2_load(p); a.y = fq2_load(p + 16); }

// out[i] = in[rev(i)] (or in[i] when bitrev is 0) as XYZZ; W = u32 words per affine input row.
template <typename F, int W>
DP_INLINE void gfft_load_body(const u32* aff, Xyzz<F>* out, u32 n, u32 log_n, u32 bitrev, u32 tid) {
    if (tid >= n) return;
    Aff<F> a;
    gfft_load_aff(a, aff + (u64)(bitrev ? gfft_rev(tid, log_n) : tid) * W);
    out[tid] = pt_from_aff(a);
}

// One butterfly stage with half-span h = 2^log_h < n/2; tw = n/2 packed entries for w^(-j), the
// stage reads entry j << tw_shift. Threads: n/2 when h == 1, else n/2 - n/(2h) (see banner).
template <typename F>
DP_INLINE void gfft_pass_body(const Xyzz<F>* in, Xyzz<F>* out, const u32* tw, u32 n, u32 log_h, u32 tw_shift,
                              u32 tid) {
    u32 h = 1u << log_h;
    u32 groups = (n >> 1) >> log_h;
    if (h == 1u) {
        if (tid >= groups) return;
        Xyzz<F> u = in[2 * tid], t = in[2 * tid + 1];
        out[2 * tid] = pt_add(u, t);
        out[2 * tid + 1] = pt_add(u, pt_neg(t));
        return;
    }
    if (tid >= (n >> 1) - groups) return;
    u32 g = tid / (h - 1u);
    u32 j = 1u + (tid - g * (h - 1u));
    u32 lo = (g << (log_h + 1)) + j;
    Xyzz<F> t = gfft_mul<F, GFFT_WINDOW>(in[lo + h], tw + (u64)(j << tw_shift) * GFFT_GLV_WORDS);
    Xyzz<F> u = in[lo];
    out[lo] = pt_add(u, t);
    out[lo + h] = pt_add(u, pt_neg(t));
    if (tid < groups) {
        u32 lo0 = tid << (log_h + 1);
        Xyzz<F> u0 = in[lo0], t0 = in[lo0 + h];
        out[lo0] = pt_add(u0, t0);
        out[lo0 + h] = pt_add(u0, pt_neg(t0));
    }
}

// The last stage (h = n/2, one group) with the scaling: stw = n/2 entries s w^(-j), then s.
template <typename F>
DP_INLINE void gfft_last_body(const Xyzz<F>* in, Xyzz<F>* out, const u32* stw, u32 n, u32 tid) {
    u32 h = n >> 1;
    if (tid >= h) return;
    Xyzz<F> t = gfft_mul<F, GFFT_WINDOW>(in[tid + h], stw + (u64)tid * GFFT_GLV_WORDS);
    Xyzz<F> u = gfft_mul<F, GFFT_WINDOW>(in[tid], stw + (u64)h * GFFT_GLV_WORDS);
    out[tid] = pt_add(u, t);
    out[tid + h] = pt_add(u, pt_neg(t));
}

// Level-29 pre-step on m = 2^log_m points per half (see banner). cst = [-S, K] packed; lo = 2^log_lo
// entries K g^-i, hi = m >> log_lo entries g^-(i 2^log_lo).
template <typename F>
DP_INLINE void gfft_coset_body(const Xyzz<F>* t0, const Xyzz<F>* t1, Xyzz<F>* o0, Xyzz<F>* o1, const u32* cst,
                               const u32* lo, const u32* hi, u32 m, u32 log_lo, u32 tid) {
    if (tid >= m) return;
    Xyzz<F> a = t0[tid], b = t1[tid];
    Xyzz<F> d0 = pt_add(b, gfft_mul<F, GFFT_WINDOW>(a, cst));
    o0[tid] = gfft_mul<F, GFFT_WINDOW>(d0, cst + GFFT_GLV_WORDS);
    Xyzz<F> d1 = pt_add(a, pt_neg(b));
    u32 jl = tid & ((1u << log_lo) - 1u), jh = tid >> log_lo;
    d1 = gfft_mul<F, GFFT_WINDOW>(d1, lo + (u64)jl * GFFT_GLV_WORDS);
    o1[tid] = gfft_mul<F, GFFT_WINDOW>(d1, hi + (u64)jh * GFFT_GLV_WORDS);
}

// GLV lattice (distprove/glv.py BASIS: (a1, b1), (a2, b2), det = -r; a1, a2, b1 > 0 > b2,
// b1 = a2) and the rounding constants floor(2^256 |b2| / r), floor(2^256 b1 / r).
#define GFFT_GLV_G1 {0x391eb18du, 0x7a7bd9d4u, 0xa773d2cfu, 0x4ccef014u, 0x00000002u}
#define GFFT_GLV_G2 {0xc7e0b3d7u, 0xd91d232eu, 0x00000002u}
#define GFFT_GLV_A1 {0x1221250bu, 0x0be4e154u, 0xeeb859fdu, 0x6f4d8248u}
#define GFFT_GLV_B1 {0x94d213e3u, 0x89d32568u}
#define GFFT_GLV_B2 {0x7d4f1128u, 0x8211bbebu, 0xeeb859fcu, 0x6f4d8248u}
#define GFFT_SPLIT_WORDS 5  // k1, k2 are computed mod 2^160: |k1|, |k2| < 2^127 fit with their sign

// r[0..nr) = the low nr words of a (na words) * b (nb words).
DP_INLINE void gfft_mul_words(u32* r, int nr, const u32* a, int na, const u32* b, int nb) {
    for (int i = 0; i < nr; i++) r[i] = 0u;
    for (int i = 0; i < na && i < nr; i++) {
        u64 carry = 0;
        for (int j = 0; j < nb && i + j < nr; j++) {
            u64 t = (u64)a[i] * b[j] + r[i + j] + carry;
            r[i + j] = (u32)t;
            carry = t >> 32;
        }
        if (i + nb < nr) r[i + nb] = (u32)carry;
    }
}

// a -= b (sign = -1) or a += b (sign = 1), mod 2^(32 GFFT_SPLIT_WORDS).
DP_INLINE void gfft_acc_words(u32* a, const u32* b, int sign) {
    u64 carry = sign > 0 ? 0u : 1u;  // a - b = a + ~b + 1
    for (int i = 0; i < GFFT_SPLIT_WORDS; i++) {
        u64 t = (u64)a[i] + (sign > 0 ? b[i] : ~b[i]) + carry;
        a[i] = (u32)t;
        carry = t >> 32;
    }
}

// round(k * g / 2^256) for k < 2^256 (8 words) and g (ng <= 5 words): words 8.. of k*g + 2^255.
DP_INLINE void gfft_round_quot(u32* c, const u32* k, const u32* g, int ng) {
    u32 prod[13];
    gfft_mul_words(prod, 8 + ng, k, 8, g, ng);
    u64 t = (u64)prod[7] + 0x80000000u;
    prod[7] = (u32)t;
    for (int i = 8; i < 8 + ng; i++) {
        t = (u64)prod[i] + (t >> 32);
        prod[i] = (u32)t;
    }
    for (int i = 0; i < 4; i++) c[i] = i < ng ? prod[8 + i] : 0u;
}

// Packed GLV row (GFFT_GLV_WORDS words) of a standard-form scalar k < r.
DP_INLINE void gfft_glv_split(const u32* k, u32* out) {
    const u32 g1[5] = GFFT_GLV_G1, g2[3] = GFFT_GLV_G2;
    const u32 a1[4] = GFFT_GLV_A1, b1[2] = GFFT_GLV_B1, b2[4] = GFFT_GLV_B2;
    u32 c1[4], c2[4];
    gfft_round_quot(c1, k, g1, 5);  // < 2^128
    gfft_round_quot(c2, k, g2, 3);  // < 2^64
    u32 k1[GFFT_SPLIT_WORDS], k2[GFFT_SPLIT_WORDS], t[GFFT_SPLIT_WORDS];
    for (int i = 0; i < GFFT_SPLIT_WORDS; i++) k1[i] = k[i];
    gfft_mul_words(t, GFFT_SPLIT_WORDS, c1, 4, a1, 4);
    gfft_acc_words(k1, t, -1);  // k1 = k - c1 a1 - c2 a2 (a2 = b1)
    gfft_mul_words(t, GFFT_SPLIT_WORDS, c2, 2, b1, 2);
    gfft_acc_words(k1, t, -1);
    gfft_mul_words(k2, GFFT_SPLIT_WORDS, c2, 2, b2, 4);  // k2 = -c1 b1 - c2 b2 = c2 |b2| - c1 b1
    gfft_mul_words(t, GFFT_SPLIT_WORDS, c1, 4, b1, 2);
    gfft_acc_words(k2, t, -1);
    u32 signs = 0u;
    u32* halves[2] = {k1, k2};
    for (int h = 0; h < 2; h++) {
        u32* v = halves[h];
        if (v[GFFT_SPLIT_WORDS - 1] >> 31) {  // negative: take the magnitude
            u32 zero[GFFT_SPLIT_WORDS] = {0u, 0u, 0u, 0u, 0u};
            gfft_acc_words(zero, v, -1);
            for (int i = 0; i < GFFT_SPLIT_WORDS; i++) v[i] = zero[i];
            signs |= 1u << h;
        }
        for (int i = 0; i < 4; i++) out[4 * h + i] = v[i];
    }
    out[8] = signs;
}

// Twiddle table entry j < m: k_j = lo[j mod 2^log_lo] * hi[j >> log_lo] in Fr (lo Montgomery, hi
// standard, so the product is standard), packed for gfft_mul.
DP_INLINE void gfft_twiddles_body(u32* out, const u32* lo, const u32* hi, u32 log_lo, u32 m, u32 tid) {
    if (tid >= m) return;
    Fr a = fr_load(lo + (u64)(tid & ((1u << log_lo) - 1u)) * 8);
    Fr b = fr_load(hi + (u64)(tid >> log_lo) * 8);
    Fr k = fr_mul(a, b);
    gfft_glv_split(k.v, out + (u64)tid * GFFT_GLV_WORDS);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

#define GFFT_KERNELS(G, F, W)                                                                              \
    extern "C" __global__ void gfft_load_##G(const u32* __restrict__ aff, Xyzz<F>* __restrict__ out,     \
                                             u32 n, u32 log_n, u32 bitrev) {                              \
        gfft_load_body<F, W>(aff, out, n, log_n, bitrev, blockIdx.x * blockDim.x + threadIdx.x);         \
    }                                                                                                     \
    extern "C" __global__ void gfft_pass_##G(const Xyzz<F>* __restrict__ in, Xyzz<F>* __restrict__ out,  \
                                             const u32* __restrict__ tw, u32 n, u32 log_h, u32 tw_shift) { \
        gfft_pass_body<F>(in, out, tw, n, log_h, tw_shift, blockIdx.x * blockDim.x + threadIdx.x);       \
    }                                                                                                     \
    extern "C" __global__ void gfft_last_##G(const Xyzz<F>* __restrict__ in, Xyzz<F>* __restrict__ out,  \
                                             const u32* __restrict__ stw, u32 n) {                        \
        gfft_last_body<F>(in, out, stw, n, blockIdx.x * blockDim.x + threadIdx.x);                        \
    }                                                                                                     \
    extern "C" __global__ void gfft_coset_##G(const Xyzz<F>* __restrict__ t0, const Xyzz<F>* __restrict__ t1, \
                                              Xyzz<F>* __restrict__ o0, Xyzz<F>* __restrict__ o1,          \
                                              const u32* __restrict__ cst, const u32* __restrict__ lo,     \
                                              const u32* __restrict__ hi, u32 m, u32 log_lo) {             \
        gfft_coset_body<F>(t0, t1, o0, o1, cst, lo, hi, m, log_lo, blockIdx.x * blockDim.x + threadIdx.x); \
    }                                                                                                     \
    extern "C" __global__ void gfft_affine_##G(const u32* __restrict__ xyzz, u32* __restrict__ out, u32 n) { \
        u32 first = (blockIdx.x * blockDim.x + threadIdx.x) * FB_BATCH;                                   \
        if (first >= n) return;                                                                           \
        fb_batch_affine<F, W>(xyzz, out, first, n - first < FB_BATCH ? n - first : FB_BATCH);             \
    }

GFFT_KERNELS(g1, Fq, 16)
GFFT_KERNELS(g2, Fq2, 32)

#undef GFFT_KERNELS

extern "C" __global__ void gfft_twiddles(u32* __restrict__ out, const u32* __restrict__ lo, const u32* __restrict__ hi,
                                         u32 log_lo, u32 m) {
    gfft_twiddles_body(out, lo, hi, log_lo, m, blockIdx.x * blockDim.x + threadIdx.x);
}

#endif

#endif  // DP_GROUPFFT_CU
