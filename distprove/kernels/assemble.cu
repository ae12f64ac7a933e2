// assemble.cu - Groth16 proof assembly and blinding for a group of proofs of one key.
// Needs field.cuh and curve.cuh (the loader concatenates them in front of this unit).
//
// WHAT THIS FILE DECIDES, AND WHY
// * The points are distprove/stages/assemble.py's to the bit: pi_a = A + alpha1 + r delta1,
//   pi_b = B2 + beta2 + s delta2, pi_c = C + H + s pi_a + r (B1 + beta1), affine. A point has
//   one affine form, so any formulas give the same limbs; infinity anywhere (an MSM result,
//   r = 0, s = 0, a sum that cancels) goes through curve.cuh's complete-by-cases XYZZ additions.
// * Inputs: the five MSM results affine in standard form (x | y, G2 x.c0 | x.c1 | y.c0 | y.c1,
//   infinity all zero) and r and s as standard-form 8-limb scalars (drawn on the host by
//   `secrets`): the host holds them as integers, so their limbs are a byte copy, and the
//   Montgomery conversion is one product a coordinate here. The key's alpha1 | beta1 | delta1 (G1)
//   | beta2 | delta2 (G2) come in the disk layout (Montgomery), uploaded once per key.
//   Outputs: affine rows in standard form, infinity all zero, for the same byte copy back.
// * One thread a proof and curve: assemble_g1 (pi_a, pi_c) and assemble_g2 (pi_b) are separate
//   kernels, so G1 and G2 code never shares a warp; a group is at most a few dozen proofs, so
//   each launch is one thread's chain long (~254 doublings and the additions of its scalars).
// * Multiples by double-and-add from the top set bit; s pi_a + r b1 is one chain (Straus: one
//   doubling a bit for both, pi_a + b1 added where both bits are set). Not constant-time (nor is
//   the host's assembly): r's and s's bits shape the branches.
// * Affine by a Fermat inversion per point and thread (1/ZZ = ZZZ/d, 1/ZZZ = ZZ/d for
//   d = ZZ ZZZ): ~330 Fq products against ~9,000 in the G1 thread's multiples (G2's: one Fq
//   inversion inside the Fq2 one), so a batch inversion across threads would save under 4%.
// * Host-compilable like field.cuh and curve.cuh: the kernels are left out without a CUDA
//   compiler, and tests/test_assemble_kernel_host.py runs assemble_g1_one / assemble_g2_one.

#ifndef DP_ASSEMBLE_CU
#define DP_ASSEMBLE_CU

#define ASM_G1_ROW 16   // u32 words of a G1 affine row
#define ASM_G2_ROW 32   // of a G2 affine row
#define ASM_G1_MSMS 4   // G1 MSM results a proof: A | B1 | C | H
#define ASM_VK_WORDS 112  // alpha1 | beta1 | delta1 (16 words each) | beta2 | delta2 (32 each)

DP_INLINE void asm_get(Fq& a, const u32* w) { a = fq_load(w); }
DP_INLINE void asm_get(Fq2& a, const u32* w) { a = fq2_load(w); }
DP_INLINE void asm_put(u32* w, const Fq& a) { fq_store(w, a); }
DP_INLINE void asm_put(u32* w, const Fq2& a) { fq2_store(w, a); }

DP_INLINE Fq asm_to_mont(Fq a) { return fq_to_mont(a); }
DP_INLINE Fq2 asm_to_mont(Fq2 a) { a.c0 = fq_to_mont(a.c0); a.c1 = fq_to_mont(a.c1); return a; }
DP_INLINE Fq asm_from_mont(Fq a) { return fq_from_mont(a); }
DP_INLINE Fq2 asm_from_mont(Fq2 a) { a.c0 = fq_from_mont(a.c0); a.c1 = fq_from_mont(a.c1); return a; }

// A standard-form affine row x | y (W words each) as an XYZZ point (all zero: the identity).
template <typename F, int W> DP_INLINE Xyzz<F> asm_point(const u32* w) {
    Aff<F> a;
    asm_get(a.x, w);
    asm_get(a.y, w + W);
    a.x = asm_to_mont(a.x);  // 0 stays 0: infinity stays all zero
    a.y = asm_to_mont(a.y);
    return pt_from_aff(a);
}

template <typename F, int W> DP_INLINE Aff<F> asm_aff(const u32* w) {
    Aff<F> a;
    asm_get(a.x, w);
    asm_get(a.y, w + W);
    return a;
}

DP_INLINE u32 asm_bit(const u32* k, int i) { return (k[i >> 5] >> (i & 31)) & 1u; }

// The highest bit set in k or l (8-limb scalars), -1 when both are 0.
DP_INLINE int asm_top(const u32* k, const u32* l) {
    for (int j = 7; j >= 0; j--) {
        u32 v = k[j] | l[j];
        if (v != 0u) {
            int b = 31;
            while (((v >> b) & 1u) == 0u) b--;
            return 32 * j + b;
        }
    }
    return -1;
}

// k p + l q for standard-form 8-limb scalars k, l, one doubling a bit for both.
template <typename F> DP_INLINE Xyzz<F> asm_mul2(const Xyzz<F>& p, const u32* k, const Xyzz<F>& q, const u32* l) {
    const Xyzz<F> pq = pt_add(p, q);
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (int i = asm_top(k, l); i >= 0; i--) {
        acc = pt_dbl(acc);
        const u32 b = asm_bit(k, i) | (asm_bit(l, i) << 1);
        if (b == 1u) acc = pt_add(acc, p);
        else if (b == 2u) acc = pt_add(acc, q);
        else if (b == 3u) acc = pt_add(acc, pq);
    }
    return acc;
}

// k p.
template <typename F> DP_INLINE Xyzz<F> asm_mul(const Xyzz<F>& p, const u32* k) {
    const u32 zero[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    return asm_mul2(p, k, xyzz_zero_t<F>(), zero);
}

// p as a standard-form affine row x | y (W words each). Infinity (ZZ = ZZZ = 0) needs no branch:
// f_inv(0) is 0, so both coordinates come out 0, the all-zero row.
template <typename F, int W> DP_INLINE void asm_store_affine(u32* out, const Xyzz<F>& p) {
    const F inv = f_inv(f_mul(p.zz, p.zzz));
    asm_put(out, asm_from_mont(f_mul(p.x, f_mul(inv, p.zzz))));
    asm_put(out + W, asm_from_mont(f_mul(p.y, f_mul(inv, p.zz))));
}

// One proof's pi_a and pi_c: msm = its rows A | B1 | C | H (4 x 16 words), blind = r | s.
DP_INLINE void assemble_g1_one(const u32* msm, const u32* blind, const u32* vk, u32* out_a, u32* out_c) {
    const u32* r = blind;
    const u32* s = blind + 8;
    const AffG1 alpha1 = asm_aff<Fq, 8>(vk), beta1 = asm_aff<Fq, 8>(vk + 16), delta1 = asm_aff<Fq, 8>(vk + 32);
    const XyzzG1 pi_a = pt_add(pt_madd(asm_point<Fq, 8>(msm), alpha1), asm_mul(pt_from_aff(delta1), r));
    const XyzzG1 b1 = pt_madd(asm_point<Fq, 8>(msm + ASM_G1_ROW), beta1);
    const XyzzG1 ch = pt_add(asm_point<Fq, 8>(msm + 2 * ASM_G1_ROW), asm_point<Fq, 8>(msm + 3 * ASM_G1_ROW));
    const XyzzG1 pi_c = pt_add(ch, asm_mul2(pi_a, s, b1, r));
    asm_store_affine<Fq, 8>(out_a, pi_a);
    asm_store_affine<Fq, 8>(out_c, pi_c);
}

// One proof's pi_b: msm = its B2 row (32 words), blind = r | s.
DP_INLINE void assemble_g2_one(const u32* msm, const u32* blind, const u32* vk, u32* out_b) {
    const u32* s = blind + 8;
    const AffG2 beta2 = asm_aff<Fq2, 16>(vk + 48), delta2 = asm_aff<Fq2, 16>(vk + 80);
    const XyzzG2 pi_b = pt_add(pt_madd(asm_point<Fq2, 16>(msm), beta2), asm_mul(pt_from_aff(delta2), s));
    asm_store_affine<Fq2, 16>(out_b, pi_b);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// k proofs: g1 (k, 4, 16) A | B1 | C | H rows, blind (k, 16) r | s, vk (112,), out_a, out_c (k, 16).
extern "C" __global__ void assemble_g1(const u32* __restrict__ g1, const u32* __restrict__ blind,
                                       const u32* __restrict__ vk, u32* out_a, u32* out_c, u32 k) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    assemble_g1_one(g1 + (u64)i * ASM_G1_MSMS * ASM_G1_ROW, blind + 16 * (u64)i, vk, out_a + 16 * (u64)i,
                    out_c + 16 * (u64)i);
}

// k proofs: g2 (k, 32) B2 rows, blind and vk as above, out_b (k, 32).
extern "C" __global__ void assemble_g2(const u32* __restrict__ g2, const u32* __restrict__ blind,
                                       const u32* __restrict__ vk, u32* out_b, u32 k) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    assemble_g2_one(g2 + (u64)i * ASM_G2_ROW, blind + 16 * (u64)i, vk, out_b + 32 * (u64)i);
}
#endif  // CUDA

#endif  // DP_ASSEMBLE_CU
