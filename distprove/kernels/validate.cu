// Point validation of a key's point rows (module "validate": field.cuh + this unit).
//
// Decides, for each row of G1 (16 limbs: x, y) or G2 (32 limbs: x.c0, x.c1, y.c0, y.c1) points in
// the key layout (Montgomery form, little-endian u32 limbs, infinity = all-zero row), whether every
// coordinate is < q and the point is on its curve, and writes the lowest bad row index with
// atomicMin: the host uploads a chunk, launches once and reads 4 bytes back. The result is the
// same as distprove/formats/pointcheck.py (the CPU check) on the same rows; no subgroup check, like
// snarkjs. The curve equation stays in Montgomery form: with X = xR, Y = yR and fq_mul(a, b) =
// a b R^-1, y^2 = x^3 + b  <=>  fq_mul(Y, Y) = fq_mul(fq_mul(X, X), X) + bR (per component in Fq2).
// The < q test runs before any product: fq_mul expects reduced inputs.

// b R mod q: G1's b = 3, and the twist's b' (bn254.G2_B), in Montgomery form.
#define DP_VALIDATE_B1 {0x50ad28d7u, 0x7a17caa9u, 0xe15521b9u, 0x1f6ac17au, 0x696bd284u, 0x334bea4eu, 0xce179d8eu, 0x2a1f6744u}
#define DP_VALIDATE_B2_0 {0x77b802a8u, 0x3bf938e3u, 0x3633535du, 0x020b1b27u, 0x49755260u, 0x26b7edf0u, 0x4384a86du, 0x2514c632u}
#define DP_VALIDATE_B2_1 {0xd1dcff67u, 0x38e7ecccu, 0x93ce0d3eu, 0x65f0b37du, 0x22ac00aau, 0xd749d0ddu, 0x4a688d4du, 0x0141b9ceu}

// 8 limbs < q.
DP_INLINE bool dp_lt_q(const u32* a) {
    const u32 p[8] = DP_FQ_P;
    for (int k = 7; k >= 0; k--) {
        if (a[k] != p[k]) return a[k] < p[k];
    }
    return false;
}

// 0 = valid or infinity, 1 = a coordinate >= q, 2 = off the curve (pointcheck's codes).
DP_INLINE int dp_point_status(const u32* row, int g2) {
    const int words = g2 ? 32 : 16;
    bool live = false;
    for (int k = 0; k < words; k++) live |= row[k] != 0u;
    if (!live) return 0;
    for (int c = 0; c < words; c += 8) {
        if (!dp_lt_q(row + c)) return 1;
    }
    if (!g2) {
        Fq x = fq_load(row), y = fq_load(row + 8);
        Fq b = {DP_VALIDATE_B1};
        return fq_eq(fq_mul(y, y), fq_add(fq_mul(fq_mul(x, x), x), b)) ? 0 : 2;
    }
    Fq2 x = fq2_load(row), y = fq2_load(row + 16);
    Fq2 b = {{DP_VALIDATE_B2_0}, {DP_VALIDATE_B2_1}};
    return fq2_eq(fq2_sqr(y), fq2_add(fq2_mul(fq2_sqr(x), x), b)) ? 0 : 2;
}

#ifdef __CUDACC__
// One thread a row; first_bad (initialised to 0xffffffff by the host) receives the lowest bad
// row index of this launch.
extern "C" __global__ void dp_validate_points(const u32* __restrict__ rows, u32 n, int g2, u32* first_bad) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int words = g2 ? 32 : 16;
    if (dp_point_status(rows + (size_t)i * words, g2) != 0) atomicMin(first_bad, i);
}
#endif
