// field.cuh - BN254 prime fields Fr, Fq and the quadratic extension Fq2, for CUDA and host C++.
//
// WHAT THIS FILE DECIDES, AND WHY
// * Layout is the project's (docs/DESIGN.md): 8 little-endian u32 limbs, limb 0 least
//   significant, Montgomery form with R = 2^256. Every function takes and returns fully
//   reduced values (< p), so equality is limb equality and zero is all-zero limbs, which is
//   also how infinity is stored on disk.
// * Multiplication is Montgomery with R = 2^256 (mont_mul / mont_sqr), in two implementations
//   that give the same bits: on Hopper and B200 devices the FP64-pipe product (mont_mul_f64 /
//   mont_sqr_f64, below: 52-bit limbs, partial products by fused multiply-adds; on an H200 a
//   chain of Fq products runs at 52.7 against CIOS's 37.4 G/s, and G1 2^24 / G2 2^22 MSMs are
//   12% / 17% faster);
//   on the host, on other GPUs (their FP64 pipe is narrower, see DP_F64_MUL below) and with
//   -DDP_CIOS_MUL, CIOS on 32-bit limbs (-DDP_F64_MUL forces the FP64 product anywhere: the
//   tests build both). Both moduli are below 2^254, so the CIOS result is below 2p < 2^256
//   and one conditional subtraction finishes it (no 9th limb survives). CIOS squaring makes
//   each cross product once (mont_sqr8: 22% fewer multiply instructions).
// * Every function is DP_INLINE = __host__ __device__ __forceinline__ under a CUDA compiler
//   and plain `inline` under a host C++ compiler, so tests/test_kernels_host.py builds this
//   file with g++/nvcc on a machine without a GPU and checks it against distprove/bn254.py.
//   One exception on the device: fq_mul_call (and fq_sqr_call), the Fq product (square) out
//   of line, which point code calls (Fq2's products here, G1's in curve.cuh). A point
//   addition of ten (G1) or thirty (G2) unrolled CIOS products is a loop body larger than the
//   instruction cache; as calls, G1 MSMs run 9-13% and G2 MSMs 13% faster on an H200 and the
//   msm module compiles in under a minute instead of ~7. A call is a scheduling barrier, so
//   two independent products go to one body of two (fq_mul2_call, fq_sqr2_call; Fq2's
//   products use them too) where the compiler interleaves them (the XYZZ accumulation of G1
//   2^21 on an H200: 10.1 against 10.5 ms), the pair rounds excepted (below and
//   msm_affine.cu).
//   Device-only fast paths (inline PTX carry chains) live under `#ifdef __CUDA_ARCH__` and
//   always have the portable C version beside them; define DP_PORTABLE to force it, and
//   DP_PTX_MUL (with DP_CIOS_MUL) to use the PTX CIOS product as well.
// * Moduli are literals in local arrays, not __constant__ memory: after full unrolling the
//   compiler folds them into immediates, and host code can use the same source.
// * No #include: NVRTC has no filesystem. The loader concatenates units; the guard makes a
//   repeated unit harmless.

#ifndef DP_FIELD_CUH
#define DP_FIELD_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DP_INLINE __host__ __device__ __forceinline__
#define DP_NOINLINE __host__ __device__ __noinline__
#define DP_UNROLL _Pragma("unroll")
#else
#define DP_INLINE inline
#define DP_NOINLINE
#define DP_UNROLL
#endif

#if defined(__CUDA_ARCH__) && !defined(DP_PORTABLE)
#define DP_USE_PTX 1
#endif
// DP_PTX_MUL (opt-in; measured slower) also moves the CIOS product to PTX.
// The FP64 product where the FP64 pipe is as wide as the integer multiply pipe: Hopper (sm_90,
// measured on an H200) and Blackwell B200 (sm_100). Elsewhere it is half as wide (sm_60/70/80,
// unmeasured) or 1/32-1/64 of it (GeForce, workstation and embedded parts, where FP64 products
// would be many times slower), so CIOS stays there.
#if defined(__CUDA_ARCH__) && !defined(DP_CIOS_MUL) && !defined(DP_F64_MUL) && \
    (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000)
#define DP_F64_MUL 1  // the device's products and squares: the FP64 pipe's (see the banner)
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// 16-byte alignment (size unchanged) lets struct copies from global memory use 128-bit loads.
struct alignas(16) Fr { u32 v[8]; };
struct alignas(16) Fq { u32 v[8]; };
struct Fq2 { Fq c0, c1; };

#define DP_FQ_P {0xd87cfd47u, 0x3c208c16u, 0x6871ca8du, 0x97816a91u, 0x8181585du, 0xb85045b6u, 0xe131a029u, 0x30644e72u}
#define DP_FQ_NP 0xe4866389u
#define DP_FQ_ONE {0xc58f0d9du, 0xd35d438du, 0xf5c70b3du, 0x0a78eb28u, 0x7879462cu, 0x666ea36fu, 0x9a07df2fu, 0x0e0a77c1u}
#define DP_FQ_R2 {0x538afa89u, 0xf32cfc5bu, 0xd44501fbu, 0xb5e71911u, 0x0a417ff6u, 0x47ab1effu, 0xcab8351fu, 0x06d89f71u}
// p in 52-bit limbs (exact doubles) and -p^-1 mod 2^52, for the FP64 product (DP_F64_MUL)
#define DP_FQ_P52 {0x08c16d87cfd47p0, 0x916871ca8d3c2p0, 0x181585d97816ap0, 0xa029b85045b68p0, 0x030644e72e131p0}
#define DP_FQ_NP52 0x20782e4866389ull

#define DP_FR_P {0xf0000001u, 0x43e1f593u, 0x79b97091u, 0x2833e848u, 0x8181585du, 0xb85045b6u, 0xe131a029u, 0x30644e72u}
#define DP_FR_NP 0xefffffffu
#define DP_FR_ONE {0x4ffffffbu, 0xac96341cu, 0x9f60cd29u, 0x36fc7695u, 0x7879462eu, 0x666ea36fu, 0x9a07df2fu, 0x0e0a77c1u}
#define DP_FR_R2 {0xae216da7u, 0x1bb8e645u, 0xe35c59e3u, 0x53fe3ab1u, 0x53bb8085u, 0x8c49833du, 0x7f4e44a5u, 0x0216d0b1u}
#define DP_FR_P52 {0x1f593f0000001p0, 0x4879b9709143ep0, 0x181585d2833e8p0, 0xa029b85045b68p0, 0x030644e72e131p0}
#define DP_FR_NP52 0x1f593efffffffull

// ---------------------------------------------------------------------------------------
// Generic 8-limb helpers. `p` is always a local literal array, so these fold to immediates.
// ---------------------------------------------------------------------------------------

// r = a - b over 256 bits; returns the final borrow (0 or 1).
DP_INLINE u32 mp_sub8(u32 r[8], const u32 a[8], const u32 b[8]) {
#ifdef DP_USE_PTX
    u32 borrow;
    asm("sub.cc.u32  %0, %9, %17;\n\t"
        "subc.cc.u32 %1, %10, %18;\n\t"
        "subc.cc.u32 %2, %11, %19;\n\t"
        "subc.cc.u32 %3, %12, %20;\n\t"
        "subc.cc.u32 %4, %13, %21;\n\t"
        "subc.cc.u32 %5, %14, %22;\n\t"
        "subc.cc.u32 %6, %15, %23;\n\t"
        "subc.cc.u32 %7, %16, %24;\n\t"
        "subc.u32    %8, 0, 0;"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
          "=r"(r[7]), "=r"(borrow)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
          "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
    return borrow & 1u;
#else
    u32 borrow = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) {
        u64 d = (u64)a[i] - b[i] - borrow;
        r[i] = (u32)d;
        borrow = (u32)(d >> 63);
    }
    return borrow;
#endif
}

// r = a + b over 256 bits; returns the final carry (0 or 1).
DP_INLINE u32 mp_add8(u32 r[8], const u32 a[8], const u32 b[8]) {
#ifdef DP_USE_PTX
    u32 carry;
    asm("add.cc.u32  %0, %9, %17;\n\t"
        "addc.cc.u32 %1, %10, %18;\n\t"
        "addc.cc.u32 %2, %11, %19;\n\t"
        "addc.cc.u32 %3, %12, %20;\n\t"
        "addc.cc.u32 %4, %13, %21;\n\t"
        "addc.cc.u32 %5, %14, %22;\n\t"
        "addc.cc.u32 %6, %15, %23;\n\t"
        "addc.cc.u32 %7, %16, %24;\n\t"
        "addc.u32    %8, 0, 0;"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
          "=r"(r[7]), "=r"(carry)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
          "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
    return carry;
#else
    u32 carry = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) {
        u64 s = (u64)a[i] + b[i] + carry;
        r[i] = (u32)s;
        carry = (u32)(s >> 32);
    }
    return carry;
#endif
}

// r = a - p if a >= p, else a (r may be a).
DP_INLINE void mp_csub8(u32 r[8], const u32 a[8], const u32 p[8]) {
    u32 d[8];
    u32 borrow = mp_sub8(d, a, p);
DP_UNROLL
    for (int i = 0; i < 8; i++) r[i] = borrow ? a[i] : d[i];
}

// r = a - p if reduce and a >= p, else a: a Montgomery product's last step, which lazy callers
// leave out (their values stay below 2p).
DP_INLINE void mp_csub8_if(u32 r[8], const u32 a[8], const u32 p[8], bool reduce) {
    if (reduce) {
        mp_csub8(r, a, p);
    } else {
DP_UNROLL
        for (int k = 0; k < 8; k++) r[k] = a[k];
    }
}

// r = a + b mod p for a, b < p < 2^255.
DP_INLINE void mod_add8(u32 r[8], const u32 a[8], const u32 b[8], const u32 p[8]) {
    u32 s[8];
    mp_add8(s, a, b);
    mp_csub8(r, s, p);
}

// r = a - b mod p for a, b < p.
DP_INLINE void mod_sub8(u32 r[8], const u32 a[8], const u32 b[8], const u32 p[8]) {
    u32 d[8], s[8];
    u32 borrow = mp_sub8(d, a, b);
    mp_add8(s, d, p);
DP_UNROLL
    for (int i = 0; i < 8; i++) r[i] = borrow ? s[i] : d[i];
}

#if defined(DP_PTX_MUL) && defined(DP_USE_PTX)
// t[0..10) += a * b as two carry chains (low halves into t0..t7, high halves into t1..t8); each
// chain is one asm statement so the carry flag never crosses compiler-scheduled code.
__device__ __forceinline__ void mp_mac_row(u32 t[10], const u32 a[8], u32 b) {
    asm(
        "mad.lo.cc.u32  %0, %10, %18, %0;\n\t"
        "madc.lo.cc.u32 %1, %11, %18, %1;\n\t"
        "madc.lo.cc.u32 %2, %12, %18, %2;\n\t"
        "madc.lo.cc.u32 %3, %13, %18, %3;\n\t"
        "madc.lo.cc.u32 %4, %14, %18, %4;\n\t"
        "madc.lo.cc.u32 %5, %15, %18, %5;\n\t"
        "madc.lo.cc.u32 %6, %16, %18, %6;\n\t"
        "madc.lo.cc.u32 %7, %17, %18, %7;\n\t"
        "addc.cc.u32    %8, %8, 0;\n\t"
        "addc.u32       %9, %9, 0;"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]),
          "+r"(t[7]), "+r"(t[8]), "+r"(t[9])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(b));
    asm(
        "mad.hi.cc.u32  %1, %10, %18, %1;\n\t"
        "madc.hi.cc.u32 %2, %11, %18, %2;\n\t"
        "madc.hi.cc.u32 %3, %12, %18, %3;\n\t"
        "madc.hi.cc.u32 %4, %13, %18, %4;\n\t"
        "madc.hi.cc.u32 %5, %14, %18, %5;\n\t"
        "madc.hi.cc.u32 %6, %15, %18, %6;\n\t"
        "madc.hi.cc.u32 %7, %16, %18, %7;\n\t"
        "madc.hi.cc.u32 %8, %17, %18, %8;\n\t"
        "addc.u32       %9, %9, 0;"
        : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]),
          "+r"(t[7]), "+r"(t[8]), "+r"(t[9])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(b));
}
#endif

// t[j] += a[j] * b for j = j0 .. 7, carries rippling up; returns the carry out of t[7]. Callers
// pass t + i for a row at limb offset i (the portable products' one row loop).
DP_INLINE u32 mp_mac8(u32* t, const u32 a[8], u32 b, int j0) {
    u64 c = 0;
DP_UNROLL
    for (int j = j0; j < 8; j++) {
        c += (u64)a[j] * b + t[j];
        t[j] = (u32)c;
        c >>= 32;
    }
    return (u32)c;
}

// r = a * b * 2^-256 mod p (CIOS), for a, b < p < 2^254; r < p (reduce = false: a, b < 2p, and r
// < 2p congruent to it, the subtraction left out).
DP_INLINE void mont_mul8(u32 r[8], const u32 a[8], const u32 b[8], const u32 p[8], u32 np, bool reduce = true) {
    u32 t[10];
#if defined(DP_USE_PTX) && defined(DP_PTX_MUL)
    DP_UNROLL
    for (int j = 0; j < 10; j++) t[j] = 0;
    DP_UNROLL
    for (int i = 0; i < 8; i++) {
        mp_mac_row(t, a, b[i]);
        mp_mac_row(t, p, t[0] * np);  // t0 becomes 0: shift down one limb
        DP_UNROLL
        for (int j = 0; j < 9; j++) t[j] = t[j + 1];
        t[9] = 0;
    }
#else
DP_UNROLL
    for (int j = 0; j < 10; j++) t[j] = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) {
        u64 c = (u64)mp_mac8(t, a, b[i], 0) + t[8];
        t[8] = (u32)c;
        t[9] = (u32)(c >> 32);
        u32 m = t[0] * np;
        c = ((u64)m * p[0] + t[0]) >> 32;
DP_UNROLL
        for (int j = 1; j < 8; j++) {
            c += (u64)m * p[j] + t[j];
            t[j - 1] = (u32)c;
            c >>= 32;
        }
        c += t[8];
        t[7] = (u32)c;
        t[8] = t[9] + (u32)(c >> 32);
    }
#endif
    mp_csub8_if(r, t, p, reduce);
}

// r = a^2 * 2^-256 mod p for a < p < 2^254; r < p (SOS: the square, then the reduction). The
// square's 28 cross products are made once and doubled, plus 8 squares: 100 widening products
// and 8 low-only against mont_mul8's 128 and 8. -DDP_SQR_MUL squares with mont_mul8 instead.
DP_INLINE void mont_sqr8(u32 r[8], const u32 a[8], const u32 p[8], u32 np) {
    u32 t[16];
DP_UNROLL
    for (int k = 0; k < 16; k++) t[k] = 0;
DP_UNROLL
    for (int i = 0; i < 7; i++) t[i + 8] = mp_mac8(t + i, a, a[i], i + 1);  // cross products a_i a_j, i < j
DP_UNROLL
    for (int k = 15; k > 0; k--) t[k] = (t[k] << 1) | (t[k - 1] >> 31);
    u64 c = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) {  // + a_i^2 (t[0] is 0: no cross product reaches it)
        u64 sq = (u64)a[i] * a[i];
        c += (u64)t[2 * i] + (u32)sq;
        t[2 * i] = (u32)c;
        c = (c >> 32) + (u64)t[2 * i + 1] + (u32)(sq >> 32);
        t[2 * i + 1] = (u32)c;
        c >>= 32;
    }
    u32 hi = 0;  // carry into t[i + 8] from the row before
DP_UNROLL
    for (int i = 0; i < 8; i++) {  // t += m p 2^(32 i) clears limb i
        c = (u64)mp_mac8(t + i, p, t[i] * np, 0) + t[i + 8] + hi;
        t[i + 8] = (u32)c;
        hi = (u32)(c >> 32);
    }
    mp_csub8(r, t + 8, p);  // t / 2^256 < 2p, so hi is 0
}

// ---------------------------------------------------------------------------------------
// The Montgomery product on the FP64 pipe (DP_F64_MUL: the default on sm_90 and sm_100;
// Emmart and Weems's double-precision technique). The integer multiply pipe is what CIOS
// waits on; the FP64 pipe beside it is as wide on an H100/H200, and a fused multiply-add
// there yields 52 x 52-bit partial products. Operands become five 52-bit limbs held exactly
// in doubles (bit pattern 2^52 + limb, minus 2^52). Each partial product A B < 2^104 splits exactly:
//   h = fma_rz(A, B, 2^104)        = 2^104 + floor(A B / 2^52) 2^52  (bits 0x467.. + high)
//   l = fma_rn(A, B, 2^104 + 2^52 - h) = 2^52 + (A B mod 2^52)     (bits 0x433.. + low)
// and both bit patterns are summed as 64-bit integers into ten column sums, whose known
// exponent bits are subtracted up front (sums are taken mod 2^64; the true ones stay below
// 2^58). The reduction clears 52 bits four times and 48 once (q from the column's low bits
// by integer products), so the result carries R = 2^256 like the integer products and the
// two can be mixed freely. Per product 405 SASS instructions on sm_90, 165 of them FP64,
// against CIOS's ~556 (cuobjdump of pipelines/bench_field.py's chain kernel).
// ---------------------------------------------------------------------------------------

#define DP_E_LO 0x4330000000000000ull  // bits of 2^52
#define DP_E_HI 0x4670000000000000ull  // bits of 2^104

DP_INLINE u64 dp_dbits(double x) {
#ifdef __CUDA_ARCH__
    return (u64)__double_as_longlong(x);
#else
    u64 r; __builtin_memcpy(&r, &x, 8); return r;
#endif
}

DP_INLINE double dp_bitsd(u64 x) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)x);
#else
    double r; __builtin_memcpy(&r, &x, 8); return r;
#endif
}

// bits of 2^104 + floor(a b / 2^52) for integral a, b < 2^52 (host: the same bits exactly).
DP_INLINE u64 dp_hi52(double a, double b) {
#ifdef __CUDA_ARCH__
    return dp_dbits(__fma_rz(a, b, 0x1p104));
#else
    return DP_E_HI | (u64)(((unsigned __int128)(u64)a * (u64)b) >> 52);
#endif
}

// bits of 2^52 + (a b mod 2^52), given h = dp_hi52(a, b).
DP_INLINE u64 dp_lo52(double a, double b, u64 h) {
    double k = (0x1p104 + 0x1p52) - dp_bitsd(h);
#ifdef __CUDA_ARCH__
    return dp_dbits(__fma_rn(a, b, k));
#else
    return dp_dbits(__builtin_fma(a, b, k));
#endif
}

// The integer hi 2^32 + lo (hi < 2^20) as an exact double: the bits of 2^52 + it, minus 2^52.
DP_INLINE double dp_u52(u32 hi, u32 lo) { return dp_bitsd(((u64)(hi | (u32)(DP_E_LO >> 32)) << 32) | lo) - 0x1p52; }

// Limb k (bits 52k .. 52k + 51) of a < 2^256, as an exact double.
DP_INLINE double dp_limb52(const u32 a[8], int k) {
    const int w = (52 * k) >> 5, s = (52 * k) & 31;
    const u64 lo64 = ((u64)a[w + 1] << 32) | a[w];
    const u64 hi64 = ((u64)(w + 2 < 8 ? a[w + 2] : 0u) << 32) | a[w + 1];
    return dp_u52((u32)(hi64 >> s) & 0xfffffu, (u32)(lo64 >> s));
}

// Partial products in column k of a five-limb product (pairs i + j = k).
DP_INLINE int dp_pairs5(int k) { return k < 0 || k > 8 ? 0 : (k < 5 ? k + 1 : 9 - k); }

// Column sums of a five-limb product start at minus the exponent bits the product and the
// reduction will add: pairs5(k) lows and pairs5(k - 1) highs each.
DP_INLINE void dp_cols_init(u64 col[10]) {
DP_UNROLL
    for (int k = 0; k < 10; k++)
        col[k] = 0ull - 2ull * ((u64)dp_pairs5(k) * DP_E_LO + (u64)dp_pairs5(k - 1) * DP_E_HI);
}

// r = col 2^-256 mod p, for column sums of a product of two values below p: clears 52 bits
// of column i four times and 48 once (col += q p 2^(52 i), q from the column's low bits).
DP_INLINE void dp_redc(u32 r[8], u64 col[10], const u32 p[8], const double P[5], u64 np52, bool reduce = true) {
    const u32 nlo = (u32)np52, nhi = (u32)(np52 >> 32);
DP_UNROLL
    for (int i = 0; i < 5; i++) {
        const u32 tlo = (u32)col[i], thi = (u32)(col[i] >> 32);
        const u64 qq = (u64)tlo * nlo + ((u64)(tlo * nhi + thi * nlo) << 32);
        const double q = dp_u52((u32)(qq >> 32) & (i < 4 ? 0xfffffu : 0xffffu), (u32)qq);
DP_UNROLL
        for (int j = 0; j < 5; j++) {
            const u64 h = dp_hi52(q, P[j]);
            col[i + j] += dp_lo52(q, P[j], h);
            col[i + j + 1] += h;
        }
        if (i < 4) col[i + 1] += col[i] >> 52;
    }
    // result = col[4] / 2^48 + 16 (col[5] + col[6] 2^52 + ...), below 2p < 2^255
    const u64 r0 = col[4] >> 48;
    col[5] += r0 >> 4;
DP_UNROLL
    for (int k = 5; k < 9; k++) { col[k + 1] += col[k] >> 52; col[k] &= 0xfffffffffffffull; }
    const u64 w0 = (r0 & 15) | (col[5] << 4) | (col[6] << 56);
    const u64 w1 = (col[6] >> 8) | (col[7] << 44);
    const u64 w2 = (col[7] >> 20) | (col[8] << 32);
    const u64 w3 = (col[8] >> 32) | (col[9] << 20);
    u32 t[8] = {(u32)w0, (u32)(w0 >> 32), (u32)w1, (u32)(w1 >> 32), (u32)w2, (u32)(w2 >> 32), (u32)w3, (u32)(w3 >> 32)};
    mp_csub8_if(r, t, p, reduce);
}

// r = a B 2^-256 mod p for a < p and B the five 52-bit limbs of a value below p < 2^254 (p also as
// 52-bit limbs P, and -p^-1 mod 2^52): a multiplier split once ahead of use skips its conversion.
// reduce = false leaves out the final subtraction: for a < 4p (4p < 2^256) the result is below
// p (1 + 4p / 2^256) < 2p, congruent to a B 2^-256 (ntt.cu's lazy butterflies).
DP_INLINE void mont_mul_f64_split(u32 r[8], const u32 a[8], const double B[5], const u32 p[8], const double P[5],
                                  u64 np52, bool reduce = true) {
    double A[5];
DP_UNROLL
    for (int k = 0; k < 5; k++) A[k] = dp_limb52(a, k);
    u64 col[10];
    dp_cols_init(col);
DP_UNROLL
    for (int i = 0; i < 5; i++) {
DP_UNROLL
        for (int j = 0; j < 5; j++) {
            const u64 h = dp_hi52(A[i], B[j]);
            col[i + j] += dp_lo52(A[i], B[j], h);
            col[i + j + 1] += h;
        }
    }
    dp_redc(r, col, p, P, np52, reduce);
}

// r = a b 2^-256 mod p for a, b < p < 2^254 (reduce = false: as mont_mul_f64_split's).
DP_INLINE void mont_mul_f64(u32 r[8], const u32 a[8], const u32 b[8], const u32 p[8], const double P[5], u64 np52,
                            bool reduce = true) {
    double B[5];
DP_UNROLL
    for (int k = 0; k < 5; k++) B[k] = dp_limb52(b, k);
    mont_mul_f64_split(r, a, B, p, P, np52, reduce);
}

// r = a^2 2^-256 mod p: each cross product made once and added twice (15 partial products).
DP_INLINE void mont_sqr_f64(u32 r[8], const u32 a[8], const u32 p[8], const double P[5], u64 np52) {
    double A[5];
DP_UNROLL
    for (int k = 0; k < 5; k++) A[k] = dp_limb52(a, k);
    u64 col[10];
    dp_cols_init(col);
DP_UNROLL
    for (int i = 0; i < 5; i++) {
DP_UNROLL
        for (int j = i; j < 5; j++) {
            const u64 h = dp_hi52(A[i], A[j]), l = dp_lo52(A[i], A[j], h);
            col[i + j] += i == j ? l : l + l;
            col[i + j + 1] += i == j ? h : h + h;
        }
    }
    dp_redc(r, col, p, P, np52);
}

DP_INLINE bool mp_eq8(const u32 a[8], const u32 b[8]) {
    u32 x = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) x |= a[i] ^ b[i];
    return x == 0;
}

DP_INLINE bool mp_is_zero8(const u32 a[8]) {
    u32 x = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) x |= a[i];
    return x == 0;
}

// ---------------------------------------------------------------------------------------
// Fr and Fq: the same operation set, one with each modulus.
// ---------------------------------------------------------------------------------------

// The build's Montgomery product and square (p given both ways; each build uses one). reduce =
// false leaves out the final subtraction: for a b < 4p^2 (a, b < 2p, or a < 4p and b < p; 4p <
// 2^256) the result is below 2p.
DP_INLINE void mont_mul(u32 r[8], const u32 a[8], const u32 b[8], const u32 p[8], u32 np, const double P[5], u64 np52,
                        bool reduce = true) {
#ifdef DP_F64_MUL
    mont_mul_f64(r, a, b, p, P, np52, reduce);
#else
    mont_mul8(r, a, b, p, np, reduce);
#endif
}

DP_INLINE void mont_sqr(u32 r[8], const u32 a[8], const u32 p[8], u32 np, const double P[5], u64 np52) {
#if defined(DP_F64_MUL)
    mont_sqr_f64(r, a, p, P, np52);
#elif defined(DP_SQR_MUL)
    mont_mul8(r, a, a, p, np);
#else
    mont_sqr8(r, a, p, np);
#endif
}

#define DP_DEFINE_FIELD(pre, T, PLIT, NP, ONELIT, R2LIT, P52LIT, NP52)                                 \
    DP_INLINE T pre##_zero() { T r; for (int i = 0; i < 8; i++) r.v[i] = 0; return r; }       \
    DP_INLINE T pre##_one() { T r = {ONELIT}; return r; }                                      \
    DP_INLINE T pre##_add(T a, T b) { const u32 p[8] = PLIT; T r; mod_add8(r.v, a.v, b.v, p); return r; } \
    DP_INLINE T pre##_sub(T a, T b) { const u32 p[8] = PLIT; T r; mod_sub8(r.v, a.v, b.v, p); return r; } \
    DP_INLINE T pre##_neg(T a) { return pre##_sub(pre##_zero(), a); }                         \
    DP_INLINE T pre##_dbl(T a) { return pre##_add(a, a); }                                     \
    DP_INLINE T pre##_mul(T a, T b) { const u32 p[8] = PLIT; const double P[5] = P52LIT; T r; mont_mul(r.v, a.v, b.v, p, NP, P, NP52); return r; } \
    DP_INLINE T pre##_sqr(T a) { const u32 p[8] = PLIT; const double P[5] = P52LIT; T r; mont_sqr(r.v, a.v, p, NP, P, NP52); return r; } \
    DP_INLINE bool pre##_eq(T a, T b) { return mp_eq8(a.v, b.v); }                             \
    DP_INLINE bool pre##_is_zero(T a) { return mp_is_zero8(a.v); }                             \
    DP_INLINE T pre##_to_mont(T a) { T r2 = {R2LIT}; return pre##_mul(a, r2); }                \
    DP_INLINE T pre##_from_mont(T a) { T one = pre##_zero(); one.v[0] = 1u; return pre##_mul(a, one); } \
    DP_INLINE T pre##_load(const u32* src) { T r; for (int i = 0; i < 8; i++) r.v[i] = src[i]; return r; } \
    DP_INLINE void pre##_store(u32* dst, T a) { for (int i = 0; i < 8; i++) dst[i] = a.v[i]; }

DP_DEFINE_FIELD(fr, Fr, DP_FR_P, DP_FR_NP, DP_FR_ONE, DP_FR_R2, DP_FR_P52, DP_FR_NP52)

// x w 2^-256 without the final subtraction: below 2r for x < 4r, w < r (ntt.cu's lazy four-step
// products).
DP_INLINE Fr fr_mul_lazy(Fr x, Fr w) {
    const u32 p[8] = DP_FR_P;
    const double P[5] = DP_FR_P52;
    Fr r;
    mont_mul(r.v, x.v, w.v, p, DP_FR_NP, P, DP_FR_NP52, false);
    return r;
}

// An Fr multiplier split ahead of use for the FP64 product: its five 52-bit limbs as exact doubles
// and one double of padding (48 bytes: three 16-byte loads). fr_mul_split(x, w) = fr_mul(x, w's
// value) on every build (the FP64 product is exact on the host too); ntt.cu's NTT_SPLIT twiddles.
// reduce = false: x < 4r in, a value below 2r congruent to the product out (lazy butterflies).
struct alignas(16) FrSplit { double v[6]; };

DP_INLINE Fr fr_mul_split(Fr x, const FrSplit& w, bool reduce = true) {
    const u32 p[8] = DP_FR_P;
    const double P[5] = DP_FR_P52;
    Fr r;
    mont_mul_f64_split(r.v, x.v, w.v, p, P, DP_FR_NP52, reduce);
    return r;
}

// x * w mod r for x, w < r, given wq = floor(w * 2^256 / r): Shoup's product with a precomputed
// quotient, for multipliers known in advance (NTT twiddles; ntt.cu's NTT_SHOUP build). Any form
// passes through: x in Montgomery form and w plain give x * w in Montgomery form. q is the high
// half of x * wq from the partial products of columns >= 6 only: the dropped ones sum below
// 2^227, so q is at most 1 short of floor(x wq / 2^256), which is at most 1 short of
// floor(x w / r). Hence x w - q r lies in [0, 3r) (< 2^256: the low 256 bits of both products
// give it exactly) and two conditional subtractions finish it: 43 + 2 x 28 widening products
// and 16 low-only ones, against CIOS's 128 widening and 8.
DP_INLINE Fr fr_mul_shoup(Fr x, Fr w, Fr wq) {
    const u32 p[8] = DP_FR_P;
    u32 t[16];
DP_UNROLL
    for (int k = 0; k < 16; k++) t[k] = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) t[i + 8] = mp_mac8(t + i, wq.v, x.v[i], i < 6 ? 6 - i : 0);
    u32 a[8], b[8];
DP_UNROLL
    for (int k = 0; k < 8; k++) a[k] = b[k] = 0;
DP_UNROLL
    for (int i = 0; i < 8; i++) {  // the low halves of x * w and q * p
        u64 c = 0, d = 0;
DP_UNROLL
        for (int j = 0; i + j < 7; j++) {
            c += (u64)x.v[i] * w.v[j] + a[i + j];
            a[i + j] = (u32)c;
            c >>= 32;
            d += (u64)t[8 + i] * p[j] + b[i + j];
            b[i + j] = (u32)d;
            d >>= 32;
        }
        a[7] += x.v[i] * w.v[7 - i] + (u32)c;
        b[7] += t[8 + i] * p[7 - i] + (u32)d;
    }
    Fr r;
    mp_sub8(r.v, a, b);
    mp_csub8(r.v, r.v, p);
    mp_csub8(r.v, r.v, p);
    return r;
}
DP_DEFINE_FIELD(fq, Fq, DP_FQ_P, DP_FQ_NP, DP_FQ_ONE, DP_FQ_R2, DP_FQ_P52, DP_FQ_NP52)

#undef DP_DEFINE_FIELD

// One out-of-line copy of the Fq product on the device (see the banner). Fq2's products call it
// unless DP_FQ2_MUL_INLINE is defined (bench_msm.py's g2_mul_inline build).
#if defined(__CUDA_ARCH__)
static __device__ __noinline__ Fq fq_mul_call(Fq a, Fq b) { return fq_mul(a, b); }
static __device__ __noinline__ Fq fq_sqr_call(Fq a) { return fq_sqr(a); }
#else
DP_INLINE Fq fq_mul_call(Fq a, Fq b) { return fq_mul(a, b); }
DP_INLINE Fq fq_sqr_call(Fq a) { return fq_sqr(a); }
#endif
#ifdef DP_FQ2_MUL_INLINE
#define DP_FQ2_BASE_MUL fq_mul
#else
#define DP_FQ2_BASE_MUL fq_mul_call
#endif

// Two values of one type: what a pair of independent products returns.
template <typename T> struct Two { T a, b; };

// Two independent Fq products (squares) in one body. A call is a scheduling barrier, so point
// code that calls fq_mul_call twice runs the two products one after the other, each ending in
// five dependent reduction steps; in one body the compiler interleaves them, which helps most
// where few warps share a scheduler (the XYZZ kernels at 2 or 3 blocks of 128 threads per SM).
// DP_MUL_SINGLE makes each product its own call (bench_msm.py's mul_single compares it; the
// groupfft and fixedbase modules set it, gpu/compile.py MODULE_OPTIONS).
DP_INLINE Two<Fq> fq_mul2(Fq a, Fq b, Fq c, Fq d) { Two<Fq> r; r.a = fq_mul(a, b); r.b = fq_mul(c, d); return r; }
DP_INLINE Two<Fq> fq_sqr2(Fq a, Fq c) { Two<Fq> r; r.a = fq_sqr(a); r.b = fq_sqr(c); return r; }
#if defined(__CUDA_ARCH__) && !defined(DP_MUL_SINGLE)
static __device__ __noinline__ Two<Fq> fq_mul2_call(Fq a, Fq b, Fq c, Fq d) { return fq_mul2(a, b, c, d); }
static __device__ __noinline__ Two<Fq> fq_sqr2_call(Fq a, Fq c) { return fq_sqr2(a, c); }
#else
DP_INLINE Two<Fq> fq_mul2_call(Fq a, Fq b, Fq c, Fq d) {
    Two<Fq> r;
    r.a = fq_mul_call(a, b);
    r.b = fq_mul_call(c, d);
    return r;
}
DP_INLINE Two<Fq> fq_sqr2_call(Fq a, Fq c) {
    Two<Fq> r;
    r.a = fq_sqr_call(a);
    r.b = fq_sqr_call(c);
    return r;
}
#endif
#if defined(DP_FQ2_MUL_INLINE)
#define DP_FQ2_BASE_MUL2 fq_mul2
#else
#define DP_FQ2_BASE_MUL2 fq_mul2_call
#endif

// ---------------------------------------------------------------------------------------
// Fq2 = Fq[u] / (u^2 + 1), c0 + c1 u.
// ---------------------------------------------------------------------------------------

DP_INLINE Fq2 fq2_zero() { Fq2 r; r.c0 = fq_zero(); r.c1 = fq_zero(); return r; }
DP_INLINE Fq2 fq2_one() { Fq2 r; r.c0 = fq_one(); r.c1 = fq_zero(); return r; }
DP_INLINE Fq2 fq2_add(Fq2 a, Fq2 b) { Fq2 r; r.c0 = fq_add(a.c0, b.c0); r.c1 = fq_add(a.c1, b.c1); return r; }
DP_INLINE Fq2 fq2_sub(Fq2 a, Fq2 b) { Fq2 r; r.c0 = fq_sub(a.c0, b.c0); r.c1 = fq_sub(a.c1, b.c1); return r; }
DP_INLINE Fq2 fq2_neg(Fq2 a) { Fq2 r; r.c0 = fq_neg(a.c0); r.c1 = fq_neg(a.c1); return r; }
DP_INLINE Fq2 fq2_dbl(Fq2 a) { return fq2_add(a, a); }
DP_INLINE bool fq2_is_zero(Fq2 a) { return fq_is_zero(a.c0) && fq_is_zero(a.c1); }
DP_INLINE bool fq2_eq(Fq2 a, Fq2 b) { return fq_eq(a.c0, b.c0) && fq_eq(a.c1, b.c1); }

// Karatsuba from its three Fq products t0 = a0 b0, t1 = a1 b1, t2 = (a0 + a1)(b0 + b1).
DP_INLINE Fq2 fq2_karatsuba(Fq t0, Fq t1, Fq t2) {
    Fq2 r;
    r.c0 = fq_sub(t0, t1);
    r.c1 = fq_sub(t2, fq_add(t0, t1));
    return r;
}

// Karatsuba: 3 Fq products, the first two in one body unless !paired (the pair rounds' choice,
// msm_affine.cu: with two in one body G2 2^22's pair rounds take ~7% longer on an H200).
DP_INLINE Fq2 fq2_mul(Fq2 a, Fq2 b, bool paired = true) {
    Fq t0, t1;
    if (paired) {
        Two<Fq> t = DP_FQ2_BASE_MUL2(a.c0, b.c0, a.c1, b.c1);
        t0 = t.a;
        t1 = t.b;
    } else {
        t0 = DP_FQ2_BASE_MUL(a.c0, b.c0);
        t1 = DP_FQ2_BASE_MUL(a.c1, b.c1);
    }
    return fq2_karatsuba(t0, t1, DP_FQ2_BASE_MUL(fq_add(a.c0, a.c1), fq_add(b.c0, b.c1)));
}

// Two Fq products in one body, or each its own call (!paired).
DP_INLINE Two<Fq> fq2_mul2_if(Fq a, Fq b, Fq c, Fq d, bool paired) {
    if (paired) return DP_FQ2_BASE_MUL2(a, b, c, d);
    Two<Fq> r;
    r.a = DP_FQ2_BASE_MUL(a, b);
    r.b = DP_FQ2_BASE_MUL(c, d);
    return r;
}
// a^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u: its 2 Fq products (in one body unless !paired), then
// the square from them.
DP_INLINE Two<Fq> fq2_sqr_products(Fq2 a, bool paired = true) {
    return fq2_mul2_if(fq_add(a.c0, a.c1), fq_sub(a.c0, a.c1), a.c0, a.c1, paired);
}
DP_INLINE Fq2 fq2_sqr_from(Two<Fq> t) {
    Fq2 r;
    r.c0 = t.a;
    r.c1 = fq_add(t.b, t.b);
    return r;
}
DP_INLINE Fq2 fq2_sqr(Fq2 a, bool paired = true) { return fq2_sqr_from(fq2_sqr_products(a, paired)); }

// Two independent Fq2 squares: both squares' products (two bodies of two), then the squares.
DP_INLINE Two<Fq2> fq2_sqr2(Fq2 a, Fq2 c) {
    Two<Fq> s = fq2_sqr_products(a), t = fq2_sqr_products(c);
    Two<Fq2> r;
    r.a = fq2_sqr_from(s);
    r.b = fq2_sqr_from(t);
    return r;
}

// Two independent Fq2 products: six Fq products in three bodies of two.
DP_INLINE Two<Fq2> fq2_mul2(Fq2 a, Fq2 b, Fq2 c, Fq2 d) {
    Two<Fq> s = DP_FQ2_BASE_MUL2(a.c0, b.c0, a.c1, b.c1);
    Two<Fq> t = DP_FQ2_BASE_MUL2(fq_add(a.c0, a.c1), fq_add(b.c0, b.c1), c.c0, d.c0);
    Two<Fq> u = DP_FQ2_BASE_MUL2(c.c1, d.c1, fq_add(c.c0, c.c1), fq_add(d.c0, d.c1));
    Two<Fq2> r;
    r.a = fq2_karatsuba(s.a, s.b, t.a);
    r.b = fq2_karatsuba(t.b, u.a, u.b);
    return r;
}

DP_INLINE Fq2 fq2_load(const u32* src) { Fq2 r; r.c0 = fq_load(src); r.c1 = fq_load(src + 8); return r; }
DP_INLINE void fq2_store(u32* dst, Fq2 a) { fq_store(dst, a.c0); fq_store(dst + 8, a.c1); }

// ---------------------------------------------------------------------------------------
// Inversion (Fermat), for the few places that need one: one per thread or per batch.
// ---------------------------------------------------------------------------------------

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DP_NO_UNROLL _Pragma("unroll 1")
#else
#define DP_NO_UNROLL
#endif

// a^(q-2) = 1/a in Fq (0 for a = 0): 4-bit fixed windows, 14 products for the table, 252
// squarings and at most 63 products. The loop stays rolled (code size; callers invert rarely).
DP_INLINE Fq fq_inv(Fq a) {
    const u32 p[8] = DP_FQ_P;  // q - 2 differs from q only in limb 0 (its low nibble is 7)
    Fq tab[16];
    tab[0] = fq_one();
    tab[1] = a;
    for (int i = 2; i < 16; i++) tab[i] = fq_mul(tab[i - 1], a);
    Fq r = tab[p[7] >> 28];
    DP_NO_UNROLL
    for (int i = 62; i >= 0; i--) {
        u32 limb = p[i >> 3] - (i < 8 ? 2u : 0u);
        u32 nib = (limb >> ((i & 7) * 4)) & 15u;
        r = fq_sqr(fq_sqr(fq_sqr(fq_sqr(r))));
        if (nib) r = fq_mul(r, tab[nib]);
    }
    return r;
}

// (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2) (0 for 0).
DP_INLINE Fq2 fq2_inv(Fq2 a) {
    Fq t = fq_inv(fq_add(fq_sqr(a.c0), fq_sqr(a.c1)));
    Fq2 r;
    r.c0 = fq_mul(a.c0, t);
    r.c1 = fq_neg(fq_mul(a.c1, t));
    return r;
}

#endif  // DP_FIELD_CUH
