// ntt.cu - number-theoretic transforms over Fr, natural order in and out. Needs field.cuh.
//
// WHAT THIS FILE DECIDES, AND WHY
// * One transform of size N = 2^L is a chain of P passes (the four-step split applied
//   recursively, N = n_1 * n_2 * ... * n_P, n_p = 2^m_p <= 2^12). Pass p does, for every row
//   and column of the current view, a sub-NTT of size n_p entirely in shared memory (all m_p
//   butterfly levels in one launch), then multiplies by the four-step
//   twiddle w_{N_p}^{c*k} read from a table laid out like the data (coalesced, no extra
//   multiplications to make it). Global memory is touched twice per pass (read + write), so
//   a 2^24 NTT is 3 passes (2^8 each; max_pass_log 12 in gpu/ntt.py: 2 of 2^12), not 24.
//   Inside a pass two butterfly levels are done per barrier on four elements held in
//   registers (half the shared-memory traffic and barriers of radix 2). Sub-NTTs up to 2^10
//   run on 2^10-element tiles (dp_ntt_pass, 4 blocks/SM), 2^11 and 2^12 on 2^12-element
//   tiles (dp_ntt_pass_big: 128 KiB of dynamic shared memory, one block per SM).
// * Natural order out without a bit-reversal pass: passes 1..P-1 work in place; the last pass
//   reads each row r and writes element k of it to digitrev(r) + M_P*k, which is where the
//   recursive four-step puts it. Blocks take lines in output order so the writes are
//   coalesced runs. Inside a sub-NTT the bit reversal is free: it is the shared-memory slot
//   a loaded element goes to (radix-2 DIT from bit-reversed slots).
// * A view is [outer][N][S] (S = stride of the transform axis), so the same kernel does a
//   plain NTT (outer = S = 1), the column NTTs of the staged four-step (S = block width) and
//   its row NTTs (outer = number of rows).
// * Fused extras, each one multiplication where the data already is: `pre` (one constant on
//   every input of the first pass: R^2 for to-Montgomery), `post_tab` (a per-output-index
//   table on the last pass: g^i/n, the iNTT scale fused with the odd-coset shift) and
//   `post` (one constant on the last pass: 1/n, or a raw 1/n to leave Montgomery form).
// * Fr products of a 2^24 forward NTT, n = 2^24 (gpu/ntt.py pass_products counts them for any
//   plan; a counting host build checks it). Warp cost = 32 x the products warps issue.
//   3 passes of 2^8 on 2^10 tiles: butterflies 3.25n a pass (the first level pair n/4, three
//     more pairs n each) less the products by w^0 where whole warps have lo = 0 (level pair
//     s = 2 on these tiles), and the four-step twiddles n per non-last pass (k = 0 and column 0
//     lanes skip, never a whole warp); pre/post none (the inverse adds n for 1/n): 187,695,104
//     = 11.1875n, 4.58 ms at 41 G/s. Every w^0 product skipped would give 11n + 1, the radix-2
//     count for any pass split; radix-2 and radix-4 levels time the same.
//   2 passes of 2^12 (one four-step twiddle pass fewer, but each pass's free first level pair
//     saves n/4 once fewer; w^0 skips at s = 2 and 4): 185,069,568 = 11.03n (4.51 ms at
//     41 G/s), and 2/3 of the memory traffic.
// * Kernel bodies are DP_INLINE functions of (block, thread, threads): every phase loops
//   over its work items with stride `threads`, so a host build that runs one "thread" per
//   block executes the same code sequentially (tests/test_kernels_compile.py does that
//   against the CPU reference). DP_SYNC is __syncthreads on the device, nothing on the host.
// * Twiddle and coset tables are made once per size on the device by dp_ntt_pow_table from a
//   two-level power table (base^i and base^(i*2^14), built on the host): one multiplication
//   per entry.
// * Shared memory is structure-of-arrays (limb l of slot i at (sm + slot(i))[l << LOG_E]).
//   Unswizzled (slot(i) = i), the loads into bit-reversed slots would have 8-way (unit stride)
//   to 32-way (strided views: passes 1..P-1) bank conflicts, strided stores 4-way and the
//   first butterfly pairs 2-4-way; ntt_slot xors the bank bits so every
//   phase of every full-tile pass shape is conflict-free (2^10 and 2^12 tiles, m = 4 .. 12:
//   tests/test_kernels_compile.py test_ntt_shared_memory_banks enumerates the warps' slots).
// * Butterfly work items go in twiddle order: the lanes of a warp share lo,
//   so the twiddle load is one broadcast and the products by w^0 = 1 are skipped without
//   divergence wherever a whole warp has lo = 0.

#ifndef DP_NTT_CU
#define DP_NTT_CU

#define NTT_LOG_E 10u      // dp_ntt_pass: tile of 2^10 elements (32 KiB static shared memory)
#define NTT_E (1u << NTT_LOG_E)
#define NTT_BIG_LOG_E 12u  // dp_ntt_pass_big: tile of 2^12 elements (128 KiB dynamic, opt-in)
#define NTT_TW_LOG 12u     // tw_sub holds w_{2^12}^e, e < 2^11: sub-NTTs up to 2^12
#define NTT_THREADS 256u
#ifndef NTT_MIN_BLOCKS  // pass-kernel occupancy: 3 blocks/SM (FP64 butterflies on an H200: 4 or 2
#define NTT_MIN_BLOCKS 3  // blocks/SM were 2-3% slower at 2^24; Shoup's likewise 1-3%)
#endif
#ifndef NTT_BIG_THREADS  // one block per SM; the host passes the same number (CupyKernels)
#define NTT_BIG_THREADS 1024
#endif
// The pass body's Fr products; a host build with NTT_COUNT_MULS counts them (the tests check
// the planner's product count, gpu/ntt.py pass_products, against it).
#ifdef NTT_COUNT_MULS
static u64 ntt_mul_count = 0;
#define NTT_COUNTED(product) (ntt_mul_count++, (product))
#else
#define NTT_COUNTED(product) (product)
#endif
#define NTT_MUL(x, y) NTT_COUNTED(fr_mul((x), (y)))

// Butterfly products: Montgomery, by field.cuh's device product (the FP64 pipe's) unless
// NTT_SHOUP=1: then the sub-NTT twiddle table holds (w, floor(w 2^256 / r)) per entry, w plain,
// and the butterflies multiply by Shoup's integer product (~23% fewer widening products than
// CIOS). On an H200 the 2^24 forward NTT takes 6.63 ms with CIOS butterflies, 5.76 with
// Shoup's and 5.61 with the FP64 product, so Shoup is a build option (gpu/ntt.py BUILDS
// "shoup"): the faster butterfly on GPUs where field.cuh keeps CIOS. Harvey's lazy butterflies
// do not pay with Shoup's product (1-2% slower); with the FP64 product they are the default
// (NTT_LAZY below).
#ifndef NTT_SHOUP
#define NTT_SHOUP 0
#endif
// NTT_SPLIT (the default where field.cuh's products are the FP64 pipe's): the sub-NTT twiddle
// table holds each w (Montgomery) already split into the FP64 product's five 52-bit limbs
// (field.cuh FrSplit, made on the host), so a butterfly product converts only its data operand
// (~1% of the 2^24 NTT on an H200; gpu/ntt.py BUILDS "unsplit" converts both).
#ifndef NTT_SPLIT
#if defined(DP_F64_MUL) && !NTT_SHOUP
#define NTT_SPLIT 1
#else
#define NTT_SPLIT 0
#endif
#endif
#if NTT_SPLIT && NTT_SHOUP
#error "NTT_SPLIT and NTT_SHOUP are two formats of the same twiddle table"
#endif
// NTT_LAZY (the default with NTT_SPLIT): Harvey's lazy butterflies. Values between butterfly
// levels lie in [0, 4r) instead of [0, r), a pass's inputs in [0, 2r) (the transform's own are
// below r): a butterfly brings u below 2r with one conditional subtraction (none where u is
// known to be below 2r) and returns (u + t, u + 2r - t) unreduced, and the butterflies' twiddle
// products and the four-step ones skip their final subtraction (fr_mul_split / fr_mul_lazy
// with reduce off: below 2r for inputs below 4r), so a radix-4 item does 4 conditional
// subtractions instead of 12. A product by w^0 = 1 that is skipped becomes a subtraction of 2r
// where its operand may be above 2r. The last pass's outputs are reduced to [0, r): by the full
// products of post_tab / post, or by two conditional subtractions. H200, 2^24 forward: 5.02 ms
// against 5.21 without (NTT_LAZY=0, gpu/ntt.py BUILDS "eager").
#ifndef NTT_LAZY
#define NTT_LAZY NTT_SPLIT
#endif
#if NTT_LAZY && !NTT_SPLIT
#error "NTT_LAZY needs NTT_SPLIT's product (fr_mul_split without its subtraction)"
#endif
// NTT_FUSE_LOAD (the default with NTT_LAZY): each pass's load does the first butterfly level
// pair in registers before its shared-memory stores, saving one store / load round trip of the
// tile and one barrier a pass (~1-2% of the pass kernel's instructions, counted from its SASS).
// With four values in flight the kernel spills more (static local loads / stores 49 / 33
// against 19 / 15, pipelines/sass_report.py), yet it is faster: H200, 2^24 forward 4.87 ms
// against 4.94 without (NTT_FUSE_LOAD=0, gpu/ntt.py BUILDS "unfused").
#ifndef NTT_FUSE_LOAD
#define NTT_FUSE_LOAD NTT_LAZY
#endif
// The sub-NTT twiddle table this build takes, for the host that makes it (gpu/ntt.py
// TWIDDLE_FORMATS): 0 Montgomery values, 1 Shoup pairs, 2 split limbs.
#define NTT_TW_FORMAT (NTT_SHOUP ? 1u : (NTT_SPLIT ? 2u : 0u))

#ifdef __CUDA_ARCH__
#define DP_SYNC() __syncthreads()
#else
#define DP_SYNC() ((void)0)
#endif

// The low `bits` bits of x reversed (bits <= 12 here). On the device one BREV: the loop cost the
// pass kernel's load phase ~35 instructions an element (cuobjdump -sass).
DP_INLINE u32 ntt_brev(u32 x, u32 bits) {
#ifdef __CUDA_ARCH__
    return bits ? __brev(x) >> (32u - bits) : 0u;
#else
    u32 r = 0;
    for (u32 i = 0; i < bits; i++) {
        r = (r << 1) | (x & 1u);
        x >>= 1;
    }
    return r;
#endif
}

// Word offset of slot i's limb 0 (limb l at + l * 2^LOG_E). The swizzle xors the bank bits
// (0-4) with bits 5-9 and a mix of bits 10-11 chosen by search so that no phase of any pass
// shape (tile 2^10 or 2^12, m = 4 .. 12, both item orders' loads and stores) has a conflict.
DP_INLINE u32 ntt_slot(u32 i) {
    u32 h = i >> 5;
    u32 x = h ^ (((h >> 5) & 1u) * 11u) ^ (((h >> 6) & 1u) * 21u);
    return i ^ (x & 31u);
}

// The slot's pointer first, then constant limb offsets: an index (l << LOG_E) + p in u32 may wrap
// as far as the compiler knows, so it kept eight addresses per element (16 live registers per
// butterfly operand pair, spilled to local memory in the pass kernel); from a pointer the limbs
// are immediate offsets of one address. H200, 2^24 forward: 5.25 ms against 5.42 indexed.
template <u32 LOG_E>
DP_INLINE Fr ntt_sm_get(const u32* sm, u32 i) {
    Fr x;
    const u32* at = sm + ntt_slot(i);
    DP_UNROLL
    for (u32 l = 0; l < 8; l++) x.v[l] = at[l << LOG_E];
    return x;
}

template <u32 LOG_E>
DP_INLINE void ntt_sm_put(u32* sm, u32 i, Fr x) {
    u32* at = sm + ntt_slot(i);
    DP_UNROLL
    for (u32 l = 0; l < 8; l++) at[l << LOG_E] = x.v[l];
}

// Global element at word offset 8*pos, as two 16-byte accesses on the device.
DP_INLINE Fr ntt_gload(const u32* base, u64 pos) {
    Fr x;
#ifdef __CUDA_ARCH__
    const uint4* p = reinterpret_cast<const uint4*>(base + pos * 8u);
    uint4 lo = p[0], hi = p[1];
    x.v[0] = lo.x; x.v[1] = lo.y; x.v[2] = lo.z; x.v[3] = lo.w;
    x.v[4] = hi.x; x.v[5] = hi.y; x.v[6] = hi.z; x.v[7] = hi.w;
#else
    x = fr_load(base + pos * 8u);
#endif
    return x;
}

// One sub-NTT twiddle, loaded once and applied to one or more values.
struct NttTw {
#if NTT_SPLIT
    FrSplit w;
#else
    Fr w;
#endif
#if NTT_SHOUP
    Fr wq;
#endif
};

DP_INLINE NttTw ntt_tw(const u32* tab, u32 e) {
    NttTw t;
#if NTT_SHOUP
    t.w = ntt_gload(tab, 2u * (u64)e);
    t.wq = ntt_gload(tab, 2u * (u64)e + 1u);
#elif NTT_SPLIT
    t.w = reinterpret_cast<const FrSplit*>(tab)[e];
#else
    t.w = ntt_gload(tab, e);
#endif
    return t;
}

// A butterfly operand times its twiddle: below r, or below 2r with NTT_LAZY (x below 4r).
DP_INLINE Fr ntt_tw_mul(Fr x, const NttTw& t) {
#if NTT_SHOUP
    return NTT_COUNTED(fr_mul_shoup(x, t.w, t.wq));
#elif NTT_SPLIT
    return NTT_COUNTED(fr_mul_split(x, t.w, !NTT_LAZY));
#else
    return NTT_MUL(x, t.w);
#endif
}

// 2r (below 2^255), the lazy butterflies' second modulus.
#define NTT_2R {0xe0000002u, 0x87c3eb27u, 0xf372e122u, 0x5067d090u, 0x0302b0bau, 0x70a08b6du, 0xc2634053u, 0x60c89ce5u}

// x - 2r if x >= 2r (x below 4r), as x.
DP_INLINE Fr ntt_csub2r(Fr x) {
    const u32 r2[8] = NTT_2R;
    mp_csub8(x.v, x.v, r2);
    return x;
}

// A butterfly operand whose product by w^0 = 1 is skipped: below 2r with NTT_LAZY, else as is.
DP_INLINE Fr ntt_tw_skip(Fr x) {
#if NTT_LAZY
    return ntt_csub2r(x);
#else
    return x;
#endif
}

// DIT butterfly (u, t) -> (u + t, u - t), t already multiplied by its twiddle. NTT_LAZY: u below
// 4r (below 2r already when `low`), t below 2r; u is brought below 2r, then (u + t, u + 2r - t),
// both below 4r.
DP_INLINE void ntt_bfly(Fr& u, Fr& t, bool low = false) {
#if NTT_LAZY
    const u32 r2[8] = NTT_2R;
    if (!low) u = ntt_csub2r(u);
    Fr d;
    mp_sub8(d.v, r2, t.v);
    mp_add8(d.v, d.v, u.v);
    mp_add8(u.v, u.v, t.v);
    t = d;
#else
    Fr d = fr_sub(u, t);
    u = fr_add(u, t);
    t = d;
#endif
}

// A non-last pass's output times its four-step twiddle: below 2r with NTT_LAZY (the next pass
// reads values below 4r), else below r.
DP_INLINE Fr ntt_pass_mul(Fr x, Fr w) {
    return NTT_COUNTED(NTT_LAZY ? fr_mul_lazy(x, w) : fr_mul(x, w));
}

// A value below 4r (NTT_LAZY) brought below r: the last pass's outputs that no product reduces.
DP_INLINE Fr ntt_canonical(Fr x) {
#if NTT_LAZY
    const u32 r[8] = DP_FR_P;
    x = ntt_csub2r(x);
    mp_csub8(x.v, x.v, r);
#endif
    return x;
}

DP_INLINE void ntt_gstore(u32* base, u64 pos, Fr x) {
#ifdef __CUDA_ARCH__
    uint4* p = reinterpret_cast<uint4*>(base + pos * 8u);
    p[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    p[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
#else
    fr_store(base + pos * 8u, x);
#endif
}

// Row r (big-endian digits k_1..k_{P-1}) of the last pass from d = its output-order index
// (little-endian digits). `digits`: count in bits 0-2, m_q in 5-bit fields from bit 3.
DP_INLINE u32 ntt_digit_reverse(u32 d, u32 digits, u32 log_mp) {
    u32 nd = digits & 7u, r = 0, shift = log_mp;
    for (u32 q = 0; q < nd; q++) {
        u32 mq = (digits >> (3u + 5u * q)) & 31u;
        shift -= mq;
        r |= (d & ((1u << mq) - 1u)) << shift;
        d >>= mq;
    }
    return r;
}

struct NttPass {
    const u32* src;
    u32* dst;
    const u32* tw_sub;    // w_{2^12}^e, e < 2^11 (inverse root for an inverse NTT): Montgomery, NTT_SHOUP pairs or NTT_SPLIT limbs
    const u32* tw_pass;   // non-last pass: w_{N_p}^{k*c} at k*N_{p+1} + c; may be null
    const u32* pre;       // null or one Fr multiplying every input
    const u32* post_tab;  // last pass: null or a multiplier per natural output index
    const u32* post;      // last pass: null or one Fr multiplying every output
    u32 m;                // log2 of the sub-NTT size n_p
    u32 log_t;            // log2 of the lines per block
    u32 log_c;            // non-last: log2(N_{p+1} * S); last: log2(S)
    u32 log_s;            // log2 of the view's stride S
    u32 last;             // 1 on the last pass
    u32 log_mp;           // last pass: log2(n_1 * ... * n_{P-1})
    u32 digits;           // last pass: the m_q of the earlier passes (see ntt_digit_reverse)
};

// Global position of element j (input) or k (output) of line g.
DP_INLINE u64 ntt_pos(const NttPass& a, u32 g, u32 j, bool out) {
    if (!a.last) {
        u64 row = g >> a.log_c, cc = g & ((1u << a.log_c) - 1u);
        return (((row << a.m) | j) << a.log_c) | cc;
    }
    u32 i = g & ((1u << a.log_s) - 1u);
    u32 od = g >> a.log_s;
    u32 d = od & ((1u << a.log_mp) - 1u);
    u64 o = od >> a.log_mp;
    u32 log_n = a.log_mp + a.m;
    u64 mid = out ? (((u64)j << a.log_mp) | d)
                  : (((u64)ntt_digit_reverse(d, a.digits, a.log_mp) << a.m) | j);
    return (((o << log_n) | mid) << a.log_s) | i;
}

// Level s on (x0, x1) and (x2, x3), level s + 1 on (x0, x2) and (x1, x3) of the radix-4 group at
// slots i + e * 2^s, twiddles by lo = i mod 2^s (mul: lo != 0; fresh: the pass's own inputs, below 2r). Loaded and multiplied in an order that keeps at most
// three values and one twiddle live.
template <u32 LOG_E>
DP_INLINE void ntt_group4(const NttPass& a, const u32* sm, u32 i, u32 s, u32 lo, bool mul, bool fresh,
                          Fr& x0, Fr& x1, Fr& x2, Fr& x3) {
    const u32 half = 1u << s;
    x1 = ntt_sm_get<LOG_E>(sm, i + half);
    x3 = ntt_sm_get<LOG_E>(sm, i + 3u * half);
    if (mul) {
        NttTw t1 = ntt_tw(a.tw_sub, lo << (NTT_TW_LOG - 1u - s));
        x1 = ntt_tw_mul(x1, t1);
        x3 = ntt_tw_mul(x3, t1);
    } else if (!fresh) {
        x1 = ntt_tw_skip(x1);
        x3 = ntt_tw_skip(x3);
    }
    x2 = ntt_sm_get<LOG_E>(sm, i + 2u * half);
    ntt_bfly(x2, x3, fresh);
    x3 = ntt_tw_mul(x3, ntt_tw(a.tw_sub, (lo + half) << (NTT_TW_LOG - 2u - s)));
    x2 = mul ? ntt_tw_mul(x2, ntt_tw(a.tw_sub, lo << (NTT_TW_LOG - 2u - s))) : ntt_tw_skip(x2);
    x0 = ntt_sm_get<LOG_E>(sm, i);
    ntt_bfly(x0, x1, fresh);
    ntt_bfly(x0, x2);
    ntt_bfly(x1, x3);
}

// Output k of line g to global memory: times its four-step twiddle (non-last passes; log_cols =
// log2(N_{p+1})), its post_tab entry and post (last pass), or brought below r.
DP_INLINE void ntt_store_out(const NttPass& a, u32 log_cols, u32 g, u32 k, Fr x, Fr post) {
    u64 pos = ntt_pos(a, g, k, true);
    if (!a.last) {
        u32 col = (g & ((1u << a.log_c) - 1u)) >> a.log_s;
        if (a.tw_pass && k != 0u && col != 0u)
            x = ntt_pass_mul(x, ntt_gload(a.tw_pass, ((u64)k << log_cols) | col));
        else
            x = ntt_tw_skip(x);  // the next pass's inputs: below 2r (NTT_LAZY)
    } else if (a.post_tab) {
        u32 d = (g >> a.log_s) & ((1u << a.log_mp) - 1u);
        x = NTT_MUL(x, ntt_gload(a.post_tab, ((u64)k << a.log_mp) | d));
    }
    if (a.post) x = NTT_MUL(x, post);
    else if (a.last && !a.post_tab) x = ntt_canonical(x);
    ntt_gstore(a.dst, pos, x);
}

// One pass over 2^LOG_E-element tiles (2^log_t lines of n = 2^m per block). Butterfly work
// items run in twiddle order (item q: lo = q >> (log_t + groups bits), then line, then group),
// so lanes of a warp share lo: the twiddle load is a broadcast and, where 32+ items share
// lo = 0 (whole warps), skipping the products by w^0 = 1 is free of divergence.
template <u32 LOG_E>
DP_INLINE void ntt_pass_body(const NttPass& a, u32 bid, u32 tid, u32 nthr, u32* sm) {
    const u32 n = 1u << a.m, lines = 1u << a.log_t, cnt = lines << a.m;
    const u32 g0 = bid << a.log_t;
    // Unit-stride axes are read j-fastest, strided ones line-fastest: both coalesce.
    const bool jfast_in = (a.last ? a.log_s : a.log_c) == 0u;
    const bool jfast_out = (a.last ? a.log_mp + a.log_s : a.log_c) == 0u;
    Fr pre;
    if (a.pre) pre = fr_load(a.pre);
    u32 s = 0;  // the first butterfly level still to do
#if NTT_FUSE_LOAD
    if (a.m >= 2u) {
        // Level pair 0 on the loaded values: slots i .. i + 3 (i = brev(j0), j0 < n/4) hold
        // elements j0, j0 + n/2, j0 + n/4, j0 + 3n/4 of the line; their twiddles are w^0 but one,
        // w_4 on (x1, x3) at level 1. Lanes take consecutive j0 (or lines, on strided views), so
        // each of the four loads coalesces and the stores hit the load's conflict-free slots.
        const u32 quarter = n >> 2;
        const NttTw w4 = ntt_tw(a.tw_sub, 1u << (NTT_TW_LOG - 2u));
        for (u32 q = tid; q < (cnt >> 2); q += nthr) {
            const u32 t = jfast_in ? q >> (a.m - 2u) : q & (lines - 1u);
            const u32 j0 = jfast_in ? q & (quarter - 1u) : q >> a.log_t;
            Fr x[4];
            DP_UNROLL
            for (u32 e = 0; e < 4u; e++) {  // e: slot i + e, element j0 + brev2(e) n/4
                x[e] = ntt_gload(a.src, ntt_pos(a, g0 + t, j0 + ((e >> 1) | ((e & 1u) << 1)) * quarter, false));
                if (a.pre) x[e] = NTT_MUL(x[e], pre);
            }
            ntt_bfly(x[2], x[3], NTT_LAZY);
            x[3] = ntt_tw_mul(x[3], w4);
            x[2] = ntt_tw_skip(x[2]);
            ntt_bfly(x[0], x[1], NTT_LAZY);
            ntt_bfly(x[0], x[2]);
            ntt_bfly(x[1], x[3]);
            const u32 i = (t << a.m) | ntt_brev(j0, a.m);
            DP_UNROLL
            for (u32 e = 0; e < 4u; e++) ntt_sm_put<LOG_E>(sm, i + e, x[e]);
        }
        s = 2u;
    } else
#endif
    {
        for (u32 q = tid; q < cnt; q += nthr) {
            u32 t = jfast_in ? q >> a.m : q & (lines - 1u);
            u32 j = jfast_in ? q & (n - 1u) : q >> a.log_t;
            Fr x = ntt_gload(a.src, ntt_pos(a, g0 + t, j, false));
            if (a.pre) x = NTT_MUL(x, pre);
            ntt_sm_put<LOG_E>(sm, (t << a.m) | ntt_brev(j, a.m), x);
        }
    }
    DP_SYNC();
    // DIT over each line, two levels per barrier (radix-4 groups in registers), then one
    // radix-2 level if m is odd. Level s pairs slots i, i + 2^s with twiddle
    // w_{2^{s+1}}^lo = w_{2^12}^{lo << (11 - s)}, lo = i mod 2^s (1 when lo = 0).
    for (; s + 1u < a.m; s += 2u) {
        const u32 half = 1u << s;
        // Level pair 0 takes the loaded values, below 2r with NTT_LAZY (a pass's inputs are), so
        // its skipped products and first two butterflies need no subtraction of 2r.
        const bool fresh = NTT_LAZY && s == 0u;
        for (u32 q = tid; q < (cnt >> 2); q += nthr) {
            const u32 lg = a.m - 2u - s, lip = a.log_t + lg;  // log2 groups per line, per lo
            const u32 lo = q >> lip, r = q & ((1u << lip) - 1u);
            const u32 i = ((r >> lg) << a.m) | ((r & ((1u << lg) - 1u)) << (s + 2u)) | lo;
            const bool mul = lo != 0u;
            Fr x0, x1, x2, x3;
            ntt_group4<LOG_E>(a, sm, i, s, lo, mul, fresh, x0, x1, x2, x3);
            ntt_sm_put<LOG_E>(sm, i, x0);
            ntt_sm_put<LOG_E>(sm, i + 2u * half, x2);
            ntt_sm_put<LOG_E>(sm, i + half, x1);
            ntt_sm_put<LOG_E>(sm, i + 3u * half, x3);
        }
        DP_SYNC();
    }
    if (s < a.m) {  // s = m - 1: one group per line
        const u32 half = 1u << s;
        for (u32 b = tid; b < (cnt >> 1); b += nthr) {
            const u32 lo = b >> a.log_t, i = ((b & (lines - 1u)) << a.m) | lo;
            const bool mul = lo != 0u;
            Fr v = ntt_sm_get<LOG_E>(sm, i + half);
            v = mul ? ntt_tw_mul(v, ntt_tw(a.tw_sub, lo << (NTT_TW_LOG - 1u - s))) : ntt_tw_skip(v);
            Fr u = ntt_sm_get<LOG_E>(sm, i);
            ntt_bfly(u, v);
            ntt_sm_put<LOG_E>(sm, i, u);
            ntt_sm_put<LOG_E>(sm, i + half, v);
        }
        DP_SYNC();
    }
    Fr post;
    if (a.post) post = fr_load(a.post);
    const u32 log_cols = a.log_c - a.log_s;  // non-last: log2(N_{p+1})
    for (u32 q = tid; q < cnt; q += nthr) {
        u32 t = jfast_out ? q >> a.m : q & (lines - 1u);
        u32 k = jfast_out ? q & (n - 1u) : q >> a.log_t;
        Fr x = ntt_sm_get<LOG_E>(sm, (t << a.m) | k);
        ntt_store_out(a, log_cols, g0 + t, k, x, post);
    }
}

// base^e for e < 2^(2*NTT_POW_LOG_H) from a two-level table (Montgomery): pows[i] = base^i and
// pows[2^h + i] = base^(i * 2^h) for i < 2^h: one multiplication per power.
#define NTT_POW_LOG_H 14u
DP_INLINE Fr ntt_pow(const u32* pows, u64 e) {
    Fr x = ntt_gload(pows, e & ((1u << NTT_POW_LOG_H) - 1u));
    u64 hi = e >> NTT_POW_LOG_H;
    if (hi) x = fr_mul(x, ntt_gload(pows, (1u << NTT_POW_LOG_H) + hi));
    return x;
}

// Exponent of table entry idx: mode 0: idx; mode 1: (idx >> log_c) * (idx mod 2^log_c), the
// four-step twiddle table of a pass; mode 2: ((idx / width + 0) * (idx % width + col0)) & emask,
// the staged four-step twiddle of a column block; mode 3: (idx / width + col0) + ((idx % width)
// << log_c), the natural index k1 + n1 k2 of entry [k1 - col0][k2] of a row block (the coset
// power of the distributed H, n1 = 2^log_c).
DP_INLINE u64 ntt_exponent(u64 idx, u32 mode, u32 log_c, u32 width, u32 col0, u32 emask) {
    if (mode == 0u) return idx;
    if (mode == 1u) return (idx >> log_c) * (idx & ((1u << log_c) - 1u));
    if (mode == 3u) return (idx / width + col0) + ((idx % width) << log_c);
    return ((idx / width) * (idx % width + col0)) & emask;
}

DP_INLINE void ntt_pow_body(u32* out, const u32* pows, const u32* scale, u64 count, u32 mode,
                            u32 log_c, u32 width, u32 col0, u32 emask, u32 multiply,
                            u64 first, u64 stride) {
    for (u64 idx = first; idx < count; idx += stride) {
        Fr x = ntt_pow(pows, ntt_exponent(idx, mode, log_c, width, col0, emask));
        if (scale) x = fr_mul(x, fr_load(scale));
        if (multiply) x = fr_mul(ntt_gload(out, idx), x);
        ntt_gstore(out, idx, x);
    }
}

// x[i] = x[i] * c, one Montgomery product (c = raw 1 takes x out of Montgomery form).
DP_INLINE void ntt_scale_body(u32* x, const u32* c, u64 count, u64 first, u64 stride) {
    Fr k = fr_load(c);
    for (u64 i = first; i < count; i += stride) ntt_gstore(x, i, fr_mul(ntt_gload(x, i), k));
}

// out = a*b - c taken out of Montgomery form (the H scalars of DESIGN.md step 3).
DP_INLINE void ntt_hcombine_body(const u32* a, const u32* b, const u32* c, u32* out, u64 count,
                                 u64 first, u64 stride) {
    for (u64 i = first; i < count; i += stride) {
        Fr h = fr_sub(fr_mul(ntt_gload(a, i), ntt_gload(b, i)), ntt_gload(c, i));
        ntt_gstore(out, i, fr_from_mont(h));
    }
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

extern "C" __global__ void __launch_bounds__(NTT_THREADS, NTT_MIN_BLOCKS)
dp_ntt_pass(const u32* src, u32* dst, const u32* tw_sub, const u32* tw_pass, const u32* pre,
            const u32* post_tab, const u32* post, u32 m, u32 log_t, u32 log_c, u32 log_s,
            u32 last, u32 log_mp, u32 digits) {
    __shared__ u32 sm[8 * NTT_E];
    NttPass a = {src, dst, tw_sub, tw_pass, pre, post_tab, post, m, log_t, log_c, log_s,
                 last, log_mp, digits};
    ntt_pass_body<NTT_LOG_E>(a, blockIdx.x, threadIdx.x, blockDim.x, sm);
}

// The same pass on 2^12-element tiles (sub-NTTs up to 2^12): 128 KiB of dynamic shared memory,
// so the launch opts in (cudaFuncAttributeMaxDynamicSharedMemorySize) and one block fills an SM.
extern "C" __global__ void __launch_bounds__(NTT_BIG_THREADS, 1)
dp_ntt_pass_big(const u32* src, u32* dst, const u32* tw_sub, const u32* tw_pass, const u32* pre,
                const u32* post_tab, const u32* post, u32 m, u32 log_t, u32 log_c, u32 log_s,
                u32 last, u32 log_mp, u32 digits) {
    extern __shared__ u32 sm_big[];
    NttPass a = {src, dst, tw_sub, tw_pass, pre, post_tab, post, m, log_t, log_c, log_s,
                 last, log_mp, digits};
    ntt_pass_body<NTT_BIG_LOG_E>(a, blockIdx.x, threadIdx.x, blockDim.x, sm_big);
}

// out[idx] (*)= scale * base^exponent(idx) for idx < count.
extern "C" __global__ void dp_ntt_pow_table(u32* out, const u32* pows, const u32* scale,
                                            unsigned long long count, u32 mode, u32 log_c,
                                            u32 width, u32 col0, u32 emask, u32 multiply) {
    ntt_pow_body(out, pows, scale, count, mode, log_c, width, col0, emask, multiply,
                 (u64)blockIdx.x * blockDim.x + threadIdx.x, (u64)gridDim.x * blockDim.x);
}

extern "C" __global__ void dp_fr_scale(u32* x, const u32* c, unsigned long long count) {
    ntt_scale_body(x, c, count, (u64)blockIdx.x * blockDim.x + threadIdx.x,
                   (u64)gridDim.x * blockDim.x);
}

// The build's NTT_TW_FORMAT, read by the host (CupyKernels) before it makes the twiddle table.
extern "C" __global__ void dp_ntt_tw_format(u32* out) { out[0] = NTT_TW_FORMAT; }

extern "C" __global__ void dp_h_combine(const u32* a, const u32* b, const u32* c, u32* out,
                                        unsigned long long count) {
    ntt_hcombine_body(a, b, c, out, count, (u64)blockIdx.x * blockDim.x + threadIdx.x,
                      (u64)gridDim.x * blockDim.x);
}

#endif  // CUDA entry points

#endif  // DP_NTT_CU
