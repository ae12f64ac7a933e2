// msm_sort.cu - msm.cu's digit sort as a two-pass LSD radix sort. Needs msm.cu.
//
// WHAT THIS FILE DECIDES, AND WHY (host side: distprove/backends/gpu/msm.py _planned_sort)
// * msm.cu's counting sort claims each entry's slot with a returning global atomic, and those
//   run at ~17 G/s on an H200 (13.7 of the 16.2 ms of a G1 2^24 sort at c = 17): the rate of
//   the L2's atomic units. Here global memory sees only plain loads and stores. A row is
//   (window, key = |digit| - 1) with c - 1 <= 18 key bits, sorted per window in two passes,
//   d1 = ceil((c-1)/2) low bits then d2 = c-1-d1 high bits (at most 512 bins), so each pass's
//   bookkeeping fits in shared memory. Wider keys (up to 27 bits: precomputed window multiples
//   put every window's digits in one set of 2^(c-1) buckets, c = 20..24) take a stable middle
//   pass (msm_radix_mid) between them, each pass at most 9 bits.
// * Reduce, then scan, per pass: a histogram kernel leaves the count of each (window, bin, tile)
//   at hist[(w * bins + bin) * tiles + tile]; the host takes one inclusive cupy.cumsum over the
//   whole array, which is where every (window, bin, tile) run ends in the pass's output:
//   windows in order and compact (zero digits and scalars 0 and 1 leave no gaps), then bins,
//   then tiles.
// * A tile is 4096 items (256 threads x 16), all loaded before any is ranked, then sorted by bin
//   in shared memory and written out in that order, so consecutive threads store consecutive
//   slots of a bin's run (scattered per item, each store instruction touched up to 32 sectors:
//   8.2 ms for pass 1 at G1 2^24 against 0.7 ms of traffic). Pass 1 ranks with a shared-memory
//   atomic per item (any order in a bin). A later pass must keep the order of the key bits below
//   its own inside each bin. Its tile arrives sorted by them and mostly holds one or two values
//   of them, so it ranks with an atomic per item too, on cells (bin, low part - the tile's
//   first), when the tile's low parts fit the cells. Otherwise it ranks in tile order with
//   per-warp counters: a warp takes 32 consecutive items per round and finds the lanes of its
//   bin with one ballot per bin bit. Either way the cells are scanned bin-major once per tile,
//   and the last pass's output is sorted by row.
// * msm_radix_digits computes each scalar's digits once (from window 0 up, for the carry) and
//   writes them per window, so pass 1 reads 4-byte words coalesced; pass 2 reads pass 1's keys
//   and point words. The last pass also leaves msm.cu's counts (each tile's rows are runs of
//   its sorted output; the host's cumsum gives the cursor), so everything after the sort is
//   unchanged.
// * Traffic at G1 2^24, c = 17 (16 windows, 251.7 M entries): ~12 GB of plain loads and stores,
//   2.7 ms at 4.3 TB/s; 7.1 ms on an H200 against the counting sort's 16.2
//   (pipelines/bench_sort.py).
// * Which sort runs is the device's choice (msm_sort_plan, from a sample of the scalars): on
//   witness-like scalars (mostly 0 and 1) the counting sort's cost follows the few live entries,
//   while the radix passes still read a digit per scalar and window. The host queues both; the
//   kernels of the one not chosen return at once.
// * Host builds (the MSM emulation of tests/test_kernels_host.py) sort each tile by bin in
//   thread 0, stably (the order the device's ranking produces), and store it as the device does.

#ifndef DP_MSM_SORT_CU
#define DP_MSM_SORT_CU

#define RADIX_THREADS 256u
#define RADIX_WARPS (RADIX_THREADS / 32u)
#define RADIX_ITEMS 16u  // the device's tile is RADIX_ITEMS * RADIX_THREADS items
#define RADIX_MAX_BINS 512u
#define RADIX_CELLS 2048u  // radix_tile's 32-bit cells (or twice as many 16-bit ones)
#define RADIX_HIST_WORDS 4096u  // msm_radix_digits' shared histogram: windows x bins per round
#define RADIX_NONE 0xffffffffu
#ifndef RADIX_P1_BLOCKS
#define RADIX_P1_BLOCKS 4
#endif
#define RADIX_SAMPLES 8192u  // scalars msm_sort_plan looks at
// The scatters: 3 blocks per SM (<= 85 registers; unbounded they took 113, 2 blocks per SM, and
// their 42 KiB of shared memory allows 3). Pass 1 holds no values over its tile (BY_INDEX below):
// 64 registers without spills, so 4 blocks (ptxas -v, sm_90): G1 2^24 merged on an H200, pass 1
// 1.32 against ~1.5 ms at 3 (-DRADIX_P1_BLOCKS=3).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RADIX_BOUNDS __launch_bounds__(RADIX_THREADS, 3)
#define RADIX_BOUNDS_P1 __launch_bounds__(RADIX_THREADS, RADIX_P1_BLOCKS)
#else
#define RADIX_BOUNDS
#define RADIX_BOUNDS_P1
#endif

DP_INLINE u32 radix_min(u32 a, u32 b) { return a < b ? a : b; }

// Digit words (|d| - 1) | (d < 0) << 31 of windows [lo, lo + nw) at digits[(w - lo) * n + i] (of a
// grouped MSM's vector p: at digits[(p * nw + w - lo) * n + i]), RADIX_NONE for d = 0 and for
// scalars 0 and 1. Block b takes scalars [b*tile, (b+1)*tile) and
// counts the low d1 bits of its keys per window into hist (layout above; with `flat`, the layout
// of one window of nw * n items whose tile w * tiles + b this block's window w is: msm_merged.cu's
// sort, when tile divides n).
extern "C" __global__ void msm_radix_digits(const u32* plan, const u32* scalars, u32* digits, u32* hist, u32 n,
                                            u32 c, u32 lo, u32 nw, u32 tile, u32 d1, u32 tiles, u32 flat) {
    __shared__ u32 h[RADIX_HIST_WORDS];
    if (plan[0] == 0u) return;
    u32 bins = 1u << d1;
    // Grouped (grid y = G, never flat): block row p digits scalar vector p into virtual windows
    // p * nw .. p * nw + nw - 1 (msm.cu's sc_group_vector).
    scalars = sc_group_vector(scalars, n);
    digits += (u64)blockIdx.y * nw * n;
    hist += (u64)blockIdx.y * nw * bins * tiles;
    u32 chunk = RADIX_HIST_WORDS / bins;
    u32 first = blockIdx.x * tile;
    u32 last = radix_min(first + tile, n);
    for (u32 w0 = 0; w0 < nw; w0 += chunk) {
        u32 w1 = radix_min(w0 + chunk, nw);
        for (u32 j = threadIdx.x; j < (w1 - w0) * bins; j += blockDim.x) h[j] = 0u;
        __syncthreads();
        for (u32 i = first + threadIdx.x; i < last; i += blockDim.x) {
            u32 s[8];
            sc_load(scalars, i, s);
            if (sc_is_zero_or_one(s)) {
                for (u32 w = w0; w < w1; w++) digits[(u64)w * n + i] = RADIX_NONE;
                continue;
            }
            sc_for_each_window(s, c, lo + w0, w1 - w0, [&](u32 wr, u32 mag, bool neg) {
                u32 word = RADIX_NONE;
                if (mag != 0u) {
                    word = (mag - 1u) | (neg ? 0x80000000u : 0u);
                    atomicAdd(&h[wr * bins + ((mag - 1u) & (bins - 1u))], 1u);
                }
                digits[(u64)(w0 + wr) * n + i] = word;
            });
        }
        __syncthreads();
        for (u32 j = threadIdx.x; j < (w1 - w0) * bins; j += blockDim.x) {
            u64 at = flat ? ((u64)(j & (bins - 1u)) * nw + w0 + (j >> d1)) * tiles : (u64)(w0 * bins + j) * tiles;
            hist[at + blockIdx.x] = h[j];
        }
        __syncthreads();
    }
}

#ifdef __CUDA_ARCH__
// Exclusive scan in place of cells[0 .. n) by the whole block (RADIX_THREADS threads): each thread
// a contiguous run of cells, then the block over the runs. Returns the total.
template <typename T> DP_INLINE u32 radix_block_scan(T* cells, u32 n, u32* wsum) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 per = (n + RADIX_THREADS - 1u) / RADIX_THREADS;
    u32 a = radix_min(threadIdx.x * per, n), e = radix_min(a + per, n);
    u32 sum = 0u;
    for (u32 j = a; j < e; j++) sum += cells[j];
    u32 x = sum;
DP_UNROLL
    for (u32 o = 1u; o < 32u; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31u) wsum[warp] = x;
    __syncthreads();
    u32 run = x - sum, total = 0u;
    for (u32 q = 0; q < RADIX_WARPS; q++) {
        run += q < warp ? wsum[q] : 0u;
        total += wsum[q];
    }
    for (u32 j = a; j < e; j++) {
        u32 v = cells[j];
        cells[j] = (T)run;
        run += v;
    }
    __syncthreads();
    return total;
}
#endif

// The items of one tile, in order k = 0 .. count-1, to their slots: item(k, key, val) loads item
// k (false: none), its bin is (key >> shift) & (2^d - 1), start(bin) is the bin's first slot for
// this tile, put(slot, key, val, first, last) stores. STABLE: the tile arrives sorted by the key
// bits below `shift` (the passes before), and a bin's items keep that order. Such a tile mostly
// holds one or two low parts L (G1 2^24 merged: ~1.6 M items per low part of the middle pass,
// ~12 K of the last), and items of equal bin and L may go in any order: when the tile's low parts
// span fewer than 5 values (3 for 9-bit passes) from the first one, L0, a shared-memory atomic on
// cell (bin, L - L0) ranks each item, as pass 1 ranks on cell (bin); otherwise per-warp counters and
// ballots keep the tile order (msm_radix_mid and pass2 spend 9.7-11 cycles per warp-issue on
// those ballots, Nsight Compute). RUNS: first / last say whether the item opens /
// closes its run of equal keys in the sorted tile (the last pass's keys are whole rows, sorted
// within the tile; false otherwise). BY_INDEX: put's val is the item's index k in the tile, not
// item's val (pass 1, whose value follows from k: 16 registers a thread fewer held over the tile).
template <bool STABLE, bool RUNS, bool BY_INDEX, typename Item, typename Start, typename Put>
DP_INLINE void radix_tile(u32 count, u32 shift, u32 d, Item item, Start start, Put put) {
    u32 bins = 1u << d;
#ifdef __CUDA_ARCH__
    // Counts of cells (bin, sub), then their exclusive scan, bin-major: sub = 0 (pass 1), the low
    // part L - L0 (a grouped tile) or the warp (as 16-bit counters, the ordered ranking).
    __shared__ u32 cells[RADIX_CELLS];
    __shared__ u32 gs[RADIX_MAX_BINS];
    __shared__ u32 wsum[RADIX_WARPS];
    __shared__ u32 low0, low1;
    __shared__ u32 skey[RADIX_ITEMS * RADIX_THREADS], sval[RADIX_ITEMS * RADIX_THREADS];
    unsigned short* wc = reinterpret_cast<unsigned short*>(cells);
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    // An odd stride puts a warp's cells of different bins in different banks (16 of 2^d * 16
    // cells put each atomic of a warp on one of two banks: the passes took 2.3 against 1.75 ms).
    u32 groups = d <= 8u ? 5u : 3u;
    // The words either ranking may use (pass 1: one a bin; whether a later pass's tile is grouped
    // is known only after the loads): 640 at 7 bits, not all 2048.
    u32 used = STABLE ? bins * (groups > RADIX_WARPS / 2u ? groups : RADIX_WARPS / 2u) : bins;
    for (u32 j = threadIdx.x; j < used; j += RADIX_THREADS) cells[j] = 0u;
    for (u32 j = threadIdx.x; j < bins; j += RADIX_THREADS) gs[j] = start(j);
    // Every load first, so that they are in flight together. Item r of a thread is index(r).
    auto index = [&](u32 r) { return (warp * RADIX_ITEMS + r) * 32u + lane; };
    u32 key[RADIX_ITEMS], val[RADIX_ITEMS], rank[RADIX_ITEMS];
    u32 ok = 0u;
DP_UNROLL
    for (u32 r = 0; r < RADIX_ITEMS; r++) {
        u32 k = index(r);
        if (k < count && item(k, key[r], val[r])) ok |= 1u << r;
    }
    // The low parts of the tile's first and last items (a later pass's items are all present).
    u32 low = (1u << shift) - 1u, kl = count - 1u;
    if (STABLE && threadIdx.x == 0u) low0 = key[0] & low;
    if (STABLE && warp == kl / (RADIX_ITEMS * 32u) && lane == (kl & 31u)) {
DP_UNROLL
        for (u32 r = 0; r < RADIX_ITEMS; r++)
            if (r == (kl / 32u) % RADIX_ITEMS) low1 = key[r] & low;
    }
    __syncthreads();
    u32 l0 = STABLE ? low0 : 0u;
    bool grouped = STABLE && low1 - l0 < groups;
    u32 stride = !STABLE ? 1u : grouped ? groups : RADIX_WARPS;
    // cell(r): item r's cell; its rank in the cell is rank[r].
    auto cell = [&](u32 r) {
        u32 b = (key[r] >> shift) & (bins - 1u);
        return b * stride + (!STABLE ? 0u : grouped ? (key[r] & low) - l0 : warp);
    };
    if (!STABLE || grouped) {
DP_UNROLL
        for (u32 r = 0; r < RADIX_ITEMS; r++) rank[r] = (ok >> r) & 1u ? atomicAdd(&cells[cell(r)], 1u) : 0u;
    } else {
DP_UNROLL
        for (u32 r = 0; r < RADIX_ITEMS; r++) {
            bool mine = (ok >> r) & 1u;
            u32 b = (key[r] >> shift) & (bins - 1u);
            // The lanes of the same bin, from one ballot per bin bit; the lowest one counts them.
            u32 peers = __ballot_sync(0xffffffffu, mine);
            for (u32 bit = 0; bit < d; bit++) {
                u32 set = __ballot_sync(0xffffffffu, (b >> bit) & 1u);
                peers &= ((b >> bit) & 1u) ? set : ~set;
            }
            u32 before = __popc(peers & ((1u << lane) - 1u));
            u32 base = mine ? wc[b * RADIX_WARPS + warp] : 0u;
            __syncwarp();
            if (mine && before == 0u) wc[b * RADIX_WARPS + warp] = (unsigned short)(base + __popc(peers));
            __syncwarp();
            rank[r] = base + before;
        }
    }
    __syncthreads();
    bool ordered = STABLE && !grouped;
    u32 total = ordered ? radix_block_scan(wc, bins * RADIX_WARPS, wsum) : radix_block_scan(cells, bins * stride, wsum);
    // The tile sorted by bin in shared memory, then written out in that order: consecutive
    // threads store consecutive slots of a bin's run (coalesced), not one sector each.
DP_UNROLL
    for (u32 r = 0; r < RADIX_ITEMS; r++) {
        if (!((ok >> r) & 1u)) continue;
        u32 at = (ordered ? (u32)wc[cell(r)] : cells[cell(r)]) + rank[r];
        skey[at] = key[r];
        sval[at] = BY_INDEX ? index(r) : val[r];
    }
    __syncthreads();
    for (u32 t = threadIdx.x; t < total; t += RADIX_THREADS) {
        u32 k = skey[t];
        u32 b = (k >> shift) & (bins - 1u);
        bool first = RUNS && (t == 0u || skey[t - 1u] != k);
        bool last = RUNS && (t + 1u == total || skey[t + 1u] != k);
        put(gs[b] + t - (ordered ? (u32)wc[b * stride] : cells[b * stride]), k, sval[t], first, last);
    }
#else
    // Thread 0 sorts the tile by bin, stably (an order each of the device's rankings may give),
    // then stores it as the device does.
    if (threadIdx.x != 0u) return;
    if (count > RADIX_ITEMS * RADIX_THREADS) __builtin_trap();
    u32 skey[RADIX_ITEMS * RADIX_THREADS], sval[RADIX_ITEMS * RADIX_THREADS];
    u32 ikey[RADIX_ITEMS * RADIX_THREADS], ival[RADIX_ITEMS * RADIX_THREADS];
    u32 at[RADIX_MAX_BINS + 1u] = {};
    u32 total = 0u;
    for (u32 k = 0; k < count; k++) {
        if (!item(k, ikey[total], ival[total])) continue;
        if (BY_INDEX) ival[total] = k;
        at[((ikey[total] >> shift) & (bins - 1u)) + 1u]++;
        total++;
    }
    for (u32 b = 0; b < bins; b++) at[b + 1u] += at[b];
    u32 first_of[RADIX_MAX_BINS];
    for (u32 b = 0; b < bins; b++) first_of[b] = at[b];
    for (u32 k = 0; k < total; k++) {
        u32 t = at[(ikey[k] >> shift) & (bins - 1u)]++;
        skey[t] = ikey[k];
        sval[t] = ival[k];
    }
    for (u32 t = 0; t < total; t++) {
        u32 k = skey[t];
        u32 b = (k >> shift) & (bins - 1u);
        bool first = RUNS && (t == 0u || skey[t - 1u] != k);
        bool last = RUNS && (t + 1u == total || skey[t + 1u] != k);
        put(start(b) + t - first_of[b], k, sval[t], first, last);
    }
#endif
}

// Pass 1, block (b, w): tile b of window w's digit words, by their low d1 bits, to keys (|d| - 1)
// and pts (point index << 1 | sign), compact over all windows.
extern "C" __global__ void RADIX_BOUNDS_P1
msm_radix_pass1(const u32* plan, const u32* digits, const u32* hist, const u32* ends, u32* keys, u32* pts, u32 n,
                u32 tile, u32 d1, u32 tiles) {
    u32 b = blockIdx.x, w = blockIdx.y;
    u32 first = b * tile;
    if (plan[0] == 0u || first >= n) return;
    u32 bins = 1u << d1;
    const u32* src = digits + (u64)w * n + first;
    // The key carries the digit's sign in bit 31 through the tile (above every bin bit).
    radix_tile<false, false, true>(
        radix_min(tile, n - first), 0u, d1,
        [&](u32 k, u32& key, u32& val) {
            key = src[k];
            val = 0u;
            return key != RADIX_NONE;
        },
        [&](u32 bin) {
            u32 at = (w * bins + bin) * tiles + b;
            return ends[at] - hist[at];
        },
        [&](u32 slot, u32 word, u32 k, bool, bool) {
            keys[slot] = word & 0x7fffffffu;
            pts[slot] = ((first + k) << 1) | (word >> 31);
        });
}

// Window w's range [first, end) of pass 1's output, from pass 1's histogram and its scan.
DP_INLINE void radix_window(const u32* hist1, const u32* ends1, u32 w, u32 bins1, u32 tiles, u32& first, u32& end) {
    u32 at = w * bins1 * tiles;
    first = ends1[at] - hist1[at];
    end = ends1[at + bins1 * tiles - 1u];
}

// h[(words[i] >> shift) & mask]++ for i in [from, to) by the block, RADIX_ITEMS loads of each
// thread in flight together (a load, then its atomic, left one load per thread in flight:
// 0.39 ms for G1 2^24's 201 M keys, about half the copy rate). RADIX_NONE words are skipped.
DP_INLINE void radix_count_bits(const u32* words, u32 from, u32 to, u32 shift, u32 mask, u32* h) {
    for (u32 base = from; base < to; base += RADIX_ITEMS * blockDim.x) {
        u32 v[RADIX_ITEMS];
DP_UNROLL
        for (u32 r = 0; r < RADIX_ITEMS; r++) {
            u32 i = base + r * blockDim.x + threadIdx.x;
            v[r] = i < to ? words[i] : RADIX_NONE;
        }
DP_UNROLL
        for (u32 r = 0; r < RADIX_ITEMS; r++)
            if (v[r] != RADIX_NONE) atomicAdd(&h[(v[r] >> shift) & mask], 1u);
    }
}

// A later pass's histogram, block (b, w): key bits [shift, shift + d) of tile b of window w's
// output of the pass before (pass 2 of two: shift = d1, the high bits; of three, the middle
// pass's shift = d1 and the last's d1 + dm). Every pass's windows are pass 1's ranges.
extern "C" __global__ void msm_radix_hist2(const u32* plan, const u32* keys, const u32* hist1, const u32* ends1,
                                           u32* hist2, u32 tile, u32 d1, u32 shift, u32 d, u32 tiles) {
    __shared__ u32 h[RADIX_MAX_BINS];
    if (plan[0] == 0u) return;
    u32 b = blockIdx.x, w = blockIdx.y;
    u32 bins2 = 1u << d;
    u32 first, end;
    radix_window(hist1, ends1, w, 1u << d1, tiles, first, end);
    for (u32 j = threadIdx.x; j < bins2; j += blockDim.x) h[j] = 0u;
    __syncthreads();
    u64 lo = (u64)first + (u64)b * tile;
    if (lo < end) radix_count_bits(keys, (u32)lo, (u32)(lo + tile < end ? lo + tile : end), shift, bins2 - 1u, h);
    __syncthreads();
    for (u32 j = threadIdx.x; j < bins2; j += blockDim.x) hist2[(w * bins2 + j) * tiles + b] = h[j];
}

// A stable later pass, block (b, w): tile b of window w's output of the pass before, by key bits
// [shift, shift + d), through put(slot, key, val, first, last) (radix_tile).
template <bool RUNS, typename Put>
DP_INLINE void radix_later_pass(const u32* keys, const u32* pts, const u32* hist1, const u32* ends1, const u32* hist,
                                const u32* ends, u32 tile, u32 d1, u32 shift, u32 d, u32 tiles, Put put) {
    u32 b = blockIdx.x, w = blockIdx.y;
    u32 bins = 1u << d;
    u32 first, end;
    radix_window(hist1, ends1, w, 1u << d1, tiles, first, end);
    u64 lo = (u64)first + (u64)b * tile;
    if (lo >= end) return;
    u32 from = (u32)lo;
    radix_tile<true, RUNS, false>(
        radix_min(tile, end - from), shift, d,
        [&](u32 k, u32& key, u32& val) {
            key = keys[from + k];
            val = pts[from + k];
            return true;
        },
        [&](u32 bin) {
            u32 at = (w * bins + bin) * tiles + b;
            return ends[at] - hist[at];
        },
        put);
}

// The middle pass of three (keys wider than two passes' 18 bits): key bits [d1, d1 + dm) of
// pass 1's output, stably, to keys_out / pts_out for the last pass.
extern "C" __global__ void RADIX_BOUNDS
msm_radix_mid(const u32* plan, const u32* keys, const u32* pts, const u32* hist1, const u32* ends1, const u32* histm,
              const u32* endsm, u32* keys_out, u32* pts_out, u32 tile, u32 d1, u32 dm, u32 tiles) {
    if (plan[0] == 0u) return;
    radix_later_pass<false>(keys, pts, hist1, ends1, histm, endsm, tile, d1, d1, dm, tiles,
                            [&](u32 slot, u32 key, u32 val, bool, bool) {
                                keys_out[slot] = key;
                                pts_out[slot] = val;
                            });
}

// The last pass, block (b, w): tile b of window w's output of the pass before, by the keys' high
// d2 bits (from bit shift), to the entries of msm.cu (row (w * nb + key), sorted by row), and
// counts[row] (zeroed by the host): the tile holds each of its rows as one run of consecutive
// slots, whose first entry subtracts its slot and last adds its slot + 1 (fire-and-forget
// atomics, two per row and tile: ~12.6 M at G1 2^24 merged, where a kernel of its own that
// found the runs in the sorted entries read all 1.6 GB of them again: 0.67 ms).
extern "C" __global__ void RADIX_BOUNDS
msm_radix_pass2(const u32* plan, const u32* keys, const u32* pts, const u32* hist1, const u32* ends1,
                const u32* hist2, const u32* ends2, MsmEntry* entries, u32* counts, u32 nb, u32 tile, u32 d1,
                u32 shift, u32 d2, u32 tiles) {
    if (plan[0] == 0u) return;
    u32 w = blockIdx.y;
    radix_later_pass<true>(keys, pts, hist1, ends1, hist2, ends2, tile, d1, shift, d2, tiles,
                           [&](u32 slot, u32 key, u32 val, bool first, bool last) {
                               MsmEntry out;
                               out.row = w * nb + key;
                               out.pt = val;
                               entries[slot] = out;
                               if (first) atomicSub(&counts[out.row], slot);
                               if (last) atomicAdd(&counts[out.row], slot + 1u);
                           });
}

// cursor[row] = its first entry, from the inclusive scan of counts the host left there.
extern "C" __global__ void msm_radix_cursor(const u32* plan, const u32* counts, u32* cursor, u32 rows) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (plan[0] == 0u || r >= rows) return;
    cursor[r] -= counts[r];
}

// ---------------------------------------------------------------------------------------
// The device's choice between the two sorts.
// ---------------------------------------------------------------------------------------

// plan[0] = 1 (the radix sort) when at least min_live / 1024 of up to RADIX_SAMPLES scalars,
// evenly spaced, are neither 0 nor 1; else 0 (msm.cu's counting sort, whose cost follows the
// live entries while the radix sort's passes cost something per scalar and window).
extern "C" __global__ void msm_sort_plan(const u32* scalars, u32 n, u32 min_live, u32* plan) {
    __shared__ u32 live;
    if (threadIdx.x == 0u) live = 0u;
    __syncthreads();
    u32 samples = radix_min(n, RADIX_SAMPLES), mine = 0u;
    for (u32 j = threadIdx.x; j < samples; j += blockDim.x) {
        u32 s[8];
        sc_load(scalars, (u32)((u64)j * n / samples), s);
        mine += sc_is_zero_or_one(s) ? 0u : 1u;
    }
    atomicAdd(&live, mine);
    __syncthreads();
    if (threadIdx.x == 0u) plan[0] = (u64)live * 1024u >= (u64)min_live * samples ? 1u : 0u;
}

// msm.cu's counting sort, when the plan says so.
extern "C" __global__ void msm_count_sel(const u32* plan, const u32* scalars, u32* counts, u32 n, u32 c, u32 lo,
                                         u32 nw, u32 nb) {
    if (plan[0] == 0u) msm_count_body(scalars, counts, n, c, lo, nw, nb);
}

extern "C" __global__ void msm_scatter_sel(const u32* plan, const u32* scalars, u32* cursor, MsmEntry* entries,
                                           u32 n, u32 c, u32 lo, u32 nw, u32 nb) {
    if (plan[0] == 0u) msm_scatter_body(scalars, cursor, entries, n, c, lo, nw, nb);
}

#endif  // DP_MSM_SORT_CU
