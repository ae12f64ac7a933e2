// curve.cuh - BN254 G1 (over Fq) and G2 (over the twist, Fq2) point arithmetic. Needs field.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY
// * Bases are affine and stored as on disk: AffG1 = x | y, AffG2 = x.c0 | x.c1 | y.c0 | y.c1,
//   Montgomery limbs, infinity = all-zero limbs ((0, 0) is not on either curve, so the
//   encoding is unambiguous).
// * Accumulators are XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2), identity ZZ == 0. Mixed
//   addition madd-2008-s costs 8M + 2S, general addition add-2008-s 12M + 2S and doubling
//   dbl-2008-s-1 6M + 3S (a = 0); all three are made complete by case analysis: identity
//   operands, P + P (falls through to doubling), P + (-P) (identity). The branches are rare
//   and data-dependent, so divergence costs little in bucket accumulation.
// * The formulas are written once as templates over the field; the field is picked through
//   f_* overloads. The public point operations are plain overloads per group so that G2's
//   can be made out-of-line: DP_G2_OPS controls that (noinline by default on the device,
//   inline with DP_G2_INLINE and on the host); the mixed addition, the hot one, is inline. The
//   Fq products inside them are calls to one out-of-line copy (field.cuh's fq_mul_call) on the
//   device: inlined, they overflowed the instruction cache. Products that do not depend on
//   each other go two to a call (f_mul2, f_sqr2: field.cuh's fq_mul2_call), so the formulas
//   below are written in pairs: madd-2008-s is five calls instead of ten.
// * Everything compiles as host C++ too, for tests/test_kernels_host.py.

#ifndef DP_CURVE_CUH
#define DP_CURVE_CUH

template <typename F> struct Aff { F x, y; };
template <typename F> struct Xyzz { F x, y, zz, zzz; };

typedef Aff<Fq> AffG1;
typedef Aff<Fq2> AffG2;
typedef Xyzz<Fq> XyzzG1;
typedef Xyzz<Fq2> XyzzG2;

// G2 point operations are out of line on the device unless DP_G2_INLINE is defined (compile
// time; see banner).
#if defined(__CUDA_ARCH__) && !defined(DP_G2_INLINE)
#define DP_G2_OPS __device__ __noinline__
#else
#define DP_G2_OPS DP_INLINE
#endif
// The G2 mixed addition is the per-entry step of bucket accumulation, so it stays inline: as a
// call it kept a 432-byte stack frame per entry, and inlining it made G2 MSMs 3-4% faster
// (H200, 2^20 and 2^22) at no extra compile time. Inlining every G2 operation (DP_G2_INLINE,
// which the msm module sets) gains 2-3% more; with the Fq products and the reductions' G2
// additions out of line (below) the msm module still compiles in about 13 s.
#define DP_G2_MADD DP_INLINE
// G1's general addition and doubling serve only the fold, the reductions and the trees, never
// the per-entry loop (that is pt_madd), so they are out of line too: one copy each in the module.
#if defined(__CUDA_ARCH__) && !defined(DP_G1_INLINE)
#define DP_G1_COLD __device__ __noinline__
#else
#define DP_G1_COLD DP_INLINE
#endif

// Doubling is the rare branch of the additions (P + P); declared here so those templates call
// the per-group (out-of-line) version instead of inlining another copy.
DP_G1_COLD XyzzG1 pt_dbl(const XyzzG1& p);
DP_G2_OPS XyzzG2 pt_dbl(const XyzzG2& p);

// Field dispatch for the templates.
DP_INLINE Fq f_add(Fq a, Fq b) { return fq_add(a, b); }
DP_INLINE Fq f_sub(Fq a, Fq b) { return fq_sub(a, b); }
// G1's Fq products are calls to one out-of-line copy on the device (DP_G1_MUL_INLINE: inline).
// Inline, Nsight Compute put 44% of the 2^24 G1 accumulation's stall cycles on instruction
// fetch; as calls that accumulation went 83.2 -> 74.2 ms (H200).
#if defined(__CUDA_ARCH__) && !defined(DP_G1_MUL_INLINE)
DP_INLINE Fq f_mul(Fq a, Fq b) { return fq_mul_call(a, b); }
DP_INLINE Fq f_sqr(Fq a) { return fq_sqr_call(a); }
DP_INLINE Two<Fq> f_mul2(Fq a, Fq b, Fq c, Fq d) { return fq_mul2_call(a, b, c, d); }
DP_INLINE Two<Fq> f_sqr2(Fq a, Fq c) { return fq_sqr2_call(a, c); }
#else
DP_INLINE Fq f_mul(Fq a, Fq b) { return fq_mul(a, b); }
DP_INLINE Fq f_sqr(Fq a) { return fq_sqr(a); }
DP_INLINE Two<Fq> f_mul2(Fq a, Fq b, Fq c, Fq d) { return fq_mul2(a, b, c, d); }
DP_INLINE Two<Fq> f_sqr2(Fq a, Fq c) { return fq_sqr2(a, c); }
#endif
DP_INLINE Fq f_neg(Fq a) { return fq_neg(a); }
DP_INLINE Fq f_inv(Fq a) { return fq_inv(a); }
DP_INLINE bool f_is_zero(Fq a) { return fq_is_zero(a); }
DP_INLINE void f_set_zero(Fq& a) { a = fq_zero(); }
DP_INLINE void f_set_one(Fq& a) { a = fq_one(); }
DP_INLINE Fq2 f_add(Fq2 a, Fq2 b) { return fq2_add(a, b); }
DP_INLINE Fq2 f_sub(Fq2 a, Fq2 b) { return fq2_sub(a, b); }
DP_INLINE Fq2 f_mul(Fq2 a, Fq2 b) { return fq2_mul(a, b); }
DP_INLINE Fq2 f_sqr(Fq2 a) { return fq2_sqr(a); }
DP_INLINE Two<Fq2> f_mul2(Fq2 a, Fq2 b, Fq2 c, Fq2 d) { return fq2_mul2(a, b, c, d); }
DP_INLINE Two<Fq2> f_sqr2(Fq2 a, Fq2 c) { return fq2_sqr2(a, c); }
// Every Fq product its own call, never two in one body: the pair rounds' (msm_affine.cu).
DP_INLINE Fq f_mul_each(Fq a, Fq b) { return f_mul(a, b); }
DP_INLINE Fq f_sqr_each(Fq a) { return f_sqr(a); }
DP_INLINE Fq2 f_mul_each(Fq2 a, Fq2 b) { return fq2_mul(a, b, false); }
DP_INLINE Fq2 f_sqr_each(Fq2 a) { return fq2_sqr(a, false); }
DP_INLINE Fq2 f_neg(Fq2 a) { return fq2_neg(a); }
DP_INLINE Fq2 f_inv(Fq2 a) { return fq2_inv(a); }
DP_INLINE bool f_is_zero(Fq2 a) { return fq2_is_zero(a); }
DP_INLINE void f_set_zero(Fq2& a) { a = fq2_zero(); }
DP_INLINE void f_set_one(Fq2& a) { a = fq2_one(); }

// p as a standard-form affine row x | y (G2: x.c0 | x.c1 | y.c0 | y.c1), which the host reads as a
// byte copy of integers: x = X ZZZ / d and y = Y ZZ / d for d = ZZ ZZZ, one Fermat inversion
// (~330 products). Infinity (ZZ = ZZZ = 0) needs no branch: f_inv(0) is 0, so both coordinates
// come out 0, the all-zero row.
DP_INLINE void f_store_std(u32* w, Fq a) { fq_store(w, fq_from_mont(a)); }
DP_INLINE void f_store_std(u32* w, Fq2 a) { a.c0 = fq_from_mont(a.c0); a.c1 = fq_from_mont(a.c1); fq2_store(w, a); }
template <typename F> DP_INLINE void pt_store_affine_std(u32* out, const Xyzz<F>& p) {
    const u32 words = sizeof(F) / sizeof(u32);  // one coordinate
    const F inv = f_inv(f_mul(p.zz, p.zzz));
    f_store_std(out, f_mul(p.x, f_mul(inv, p.zzz)));
    f_store_std(out + words, f_mul(p.y, f_mul(inv, p.zz)));
}

template <typename F> DP_INLINE Xyzz<F> xyzz_zero_t() {
    Xyzz<F> r;
    f_set_zero(r.x); f_set_zero(r.y); f_set_zero(r.zz); f_set_zero(r.zzz);
    return r;
}

template <typename F> DP_INLINE bool aff_is_inf_t(const Aff<F>& a) {
    return f_is_zero(a.x) && f_is_zero(a.y);
}

template <typename F> DP_INLINE Xyzz<F> xyzz_from_aff_t(const Aff<F>& a) {
    if (aff_is_inf_t(a)) return xyzz_zero_t<F>();
    Xyzz<F> r;
    r.x = a.x; r.y = a.y;
    f_set_one(r.zz); f_set_one(r.zzz);
    return r;
}

// dbl-2008-s-1 with a = 0. The identity (ZZ = 0) maps to ZZ3 = 0 by itself; there is no
// 2-torsion in either prime-order group, so Y = 0 never occurs for a finite point.
template <typename F> DP_INLINE Xyzz<F> xyzz_dbl_t(const Xyzz<F>& p) {
    F u = f_add(p.y, p.y);
    Two<F> vx = f_sqr2(u, p.x);  // V = U^2, X^2
    F v = vx.a;
    Two<F> ws = f_mul2(u, v, p.x, v);  // W = U V, S = X V
    F m = f_add(f_add(vx.b, vx.b), vx.b);
    Xyzz<F> r;
    r.x = f_sub(f_sub(f_sqr(m), ws.b), ws.b);
    Two<F> y = f_mul2(m, f_sub(ws.b, r.x), ws.a, p.y);
    r.y = f_sub(y.a, y.b);
    Two<F> z = f_mul2(v, p.zz, ws.a, p.zzz);
    r.zz = z.a;
    r.zzz = z.b;
    return r;
}

// Shared tail of add-2008-s / madd-2008-s once P = U2 - U1 != 0 and R = S2 - S1 are known.
template <typename F>
DP_INLINE Xyzz<F> xyzz_add_tail_t(F pdiff, F rdiff, F u1, F s1, F zz, F zzz) {
    Two<F> sq = f_sqr2(pdiff, rdiff);  // PP = P^2, R^2
    F pp = sq.a;
    Two<F> pq = f_mul2(pdiff, pp, u1, pp);  // PPP = P PP, Q = U1 PP
    F ppp = pq.a, q = pq.b;
    Xyzz<F> r;
    r.x = f_sub(f_sub(f_sub(sq.b, ppp), q), q);
    Two<F> y = f_mul2(rdiff, f_sub(q, r.x), s1, ppp);
    r.y = f_sub(y.a, y.b);
    Two<F> z = f_mul2(zz, pp, zzz, ppp);
    r.zz = z.a;
    r.zzz = z.b;
    return r;
}

// madd-2008-s: p + q with q affine (all-zero q = infinity).
template <typename F> DP_INLINE Xyzz<F> xyzz_madd_t(const Xyzz<F>& p, const Aff<F>& q) {
    if (aff_is_inf_t(q)) return p;
    if (f_is_zero(p.zz)) return xyzz_from_aff_t(q);
    Two<F> us = f_mul2(q.x, p.zz, q.y, p.zzz);  // U2, S2
    F pdiff = f_sub(us.a, p.x);
    F rdiff = f_sub(us.b, p.y);
    if (f_is_zero(pdiff)) {
        if (f_is_zero(rdiff)) return pt_dbl(p);
        return xyzz_zero_t<F>();
    }
    return xyzz_add_tail_t(pdiff, rdiff, p.x, p.y, p.zz, p.zzz);
}

// add-2008-s: general XYZZ addition.
template <typename F> DP_INLINE Xyzz<F> xyzz_add_t(const Xyzz<F>& p, const Xyzz<F>& q) {
    if (f_is_zero(q.zz)) return p;
    if (f_is_zero(p.zz)) return q;
    Two<F> u = f_mul2(p.x, q.zz, q.x, p.zz);    // U1, U2
    Two<F> s = f_mul2(p.y, q.zzz, q.y, p.zzz);  // S1, S2
    F pdiff = f_sub(u.b, u.a);
    F rdiff = f_sub(s.b, s.a);
    if (f_is_zero(pdiff)) {
        if (f_is_zero(rdiff)) return pt_dbl(p);
        return xyzz_zero_t<F>();
    }
    Two<F> z = f_mul2(p.zz, q.zz, p.zzz, q.zzz);
    return xyzz_add_tail_t(pdiff, rdiff, u.a, s.a, z.a, z.b);
}

template <typename F> DP_INLINE Aff<F> aff_neg_t(const Aff<F>& a) {
    Aff<F> r;
    r.x = a.x;
    r.y = f_neg(a.y);  // the all-zero infinity stays all zero (neg 0 = 0)
    return r;
}

template <typename F> DP_INLINE Xyzz<F> xyzz_neg_t(const Xyzz<F>& p) {
    Xyzz<F> r = p;
    r.y = f_neg(p.y);
    return r;
}

// ---------------------------------------------------------------------------------------
// Per-group entry points used by the kernels.
// ---------------------------------------------------------------------------------------


DP_INLINE bool aff_is_inf(const AffG1& a) { return aff_is_inf_t(a); }
DP_INLINE bool aff_is_inf(const AffG2& a) { return aff_is_inf_t(a); }
DP_INLINE AffG1 aff_neg(const AffG1& a) { return aff_neg_t(a); }
DP_INLINE AffG2 aff_neg(const AffG2& a) { return aff_neg_t(a); }
DP_INLINE XyzzG1 pt_neg(const XyzzG1& p) { return xyzz_neg_t(p); }
DP_INLINE XyzzG2 pt_neg(const XyzzG2& p) { return xyzz_neg_t(p); }
DP_INLINE XyzzG1 pt_from_aff(const AffG1& a) { return xyzz_from_aff_t(a); }
DP_INLINE XyzzG2 pt_from_aff(const AffG2& a) { return xyzz_from_aff_t(a); }

DP_G1_COLD XyzzG1 pt_dbl(const XyzzG1& p) { return xyzz_dbl_t(p); }
DP_INLINE XyzzG1 pt_madd(const XyzzG1& p, const AffG1& q) { return xyzz_madd_t(p, q); }
DP_G1_COLD XyzzG1 pt_add(const XyzzG1& p, const XyzzG1& q) { return xyzz_add_t(p, q); }

DP_G2_OPS XyzzG2 pt_dbl(const XyzzG2& p) { return xyzz_dbl_t(p); }
DP_G2_MADD XyzzG2 pt_madd(const XyzzG2& p, const AffG2& q) { return xyzz_madd_t(p, q); }
DP_G2_OPS XyzzG2 pt_add(const XyzzG2& p, const XyzzG2& q) { return xyzz_add_t(p, q); }

// The general addition and doubling of the fold, the window reductions and the block trees
// (chains with two or three points live): G2's are one out-of-line copy each even where
// DP_G2_INLINE inlines them elsewhere (G1's are out of line already). Inline, msm_reduce_win_g2
// is 50,552 instructions with 1825 local loads and 1170 stores (sass_report.py); as calls 8,760
// and 24 / 624: on an H200 the G2 reduce phase at 2^22 takes 3.4 ms instead of 4.5, the fold 0.9
// instead of 1.2, and the msm module compiles in 13 s instead of 62. DP_G2_TAIL_INLINE keeps
// them inline (bench_msm.py build g2_tail_inline, the comparison). Every other point type's tail
// is its pt_add / pt_dbl.
template <typename P> DP_INLINE P pt_add_tail(const P& p, const P& q) { return pt_add(p, q); }
template <typename P> DP_INLINE P pt_dbl_tail(const P& p) { return pt_dbl(p); }
#if defined(__CUDA_ARCH__) && defined(DP_G2_INLINE) && !defined(DP_G2_TAIL_INLINE)
static __device__ __noinline__ XyzzG2 pt_add_tail(const XyzzG2& p, const XyzzG2& q) { return xyzz_add_t(p, q); }
static __device__ __noinline__ XyzzG2 pt_dbl_tail(const XyzzG2& p) { return xyzz_dbl_t(p); }
#endif

template <typename F> DP_INLINE bool pt_is_inf(const Xyzz<F>& p) { return f_is_zero(p.zz); }

template <typename F> DP_INLINE Xyzz<F> pt_identity(const Xyzz<F>&) { return xyzz_zero_t<F>(); }

// ---------------------------------------------------------------------------------------
// Homogeneous projective points with complete formulas (the constant-work MSM, msm_cw.cu).
// (X : Y : Z) with x = X/Z, y = Y/Z, identity (0 : 1 : 0). Renes-Costello-Batina 2016,
// algorithms 7 (addition) and 9 (doubling) for a = 0, b3 = 3b: one formula for every input,
// no identity / P + P / P + (-P) branches. Bucket data stays XYZZ; the conversions below
// move between the two.
// ---------------------------------------------------------------------------------------

template <typename F> struct Proj { F x, y, z; };
typedef Proj<Fq> ProjG1;
typedef Proj<Fq2> ProjG2;

// 3b: 9 on G1 (b = 3), as four additions.
DP_INLINE Fq f_mul_b3(Fq a) {
    Fq a2 = fq_add(a, a);
    Fq a4 = fq_add(a2, a2);
    return fq_add(fq_add(a4, a4), a);
}

// 3b' on the twist, Montgomery form (bn254.proj_b3(G2) * 2^256 mod q), one Fq2 product.
DP_INLINE Fq2 f_mul_b3(Fq2 a) {
    Fq2 b3 = {{{0xb62e0d6au, 0x3baa927cu, 0xd1b664fdu, 0xd71e7c52u, 0xd95d4664u, 0x03873e63u, 0x082ab8f4u, 0x0e75b5b1u}},
              {{0x7596fe35u, 0xaab7c666u, 0xbb6a27bau, 0x31d21a78u, 0x680401ffu, 0x85dd7297u, 0xdf39a7e9u, 0x03c52d6au}}};
    return fq2_mul(a, b3);
}

template <typename F> DP_INLINE Proj<F> proj_zero_t() {
    Proj<F> r;
    f_set_zero(r.x); f_set_one(r.y); f_set_zero(r.z);
    return r;
}

// XYZZ (x = X/ZZ, y = Y/ZZZ) to (X ZZZ : Y ZZ : ZZ ZZZ). The XYZZ identity (ZZ = ZZZ = 0) would
// give (0 : 0 : 0), so Y becomes 1 for it, by a select rather than a branch.
template <typename F> DP_INLINE Proj<F> proj_from_xyzz_t(const Xyzz<F>& p) {
    Proj<F> r;
    r.x = f_mul(p.x, p.zzz);
    r.y = f_mul(p.y, p.zz);
    r.z = f_mul(p.zz, p.zzz);
    F one;
    f_set_one(one);
    r.y = f_is_zero(p.zz) ? one : r.y;
    return r;
}

// (X : Y : Z) to (X Z, Y Z^2, Z^2, Z^3); Z = 0 gives all zero, the XYZZ identity.
template <typename F> DP_INLINE Xyzz<F> xyzz_from_proj_t(const Proj<F>& p) {
    Xyzz<F> r;
    r.zz = f_sqr(p.z);
    r.zzz = f_mul(r.zz, p.z);
    r.x = f_mul(p.x, p.z);
    r.y = f_mul(p.y, r.zz);
    return r;
}

// Algorithm 7, a = 0: 12 products, 2 by 3b.
template <typename F> DP_INLINE Proj<F> proj_add_t(const Proj<F>& a, const Proj<F>& b) {
    F t0 = f_mul(a.x, b.x);
    F t1 = f_mul(a.y, b.y);
    F t2 = f_mul(a.z, b.z);
    F t3 = f_sub(f_mul(f_add(a.x, a.y), f_add(b.x, b.y)), f_add(t0, t1));  // X1 Y2 + X2 Y1
    F t4 = f_sub(f_mul(f_add(a.y, a.z), f_add(b.y, b.z)), f_add(t1, t2));  // Y1 Z2 + Y2 Z1
    F t5 = f_sub(f_mul(f_add(a.x, a.z), f_add(b.x, b.z)), f_add(t0, t2));  // X1 Z2 + X2 Z1
    t0 = f_add(f_add(t0, t0), t0);  // 3 X1 X2
    t2 = f_mul_b3(t2);              // 3b Z1 Z2
    F s = f_add(t1, t2);            // Y1 Y2 + 3b Z1 Z2
    F d = f_sub(t1, t2);            // Y1 Y2 - 3b Z1 Z2
    t5 = f_mul_b3(t5);              // 3b (X1 Z2 + X2 Z1)
    Proj<F> r;
    r.x = f_sub(f_mul(t3, d), f_mul(t4, t5));
    r.y = f_add(f_mul(s, d), f_mul(t5, t0));
    r.z = f_add(f_mul(t4, s), f_mul(t0, t3));
    return r;
}

// Algorithm 9, a = 0: 6 products, 2 squares, 1 by 3b; the identity doubles to itself.
template <typename F> DP_INLINE Proj<F> proj_dbl_t(const Proj<F>& p) {
    F t0 = f_sqr(p.y);
    F z8 = f_add(t0, t0);
    z8 = f_add(z8, z8);
    z8 = f_add(z8, z8);               // 8 Y^2
    F t2 = f_mul_b3(f_sqr(p.z));      // 3b Z^2
    F x3 = f_mul(t2, z8);             // 24b Y^2 Z^2
    F y3 = f_add(t0, t2);             // Y^2 + 3b Z^2
    Proj<F> r;
    r.z = f_mul(f_mul(p.y, p.z), z8); // 8 Y^3 Z
    t0 = f_sub(t0, f_add(f_add(t2, t2), t2));  // Y^2 - 9b Z^2
    r.y = f_add(f_mul(t0, y3), x3);
    x3 = f_mul(t0, f_mul(p.x, p.y));
    r.x = f_add(x3, x3);
    return r;
}

DP_G1_COLD ProjG1 pt_add(const ProjG1& p, const ProjG1& q) { return proj_add_t(p, q); }
DP_G1_COLD ProjG1 pt_dbl(const ProjG1& p) { return proj_dbl_t(p); }
DP_G2_OPS ProjG2 pt_add(const ProjG2& p, const ProjG2& q) { return proj_add_t(p, q); }
DP_G2_OPS ProjG2 pt_dbl(const ProjG2& p) { return proj_dbl_t(p); }

template <typename F> DP_INLINE Proj<F> pt_identity(const Proj<F>&) { return proj_zero_t<F>(); }

// k * p by double-and-add from k's top bit, for XYZZ and projective points alike (pt_dbl and
// pt_add are overloaded). k is small, a bucket offset; only k, never p, shapes the ladder.
template <typename P> DP_INLINE P pt_mul_u32(const P& p, u32 k) {
    P acc = pt_identity(p);
    int top = 31;
    while (top >= 0 && ((k >> top) & 1u) == 0u) top--;
    for (int i = top; i >= 0; i--) {
        acc = pt_dbl_tail(acc);
        if ((k >> i) & 1u) acc = pt_add_tail(acc, p);
    }
    return acc;
}

#endif  // DP_CURVE_CUH
