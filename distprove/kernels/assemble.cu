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
//   Montgomery conversion is one product a coordinate here. Outputs: affine rows in standard
//   form, infinity all zero, for the same byte copy back.
// * The key's part (ASM_VK_WORDS, the disk layout: Montgomery, uploaded once per key): alpha1,
//   beta1, beta2, and comb tables of delta1 and delta2: entry m (1..15) is the sum over the bits
//   j of m of 2^(64 j) delta, built on the host. r delta1 and s delta2 are then 64 doublings and
//   at most 64 mixed additions (asm_comb) instead of ~254 doublings and ~127 additions: the
//   G2 thread's chain is ~3,300 Fq products instead of ~11,000.
// * One launch, one thread a proof and curve: grid row 0 runs G1 (pi_a, then pi_c from it), row 1
//   G2 (pi_b), so the two chains run side by side and never share a warp. A group is at most a
//   few dozen proofs, so the launch takes one thread's chain: the G1 thread's, ~7,000 Fq
//   products (the comb, then s pi_a + r b1 over ~254 bits as one Straus chain: one doubling a
//   bit for both, pi_a + b1 added where both bits are set).
// * Not constant-time (nor is the host's assembly): r's and s's bits shape the branches.
// * Affine by a Fermat inversion per point and thread (curve.cuh's pt_store_affine_std): ~330
//   Fq products a point, under a tenth of a thread's chain, so a batch inversion across
//   threads would save little of the launch's time.
// * Host-compilable like field.cuh and curve.cuh: the kernel is left out without a CUDA
//   compiler, and tests/test_assemble_kernel_host.py runs assemble_g1_one / assemble_g2_one.

#ifndef DP_ASSEMBLE_CU
#define DP_ASSEMBLE_CU

#define ASM_G1_ROW 16   // u32 words of a G1 affine row
#define ASM_G2_ROW 32   // of a G2 affine row
#define ASM_G1_MSMS 4   // G1 MSM results a proof: A | B1 | C | H
// The key's words: alpha1 (16) | beta1 (16) | beta2 (32) | delta1's comb (16 G1 rows) | delta2's (16 G2 rows).
#define ASM_VK_BETA1 16
#define ASM_VK_BETA2 32
#define ASM_VK_DELTA1 64
#define ASM_VK_DELTA2 320
#define ASM_VK_WORDS 832

DP_INLINE void asm_get(Fq& a, const u32* w) { a = fq_load(w); }
DP_INLINE void asm_get(Fq2& a, const u32* w) { a = fq2_load(w); }

DP_INLINE Fq asm_to_mont(Fq a) { return fq_to_mont(a); }
DP_INLINE Fq2 asm_to_mont(Fq2 a) { a.c0 = fq_to_mont(a.c0); a.c1 = fq_to_mont(a.c1); return a; }

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

// k D for a standard-form 8-limb k from D's comb table (16 affine rows of 2W words, entry m the
// sum over the bits j of m of 2^(64 j) D; entry 0 is never read): bit i of each 64-bit quarter
// of k picks one entry, from i = 63 down.
template <typename F, int W> DP_INLINE Xyzz<F> asm_comb(const u32* table, const u32* k) {
    Xyzz<F> acc = xyzz_zero_t<F>();
    for (int i = 63; i >= 0; i--) {
        acc = pt_dbl(acc);
        const u32 m = asm_bit(k, i) | (asm_bit(k, 64 + i) << 1) | (asm_bit(k, 128 + i) << 2) | (asm_bit(k, 192 + i) << 3);
        if (m != 0u) acc = pt_madd(acc, asm_aff<F, W>(table + 2 * W * m));
    }
    return acc;
}

// One proof's pi_a and pi_c: msm = its rows A | B1 | C | H (4 x 16 words), blind = r | s.
DP_INLINE void assemble_g1_one(const u32* msm, const u32* blind, const u32* vk, u32* out_a, u32* out_c) {
    const u32* r = blind;
    const u32* s = blind + 8;
    const AffG1 alpha1 = asm_aff<Fq, 8>(vk), beta1 = asm_aff<Fq, 8>(vk + ASM_VK_BETA1);
    const XyzzG1 pi_a = pt_add(pt_madd(asm_point<Fq, 8>(msm), alpha1), asm_comb<Fq, 8>(vk + ASM_VK_DELTA1, r));
    const XyzzG1 b1 = pt_madd(asm_point<Fq, 8>(msm + ASM_G1_ROW), beta1);
    const XyzzG1 ch = pt_add(asm_point<Fq, 8>(msm + 2 * ASM_G1_ROW), asm_point<Fq, 8>(msm + 3 * ASM_G1_ROW));
    const XyzzG1 pi_c = pt_add(ch, asm_mul2(pi_a, s, b1, r));
    pt_store_affine_std(out_a, pi_a);
    pt_store_affine_std(out_c, pi_c);
}

// One proof's pi_b: msm = its B2 row (32 words), blind = r | s.
DP_INLINE void assemble_g2_one(const u32* msm, const u32* blind, const u32* vk, u32* out_b) {
    const AffG2 beta2 = asm_aff<Fq2, 16>(vk + ASM_VK_BETA2);
    const XyzzG2 pi_b = pt_add(pt_madd(asm_point<Fq2, 16>(msm), beta2), asm_comb<Fq2, 16>(vk + ASM_VK_DELTA2, blind + 8));
    pt_store_affine_std(out_b, pi_b);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// k proofs: g1 (k, 4, 16) A | B1 | C | H rows, g2 (k, 32) B2 rows, blind (k, 16) r | s, vk
// (ASM_VK_WORDS,), out_a and out_c (k, 16), out_b (k, 32). Grid row 0: G1, row 1: G2.
extern "C" __global__ void assemble_group(const u32* __restrict__ g1, const u32* __restrict__ g2,
                                          const u32* __restrict__ blind, const u32* __restrict__ vk, u32* out_a,
                                          u32* out_b, u32* out_c, u32 k) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    if (blockIdx.y == 0)
        assemble_g1_one(g1 + (u64)i * ASM_G1_MSMS * ASM_G1_ROW, blind + 16 * (u64)i, vk, out_a + 16 * (u64)i,
                        out_c + 16 * (u64)i);
    else
        assemble_g2_one(g2 + (u64)i * ASM_G2_ROW, blind + 16 * (u64)i, vk, out_b + 32 * (u64)i);
}
#endif  // CUDA

#endif  // DP_ASSEMBLE_CU
