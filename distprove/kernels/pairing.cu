// pairing.cu - BN254 optimal ate Miller loops, one pair per thread, and Fq12 products over a batch.
// Needs field.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY
// * The value is distprove/pairing.py's miller_loop(P, Q) to the bit: the same tower
//   (Fq2 = Fq[u]/(u^2 + 1), Fq6 = Fq2[v]/(v^3 - xi), Fq12 = Fq6[w]/(w^2 - v), xi = 9 + u), the
//   same loop (the bits of 6x + 2 below the top one, square then tangent, chord with Q on a one
//   bit, then the lines through pi_p(Q) and -pi_p^2(Q)) and the same affine lines
//   l = y_P - lambda x_P w + (lambda x_T - y_T) v w (no vertical lines). A field element has one
//   value, so any formula for it gives the same limbs: only which lines are multiplied in matters.
// * T runs in homogeneous projective coordinates, so no step inverts. Each step's line comes out
//   scaled by a known c in Fq2 (2 Y Z^2 for a tangent, x_Q Z - X for a chord), and D = prod c
//   (squared with f) is kept beside f: the loop ends with f' = f D, and one Fq2 inversion gives f.
//   The affine loop would invert once a step (~88 Fermat inversions of ~330 products each, about
//   three times the rest of the loop); this costs one inversion and ~20 products a step.
// * A pair where pairing.py meets a vertical line (2 y_T = 0 or x_Q = x_T: only a Q outside G2
//   of small order; pairing.py then takes py_ecc's loop) makes some c zero, so D = 0: the thread
//   writes f = 1 and raises its flag, and the host computes that pair itself. P or Q infinity
//   (an all-zero row, docs/DESIGN.md) gives f = 1 without a flag, as pairing.py.
// * Inputs and outputs are the repository's layout: Montgomery limbs, P a (k, 16) row, Q a
//   (k, 32) row, f a (k, 96) row in pairing.py's tuple order (c0.c0.a, c0.c0.b, c0.c1.a, ...).
// * Products over a batch are trees in shared memory, 64 elements a block (64 x 384 bytes =
//   24 KB): the Miller kernel can end in its block's product, and pairing_fq12_product reduces
//   partial products 64 to 1 until one element is left, so one Fq12 comes back per batch.
// * The Fq6 products, the Fq12 square and line product and the two steps are calls on the device
//   (PAIRING_CALL), the Fq products inside them calls too (compile.py builds the module with
//   DP_MUL_SINGLE): inlined, the loop is one body far larger than the instruction cache, and nvcc
//   takes ~3 CPU minutes for its PTX against 7 s (field.cuh's banner: calls ran faster for point
//   code; not timed here).
// * Everything is host C++ too (DP_INLINE / PAIRING_CALL are `inline` there):
//   tests/test_pairing_kernel_host.py runs pairing_miller_one against pairing.py on the CPU.

#ifndef DP_PAIRING_CU
#define DP_PAIRING_CU

struct Fq6 { Fq2 c0, c1, c2; };
struct Fq12 { Fq6 c0, c1; };

#if defined(__CUDA_ARCH__)
#define PAIRING_CALL static __device__ __noinline__
#else
#define PAIRING_CALL inline
#endif

#define PAIRING_BLOCK 64
// The bits of 6x + 2 below its top bit (bit 64), most significant first.
#define PAIRING_ATE_LOW 0x9d797039be763ba8ull
// xi^((p-1)/3) and xi^((p-1)/2) (Montgomery form): the Frobenius on the twist.
#define PAIRING_FROB_X0 {0x4563ab30u, 0xb5773b10u, 0xa9aa6454u, 0x347f91c8u, 0x242e0991u, 0x7a007127u, 0x118214ecu, 0x1956bcd8u}
#define PAIRING_FROB_X1 {0xa0aa4757u, 0x6e849f1eu, 0x89f89141u, 0xaa1c7b6du, 0xfae0ca3au, 0xb6e713cdu, 0x4e82ebc3u, 0x26694fbbu}
#define PAIRING_FROB_Y0 {0x2936b629u, 0xe4bbdd0cu, 0xe133bacbu, 0xbb30f162u, 0xf9645366u, 0x31a9d1b6u, 0xa500f8ddu, 0x253570beu}
#define PAIRING_FROB_Y1 {0x5ffe77c7u, 0xa1d77ce4u, 0x7826d1dbu, 0x07affd11u, 0xbb7edc6bu, 0x6d16bd27u, 0x85defeccu, 0x2c872002u}

// --- Fq2 helpers ------------------------------------------------------------------------

DP_INLINE Fq2 fq2_scale(Fq2 a, Fq k) {
    Fq2 r;
    r.c0 = DP_FQ2_BASE_MUL(a.c0, k);
    r.c1 = DP_FQ2_BASE_MUL(a.c1, k);
    return r;
}

DP_INLINE Fq2 fq2_conj(Fq2 a) { Fq2 r; r.c0 = a.c0; r.c1 = fq_neg(a.c1); return r; }

// a (9 + u) = (9 a0 - a1) + (a0 + 9 a1) u
DP_INLINE Fq2 fq2_mul_xi(Fq2 a) {
    Fq2 n = fq2_add(fq2_dbl(fq2_dbl(fq2_dbl(a))), a);  // 9a
    Fq2 r;
    r.c0 = fq_sub(n.c0, a.c1);
    r.c1 = fq_add(a.c0, n.c1);
    return r;
}

// --- Fq6 = Fq2[v]/(v^3 - xi) ------------------------------------------------------------------

DP_INLINE Fq6 fq6_zero() { Fq6 r; r.c0 = fq2_zero(); r.c1 = fq2_zero(); r.c2 = fq2_zero(); return r; }
DP_INLINE Fq6 fq6_add(Fq6 a, Fq6 b) { Fq6 r; r.c0 = fq2_add(a.c0, b.c0); r.c1 = fq2_add(a.c1, b.c1); r.c2 = fq2_add(a.c2, b.c2); return r; }
DP_INLINE Fq6 fq6_sub(Fq6 a, Fq6 b) { Fq6 r; r.c0 = fq2_sub(a.c0, b.c0); r.c1 = fq2_sub(a.c1, b.c1); r.c2 = fq2_sub(a.c2, b.c2); return r; }
DP_INLINE Fq6 fq6_neg(Fq6 a) { Fq6 r; r.c0 = fq2_neg(a.c0); r.c1 = fq2_neg(a.c1); r.c2 = fq2_neg(a.c2); return r; }

// a v
DP_INLINE Fq6 fq6_mul_v(Fq6 a) { Fq6 r; r.c0 = fq2_mul_xi(a.c2); r.c1 = a.c0; r.c2 = a.c1; return r; }

// Karatsuba over Fq2: 6 Fq2 products.
PAIRING_CALL Fq6 fq6_mul(Fq6 a, Fq6 b) {
    Fq2 t0 = fq2_mul(a.c0, b.c0), t1 = fq2_mul(a.c1, b.c1), t2 = fq2_mul(a.c2, b.c2);
    Fq6 r;
    r.c0 = fq2_add(t0, fq2_mul_xi(fq2_sub(fq2_sub(fq2_mul(fq2_add(a.c1, a.c2), fq2_add(b.c1, b.c2)), t1), t2)));
    r.c1 = fq2_add(fq2_sub(fq2_sub(fq2_mul(fq2_add(a.c0, a.c1), fq2_add(b.c0, b.c1)), t0), t1), fq2_mul_xi(t2));
    r.c2 = fq2_add(fq2_sub(fq2_sub(fq2_mul(fq2_add(a.c0, a.c2), fq2_add(b.c0, b.c2)), t0), t2), t1);
    return r;
}

// a (b0 + b1 v): 5 Fq2 products.
PAIRING_CALL Fq6 fq6_mul_01(Fq6 a, Fq2 b0, Fq2 b1) {
    Fq2 t0 = fq2_mul(a.c0, b0), t1 = fq2_mul(a.c1, b1);
    Fq6 r;
    r.c0 = fq2_add(t0, fq2_mul_xi(fq2_mul(a.c2, b1)));
    r.c1 = fq2_sub(fq2_sub(fq2_mul(fq2_add(a.c0, a.c1), fq2_add(b0, b1)), t0), t1);
    r.c2 = fq2_add(t1, fq2_mul(a.c2, b0));
    return r;
}

DP_INLINE Fq6 fq6_scale(Fq6 a, Fq2 k) { Fq6 r; r.c0 = fq2_mul(a.c0, k); r.c1 = fq2_mul(a.c1, k); r.c2 = fq2_mul(a.c2, k); return r; }

// --- Fq12 = Fq6[w]/(w^2 - v) ------------------------------------------------------------------

DP_INLINE Fq12 fq12_one() { Fq12 r; r.c0 = fq6_zero(); r.c0.c0 = fq2_one(); r.c1 = fq6_zero(); return r; }

DP_INLINE Fq12 fq12_mul(Fq12 a, Fq12 b) {
    Fq6 t0 = fq6_mul(a.c0, b.c0), t1 = fq6_mul(a.c1, b.c1);
    Fq12 r;
    r.c1 = fq6_sub(fq6_sub(fq6_mul(fq6_add(a.c0, a.c1), fq6_add(b.c0, b.c1)), t0), t1);
    r.c0 = fq6_add(t0, fq6_mul_v(t1));
    return r;
}

// Complex squaring: 2 Fq6 products.
PAIRING_CALL Fq12 fq12_sqr(Fq12 a) {
    Fq6 t = fq6_mul(a.c0, a.c1);
    Fq12 r;
    r.c0 = fq6_sub(fq6_sub(fq6_mul(fq6_add(a.c0, a.c1), fq6_add(a.c0, fq6_mul_v(a.c1))), t), fq6_mul_v(t));
    r.c1 = fq6_add(t, t);
    return r;
}

// f (a0 + b0 w + b1 v w), a line scaled into Fq2: Karatsuba over Fq6 with the zero terms dropped
// (13 Fq2 products).
PAIRING_CALL Fq12 fq12_mul_line(Fq12 f, Fq2 a0, Fq2 b0, Fq2 b1) {
    Fq6 t0 = fq6_scale(f.c0, a0);
    Fq6 t1 = fq6_mul_01(f.c1, b0, b1);
    Fq12 r;
    r.c1 = fq6_sub(fq6_sub(fq6_mul_01(fq6_add(f.c0, f.c1), fq2_add(a0, b0), b1), t0), t1);
    r.c0 = fq6_add(t0, fq6_mul_v(t1));
    return r;
}

DP_INLINE Fq12 fq12_load(const u32* src) {
    Fq12 r;
    r.c0.c0 = fq2_load(src);
    r.c0.c1 = fq2_load(src + 16);
    r.c0.c2 = fq2_load(src + 32);
    r.c1.c0 = fq2_load(src + 48);
    r.c1.c1 = fq2_load(src + 64);
    r.c1.c2 = fq2_load(src + 80);
    return r;
}

DP_INLINE void fq12_store(u32* dst, Fq12 a) {
    fq2_store(dst, a.c0.c0);
    fq2_store(dst + 16, a.c0.c1);
    fq2_store(dst + 32, a.c0.c2);
    fq2_store(dst + 48, a.c1.c0);
    fq2_store(dst + 64, a.c1.c1);
    fq2_store(dst + 80, a.c1.c2);
}

// --- Miller loop ------------------------------------------------------------------------------

struct G2Proj { Fq2 x, y, z; };  // affine (x / z, y / z)

// The state of one loop: f' = f D and T.
struct MillerState {
    Fq12 f;
    Fq2 d;
    G2Proj t;
};

// Tangent at T, evaluated at P = (xp, yp): lambda = 3 X^2 / (2 Y Z), the line times c = 2 Y Z^2
// is 2 Y Z^2 y_P - 3 X^2 Z x_P w + (3 X^3 - 2 Y^2 Z) v w; T becomes 2T.
PAIRING_CALL void miller_dbl(MillerState& s, Fq xp, Fq yp) {
    const Fq2 X = s.t.x, Y = s.t.y, Z = s.t.z;
    const Fq2 xx = fq2_sqr(X);
    const Fq2 w = fq2_add(fq2_dbl(xx), xx);  // 3 X^2
    const Fq2 sy = fq2_mul(Y, Z);            // S = Y Z
    const Fq2 c = fq2_dbl(fq2_mul(sy, Z));   // 2 S Z
    const Fq2 a0 = fq2_scale(c, yp);
    const Fq2 b0 = fq2_neg(fq2_scale(fq2_mul(w, Z), xp));
    const Fq2 b1 = fq2_sub(fq2_mul(w, X), fq2_dbl(fq2_mul(sy, Y)));
    // 2T: B = X Y S, H = W^2 - 8B; X3 = 2 H S, Y3 = W (4B - H) - 8 Y^2 S^2, Z3 = 8 S^3
    const Fq2 b = fq2_mul(fq2_mul(X, Y), sy);
    const Fq2 b4 = fq2_dbl(fq2_dbl(b));
    const Fq2 h = fq2_sub(fq2_sqr(w), fq2_dbl(b4));
    const Fq2 ss = fq2_sqr(sy);
    const Fq2 yyss = fq2_mul(fq2_sqr(Y), ss);
    s.t.x = fq2_dbl(fq2_mul(h, sy));
    s.t.y = fq2_sub(fq2_mul(w, fq2_sub(b4, h)), fq2_dbl(fq2_dbl(fq2_dbl(yyss))));
    s.t.z = fq2_dbl(fq2_dbl(fq2_dbl(fq2_mul(ss, sy))));
    s.f = fq12_mul_line(s.f, a0, b0, b1);
    s.d = fq2_mul(s.d, c);
}

// Chord through T and Q = (xq, yq) (affine), evaluated at P: with N = yq Z - Y, M = xq Z - X,
// lambda = N / M and lambda x_T - y_T = lambda xq - yq, so the line times c = M is
// M y_P - N x_P w + (N xq - M yq) v w. T becomes T + Q unless !advance (the last line).
PAIRING_CALL void miller_add(MillerState& s, Fq2 xq, Fq2 yq, Fq xp, Fq yp, bool advance) {
    const Fq2 X = s.t.x, Y = s.t.y, Z = s.t.z;
    const Fq2 xqz = fq2_mul(xq, Z);
    const Fq2 n = fq2_sub(fq2_mul(yq, Z), Y);
    const Fq2 m = fq2_sub(xqz, X);
    const Fq2 a0 = fq2_scale(m, yp);
    const Fq2 b0 = fq2_neg(fq2_scale(n, xp));
    const Fq2 b1 = fq2_sub(fq2_mul(n, xq), fq2_mul(m, yq));
    if (advance) {
        // A = N^2 Z - M^2 (X + xq Z); X3 = M A, Y3 = N (X M^2 - A) - Y M^3, Z3 = M^3 Z
        const Fq2 mm = fq2_sqr(m);
        const Fq2 mmm = fq2_mul(mm, m);
        const Fq2 a = fq2_sub(fq2_mul(fq2_sqr(n), Z), fq2_mul(mm, fq2_add(X, xqz)));
        s.t.x = fq2_mul(m, a);
        s.t.y = fq2_sub(fq2_mul(n, fq2_sub(fq2_mul(X, mm), a)), fq2_mul(Y, mmm));
        s.t.z = fq2_mul(mmm, Z);
    }
    s.f = fq12_mul_line(s.f, a0, b0, b1);
    s.d = fq2_mul(s.d, m);
}

// pi_p(Q) on the twist: (conj(x) xi^((p-1)/3), conj(y) xi^((p-1)/2)).
DP_INLINE void twist_frobenius(Fq2& x, Fq2& y) {
    const Fq2 fx = {{PAIRING_FROB_X0}, {PAIRING_FROB_X1}};
    const Fq2 fy = {{PAIRING_FROB_Y0}, {PAIRING_FROB_Y1}};
    x = fq2_mul(fq2_conj(x), fx);
    y = fq2_mul(fq2_conj(y), fy);
}

// f(P, Q) of one pair: P = (xp, yp) (G1 affine), Q = (xq, yq) (twist affine), infinity as all-zero
// coordinates. Returns pairing.py's miller_loop(P, Q); *degenerate is set (and f = 1) when that
// needs py_ecc's loop.
DP_INLINE Fq12 pairing_miller_one(Fq xp, Fq yp, Fq2 xq, Fq2 yq, bool* degenerate) {
    *degenerate = false;
    if ((fq_is_zero(xp) && fq_is_zero(yp)) || (fq2_is_zero(xq) && fq2_is_zero(yq))) return fq12_one();
    MillerState s;
    s.f = fq12_one();
    s.d = fq2_one();
    s.t.x = xq;
    s.t.y = yq;
    s.t.z = fq2_one();
    DP_NO_UNROLL
    for (int i = 63; i >= 0; i--) {
        s.f = fq12_sqr(s.f);
        s.d = fq2_sqr(s.d);
        miller_dbl(s, xp, yp);
        if ((PAIRING_ATE_LOW >> i) & 1u) miller_add(s, xq, yq, xp, yp, true);
    }
    Fq2 x1 = xq, y1 = yq;
    twist_frobenius(x1, y1);
    Fq2 x2 = x1, y2 = y1;
    twist_frobenius(x2, y2);
    miller_add(s, x1, y1, xp, yp, true);
    miller_add(s, x2, fq2_neg(y2), xp, yp, false);
    if (fq2_is_zero(s.d)) {
        *degenerate = true;
        return fq12_one();
    }
    const Fq2 inv = fq2_inv(s.d);
    Fq12 r;
    r.c0 = fq6_scale(s.f.c0, inv);
    r.c1 = fq6_scale(s.f.c1, inv);
    return r;
}

// Pair i of the (k, 16) / (k, 32) rows.
DP_INLINE Fq12 pairing_miller_row(const u32* g1, const u32* g2, u64 i, bool* degenerate) {
    return pairing_miller_one(fq_load(g1 + i * 16u), fq_load(g1 + i * 16u + 8u), fq2_load(g2 + i * 32u),
                              fq2_load(g2 + i * 32u + 16u), degenerate);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// The product of the block's values (one a thread) into out[blockIdx.x]; sh holds PAIRING_BLOCK.
__device__ __forceinline__ void pairing_block_product(Fq12 v, Fq12* sh, u32* out) {
    const u32 t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (u32 half = PAIRING_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) sh[t] = fq12_mul(sh[t], sh[t + half]);
        __syncthreads();
    }
    if (t == 0) fq12_store(out + (u64)blockIdx.x * 96u, sh[0]);
}

// LAUNCH: PAIRING_BLOCK threads a block, grid = ceil(k / PAIRING_BLOCK). out: (k, 96) Miller
// values; flags: (k,) 1 where the pair is degenerate (its out row is 1).
extern "C" __global__ void __launch_bounds__(PAIRING_BLOCK) pairing_miller(const u32* g1, const u32* g2, u32* out,
                                                                          u32* flags, u32 k) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    bool degenerate;
    fq12_store(out + i * 96u, pairing_miller_row(g1, g2, i, &degenerate));
    flags[i] = degenerate;
}

// LAUNCH: as pairing_miller; out: (grid, 96), the product of each block's Miller values
// (degenerate pairs contribute 1 and raise their flag).
extern "C" __global__ void __launch_bounds__(PAIRING_BLOCK) pairing_miller_product(const u32* g1, const u32* g2,
                                                                                  u32* out, u32* flags, u32 k) {
    __shared__ Fq12 sh[PAIRING_BLOCK];
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    Fq12 v = fq12_one();
    if (i < k) {
        bool degenerate;
        v = pairing_miller_row(g1, g2, i, &degenerate);
        flags[i] = degenerate;
    }
    pairing_block_product(v, sh, out);
}

// LAUNCH: PAIRING_BLOCK threads a block, grid = ceil(n / PAIRING_BLOCK). out: (grid, 96), the
// product of each block's n input rows (96 words each).
extern "C" __global__ void __launch_bounds__(PAIRING_BLOCK) pairing_fq12_product(const u32* in, u32* out, u32 n) {
    __shared__ Fq12 sh[PAIRING_BLOCK];
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    pairing_block_product(i < n ? fq12_load(in + i * 96u) : fq12_one(), sh, out);
}

#endif  // CUDA
#endif  // DP_PAIRING_CU
