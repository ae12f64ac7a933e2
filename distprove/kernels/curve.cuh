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
//   can be made out-of-line: G2 kernels that inline every Fq2 product become huge and
//   ptxas time grows superlinearly with function size. DP_G2_OPS controls that (noinline by
//   default on the device; inline on the host).
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
DP_INLINE Fq f_mul(Fq a, Fq b) { return fq_mul(a, b); }
DP_INLINE Fq f_sqr(Fq a) { return fq_sqr(a); }
DP_INLINE Fq f_neg(Fq a) { return fq_neg(a); }
DP_INLINE bool f_is_zero(Fq a) { return fq_is_zero(a); }
DP_INLINE void f_set_zero(Fq& a) { a = fq_zero(); }
DP_INLINE void f_set_one(Fq& a) { a = fq_one(); }
DP_INLINE Fq2 f_add(Fq2 a, Fq2 b) { return fq2_add(a, b); }
DP_INLINE Fq2 f_sub(Fq2 a, Fq2 b) { return fq2_sub(a, b); }
DP_INLINE Fq2 f_mul(Fq2 a, Fq2 b) { return fq2_mul(a, b); }
DP_INLINE Fq2 f_sqr(Fq2 a) { return fq2_sqr(a); }
DP_INLINE Fq2 f_neg(Fq2 a) { return fq2_neg(a); }
DP_INLINE bool f_is_zero(Fq2 a) { return fq2_is_zero(a); }
DP_INLINE void f_set_zero(Fq2& a) { a = fq2_zero(); }
DP_INLINE void f_set_one(Fq2& a) { a = fq2_one(); }

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
    F v = f_sqr(u);
    F w = f_mul(u, v);
    F s = f_mul(p.x, v);
    F x2 = f_sqr(p.x);
    F m = f_add(f_add(x2, x2), x2);
    Xyzz<F> r;
    r.x = f_sub(f_sub(f_sqr(m), s), s);
    r.y = f_sub(f_mul(m, f_sub(s, r.x)), f_mul(w, p.y));
    r.zz = f_mul(v, p.zz);
    r.zzz = f_mul(w, p.zzz);
    return r;
}

// Shared tail of add-2008-s / madd-2008-s once P = U2 - U1 != 0 and R = S2 - S1 are known.
template <typename F>
DP_INLINE Xyzz<F> xyzz_add_tail_t(F pdiff, F rdiff, F u1, F s1, F zz, F zzz) {
    F pp = f_sqr(pdiff);
    F ppp = f_mul(pdiff, pp);
    F q = f_mul(u1, pp);
    Xyzz<F> r;
    r.x = f_sub(f_sub(f_sub(f_sqr(rdiff), ppp), q), q);
    r.y = f_sub(f_mul(rdiff, f_sub(q, r.x)), f_mul(s1, ppp));
    r.zz = f_mul(zz, pp);
    r.zzz = f_mul(zzz, ppp);
    return r;
}

// madd-2008-s: p + q with q affine (all-zero q = infinity).
template <typename F> DP_INLINE Xyzz<F> xyzz_madd_t(const Xyzz<F>& p, const Aff<F>& q) {
    if (aff_is_inf_t(q)) return p;
    if (f_is_zero(p.zz)) return xyzz_from_aff_t(q);
    F u2 = f_mul(q.x, p.zz);
    F s2 = f_mul(q.y, p.zzz);
    F pdiff = f_sub(u2, p.x);
    F rdiff = f_sub(s2, p.y);
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
    F u1 = f_mul(p.x, q.zz);
    F u2 = f_mul(q.x, p.zz);
    F s1 = f_mul(p.y, q.zzz);
    F s2 = f_mul(q.y, p.zzz);
    F pdiff = f_sub(u2, u1);
    F rdiff = f_sub(s2, s1);
    if (f_is_zero(pdiff)) {
        if (f_is_zero(rdiff)) return pt_dbl(p);
        return xyzz_zero_t<F>();
    }
    return xyzz_add_tail_t(pdiff, rdiff, u1, s1, f_mul(p.zz, q.zz), f_mul(p.zzz, q.zzz));
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
DP_G2_OPS XyzzG2 pt_madd(const XyzzG2& p, const AffG2& q) { return xyzz_madd_t(p, q); }
DP_G2_OPS XyzzG2 pt_add(const XyzzG2& p, const XyzzG2& q) { return xyzz_add_t(p, q); }

template <typename F> DP_INLINE bool pt_is_inf(const Xyzz<F>& p) { return f_is_zero(p.zz); }

// k * p by double-and-add from k's top bit (k is small: a bucket offset).
template <typename F> DP_INLINE Xyzz<F> pt_mul_u32(const Xyzz<F>& p, u32 k) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    int top = 31;
    while (top >= 0 && ((k >> top) & 1u) == 0u) top--;
    for (int i = top; i >= 0; i--) {
        acc = pt_dbl(acc);
        if ((k >> i) & 1u) acc = pt_add(acc, p);
    }
    return acc;
}

#endif  // DP_CURVE_CUH
