// witness.cu - the "every witness value < r" check of a .wtns uploaded as it is. Needs field.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY
// * The host uploads the file's value bytes unchanged (standard form, DESIGN.md layout), so the
//   range check the host reader does (container.py lt_bound) runs here over the device copy
//   instead of over the host memory before the upload.
// * One thread per value; the top limb decides almost every value (values are uniform below r
//   or small), so the lower limbs are read only on a tie with r's top limb.
// * The first bad index is what the error names, so bad threads atomicMin their index into one
//   word the host initialises to 0xffffffff (nWitness is a u32 in the file: every index fits).
// * A group's witnesses, uploaded as one (G, n, 8) stack, are checked in one launch
//   (dp_witness_first_bad_group): blockIdx.y picks the witness, each has its own word, so a bad
//   witness is named alone and the others go on.
// * The body is a DP_INLINE function of the row so tests/test_witness_load.py builds it as host
//   C++ and compares it with lt_bound.

#ifndef DP_WITNESS_CU
#define DP_WITNESS_CU

// True when the 8-limb standard-form value at w is below r (top limb first).
DP_INLINE bool witness_below_r(const u32* w) {
    const u32 p[8] = DP_FR_P;
    for (int i = 7; i >= 0; i--)
        if (w[i] != p[i]) return w[i] < p[i];
    return false;  // equal to r
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// LAUNCH: one thread per value, grid = ceil(n / blockDim.x); *first_bad = 0xffffffff before.
extern "C" __global__ void dp_witness_first_bad(const u32* w, u32 n, u32* first_bad) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !witness_below_r(w + (u64)i * 8u)) atomicMin(first_bad, i);
}

// LAUNCH: grid = (ceil(n / blockDim.x), G); first_bad[g] = 0xffffffff before, for each of the G
// witnesses of n values stacked in w.
extern "C" __global__ void dp_witness_first_bad_group(const u32* w, u32 n, u32* first_bad) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 g = blockIdx.y;
    if (i < n && !witness_below_r(w + ((u64)g * n + i) * 8u)) atomicMin(first_bad + g, i);
}

#endif  // CUDA entry points

#endif  // DP_WITNESS_CU
