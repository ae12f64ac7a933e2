// gather.cu - the constraint-domain evaluations a, b and c = a*b of one witness. Needs field.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY
// * One thread per constraint row over the key's CSR (DESIGN.md: row_ptr, signal, value).
//   Rows are short (one or two terms on average) and many are empty, so a warp or a block
//   per row would idle most lanes and need a reduction; one thread per row keeps every lane
//   busy, writes only its own outputs and needs no atomics or barriers.
// * value is stored as coef*R^2 mod r and the witness is in standard form, so one Montgomery
//   product value*w = coef*w*R is already coef*w in Montgomery form: no conversion of either
//   input. a and b come out in Montgomery form, as the NTT wants them.
// * c = a*b is fused: on the constraint domain the C evaluation is the product of the A and B
//   evaluations (snarkjs stores no C matrix), and both factors are already in registers.
// * A group of proofs of one key is one launch (dp_gather_abc_group): blockIdx.y picks the
//   proof, whose witness and outputs are its rows of (G, n, 8) stacks. One launch for the group
//   instead of one a proof: a launch costs the host 10-20 us, the gather of a 2^12 domain less.
// * The body is a DP_INLINE function of the row index so the host build in
//   tests/test_kernels_compile.py runs the same code against distprove/bn254.py.

#ifndef DP_GATHER_CU
#define DP_GATHER_CU

// One 32-byte element, as two 16-byte loads on the device.
DP_INLINE Fr gather_load(const u32* base, u64 index) {
#ifdef __CUDA_ARCH__
    const uint4* p = reinterpret_cast<const uint4*>(base + index * 8u);
    uint4 lo = p[0], hi = p[1];
    Fr x = {{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
    return x;
#else
    return fr_load(base + index * 8u);
#endif
}

DP_INLINE Fr gather_row(const u32* row_ptr, const u32* signal, const u32* value, const u32* w,
                        u32 row) {
    Fr acc = fr_zero();
    u32 hi = row_ptr[row + 1u];
    for (u32 k = row_ptr[row]; k < hi; k++)
        acc = fr_add(acc, fr_mul(gather_load(value, k), gather_load(w, signal[k])));
    return acc;
}

DP_INLINE void gather_body(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                           const u32* b_ptr, const u32* b_sig, const u32* b_val, const u32* w,
                           u32* out_a, u32* out_b, u32* out_c, u32 row) {
    Fr a = gather_row(a_ptr, a_sig, a_val, w, row);
    Fr b = gather_row(b_ptr, b_sig, b_val, w, row);
    fr_store(out_a + (u64)row * 8u, a);
    fr_store(out_b + (u64)row * 8u, b);
    fr_store(out_c + (u64)row * 8u, fr_mul(a, b));
}

// Row `row` of proof `proof` of a group: its witness is row `proof` of the (G, n_vars, 8) stack w,
// its outputs rows of the (G, n_rows, 8) stacks.
DP_INLINE void gather_group_body(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                                 const u32* b_ptr, const u32* b_sig, const u32* b_val, const u32* w,
                                 u32* out_a, u32* out_b, u32* out_c, u32 n_vars, u32 n_rows,
                                 u32 proof, u32 row) {
    u64 wo = (u64)proof * n_vars * 8u, oo = (u64)proof * n_rows * 8u;
    gather_body(a_ptr, a_sig, a_val, b_ptr, b_sig, b_val, w + wo, out_a + oo, out_b + oo,
                out_c + oo, row);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// LAUNCH: one thread per row, grid = ceil(n_rows / blockDim.x).
extern "C" __global__ void dp_gather_abc(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                                         const u32* b_ptr, const u32* b_sig, const u32* b_val,
                                         const u32* w, u32* out_a, u32* out_b, u32* out_c,
                                         u32 n_rows) {
    u32 row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n_rows)
        gather_body(a_ptr, a_sig, a_val, b_ptr, b_sig, b_val, w, out_a, out_b, out_c, row);
}

// LAUNCH: one thread per row of each proof, grid = (ceil(n_rows / blockDim.x), G).
extern "C" __global__ void dp_gather_abc_group(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                                               const u32* b_ptr, const u32* b_sig, const u32* b_val,
                                               const u32* w, u32* out_a, u32* out_b, u32* out_c,
                                               u32 n_vars, u32 n_rows) {
    u32 row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n_rows)
        gather_group_body(a_ptr, a_sig, a_val, b_ptr, b_sig, b_val, w, out_a, out_b, out_c,
                          n_vars, n_rows, blockIdx.y, row);
}

#endif  // CUDA entry points

#endif  // DP_GATHER_CU
