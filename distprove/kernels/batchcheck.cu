// batchcheck.cu - each proof's own share of the batched Groth16 check (distprove/verifier.py,
// BatchCheck with device "gpu"), one proof per thread. Needs field.cuh, curve.cuh and pairing.cu
// (its Frobenius on the twist); it lives in the "pairing" module so its outputs feed the Miller
// product kernel without leaving the device.
//
// WHAT THIS FILE DECIDES, AND WHY
// * For proof i, pi_a / pi_b / pi_c as rows of the key layout (Montgomery limbs, infinity all
//   zero) and its batch coefficient rho_i = rho1 + lambda rho2 (verifier.py's Rho: two 64-bit
//   halves), the thread decides whether pi_b lies in G2 and writes -rho_i pi_a_i and
//   rho_i pi_c_i as affine G1 rows, the G1 side of the pairs (-rho_i pi_a_i, pi_b_i) and
//   (rho_i pi_c_i, delta2) of the batch equation. A proof whose pi_b is outside G2 gets two
//   all-zero rows (infinity: its pairs contribute 1 to the product) and inside = 0, and the host
//   checks it on its own.
// * The subgroup test is verifier.py's in_g2_subgroup, the same group elements: Q infinity is in
//   G2; else with xQ = [x]Q (x the 63-bit BN parameter), not in G2 if xQ is infinity, else in G2
//   iff xQ + Q + psi(xQ) + psi^2(xQ) - 2 psi^3(xQ) is infinity. The answer is a property of Q,
//   so exact group arithmetic gives verifier.py's answer for every point of the twist, including
//   those outside G2. psi acts on XYZZ coordinates directly, (conj(X) fx, conj(Y) fy, conj(ZZ),
//   conj(ZZZ)) with pairing.cu's Frobenius constants (conj is a field automorphism, so
//   ZZ^3 = ZZZ^2 still holds): no inversion.
// * rho P = rho1 P + rho2 phi(P), phi(x, y) = (beta x, y): one joint double-and-add over the 64
//   bits of both halves, then one Fq inversion for the affine row. Affine coordinates are unique,
//   so the rows equal verifier.py's _negated_multiples to the bit.
// * Points are XYZZ (curve.cuh): complete by case analysis (identity, P + P, P + (-P)); the twist
//   group has odd order r (2q - r), so no doubling meets y = 0 even outside G2.
// * rho_i pi_c_i is not summed here: each gets its own Miller pair with its key's delta2. For the
//   group sizes the prover makes (tens to hundreds of proofs) the extra pairs are extra threads of
//   a Miller launch far below one wave, and no reduction across threads by key is needed.
// * Everything is host C++ too: tests/test_pairing_kernel_host.py runs batchcheck_row against
//   verifier.py on the CPU.

#ifndef DP_BATCHCHECK_CU
#define DP_BATCHCHECK_CU

#define BATCHCHECK_BLOCK 64
// The BN parameter x = 4965661367192848881 (63 bits).
#define BATCHCHECK_BN_X 0x44e992b44a6909f1ull
// verifier.py's GLV_BETA in Montgomery form: phi(x, y) = (beta x, y) is multiplication by lambda on G1.
#define BATCHCHECK_BETA {0x13e80b9cu, 0x3350c88eu, 0xdb5e56b9u, 0x7dce557cu, 0xb615564au, 0x6001b4b8u, 0x020217e0u, 0x2682e617u}

// psi on XYZZ coordinates (see the banner); the identity (ZZ = 0) stays the identity.
DP_INLINE XyzzG2 batchcheck_psi(const XyzzG2& p) {
    const Fq2 fx = {{PAIRING_FROB_X0}, {PAIRING_FROB_X1}};
    const Fq2 fy = {{PAIRING_FROB_Y0}, {PAIRING_FROB_Y1}};
    XyzzG2 r;
    r.x = fq2_mul(fq2_conj(p.x), fx);
    r.y = fq2_mul(fq2_conj(p.y), fy);
    r.zz = fq2_conj(p.zz);
    r.zzz = fq2_conj(p.zzz);
    return r;
}

// verifier.py's in_g2_subgroup(q) for a point q of the twist (all-zero = infinity).
DP_INLINE bool batchcheck_in_g2(const AffG2& q) {
    if (aff_is_inf(q)) return true;
    XyzzG2 xq = pt_from_aff(q);  // the top bit of x
    DP_NO_UNROLL
    for (int i = 61; i >= 0; i--) {
        xq = pt_dbl(xq);
        if ((BATCHCHECK_BN_X >> i) & 1ull) xq = pt_madd(xq, q);
    }
    if (pt_is_inf(xq)) return false;  // the order of q divides x, which is smaller than r
    const XyzzG2 psi1 = batchcheck_psi(xq);
    const XyzzG2 psi2 = batchcheck_psi(psi1);
    const XyzzG2 minus_psi3 = pt_neg(batchcheck_psi(psi2));
    XyzzG2 s = pt_madd(xq, q);
    s = pt_add(s, psi1);
    s = pt_add(s, psi2);
    s = pt_add(s, minus_psi3);
    s = pt_add(s, minus_psi3);
    return pt_is_inf(s);
}

// (k1 + lambda k2) p as XYZZ: k1 p + k2 phi(p) by one joint double-and-add.
DP_INLINE XyzzG1 batchcheck_rho_mul(const AffG1& p, u64 k1, u64 k2) {
    const Fq beta = {BATCHCHECK_BETA};
    AffG1 phi = p;
    phi.x = fq_mul(p.x, beta);  // infinity stays all zero
    XyzzG1 acc = xyzz_zero_t<Fq>();
    DP_NO_UNROLL
    for (int i = 63; i >= 0; i--) {
        acc = pt_dbl(acc);
        if ((k1 >> i) & 1ull) acc = pt_madd(acc, p);
        if ((k2 >> i) & 1ull) acc = pt_madd(acc, phi);
    }
    return acc;
}

// p as an affine row of 16 words (infinity all zero): x = X (ZZ / ZZZ)^2, y = Y / ZZZ, one inversion.
DP_INLINE void batchcheck_store_g1(u32* dst, const XyzzG1& p) {
    if (pt_is_inf(p)) {
        for (int k = 0; k < 16; k++) dst[k] = 0u;
        return;
    }
    const Fq inv = fq_inv(p.zzz);
    const Fq zinv = fq_mul(p.zz, inv);
    fq_store(dst, fq_mul(p.x, fq_sqr(zinv)));
    fq_store(dst + 8, fq_mul(p.y, inv));
}

// Proof i: a, c (n, 16) and b (n, 32) rows, rho (n, 4) words (rho1 low, rho1 high, rho2 low,
// rho2 high); writes neg_a[i] = -rho pi_a, rho_c[i] = rho pi_c ((n, 16) rows, both all zero when
// pi_b is outside G2) and inside[i].
DP_INLINE void batchcheck_row(const u32* a, const u32* b, const u32* c, const u32* rho, u32* neg_a, u32* rho_c,
                              u32* inside, u64 i) {
    AffG2 q;
    q.x = fq2_load(b + i * 32u);
    q.y = fq2_load(b + i * 32u + 16u);
    const bool ok = batchcheck_in_g2(q);
    inside[i] = ok;
    if (!ok) {
        for (int k = 0; k < 16; k++) neg_a[i * 16u + k] = rho_c[i * 16u + k] = 0u;
        return;
    }
    const u32* w = rho + i * 4u;
    const u64 k1 = ((u64)w[1] << 32) | w[0], k2 = ((u64)w[3] << 32) | w[2];
    AffG1 p;
    p.x = fq_load(a + i * 16u);
    p.y = fq_load(a + i * 16u + 8u);
    batchcheck_store_g1(neg_a + i * 16u, batchcheck_rho_mul(aff_neg(p), k1, k2));
    p.x = fq_load(c + i * 16u);
    p.y = fq_load(c + i * 16u + 8u);
    batchcheck_store_g1(rho_c + i * 16u, batchcheck_rho_mul(p, k1, k2));
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// LAUNCH: BATCHCHECK_BLOCK threads a block, grid = ceil(n / BATCHCHECK_BLOCK); one proof a thread.
extern "C" __global__ void __launch_bounds__(BATCHCHECK_BLOCK) batchcheck_points(const u32* a, const u32* b,
                                                                                const u32* c, const u32* rho,
                                                                                u32* neg_a, u32* rho_c, u32* inside,
                                                                                u32 n) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    batchcheck_row(a, b, c, rho, neg_a, rho_c, inside, i);
}

#endif  // CUDA
#endif  // DP_BATCHCHECK_CU
