// msm_affine.cu - batch-affine pair rounds ahead of the XYZZ bucket accumulation. Needs
// field.cuh, curve.cuh and msm.cu (MsmEntry, DP_NO_ROW).
//
// WHAT THIS FILE DECIDES, AND WHY (host side: _pair_rounds in distprove/backends/gpu/msm.py)
// * The XYZZ accumulation costs 8M + 2S per entry. An affine addition whose slope denominator
//   is inverted together with many others (Montgomery's trick) costs ~6.5 products: 1 forward,
//   5 backward, the thread's one inversion (~320 Fq products) spread over up to 1024 jobs
//   (gpu/msm.py PAIR_K). So before the accumulation R pair rounds each add every bucket's
//   entries two by two in affine coordinates, halving the bucket; the accumulation then reads
//   the last round's points.
// * A round maps (entries sorted by row, points, counts_in, cursor_in = each row's start) to
//   counts_out[row] = ceil(counts_in[row] / 2) (msm_pair_counts), cursor_out = its exclusive
//   prefix sum (the host), and job j = cursor_out[row] + o/2 for the entry at offset o (even)
//   of its row (msm_pair_jobs): output entry (row, j << 1) and point sums[j], the pair (o, o+1)
//   or the row's odd last entry alone (copied, negation applied). No pair crosses a bucket and
//   the output is sorted by row like the input; points keep the bases' layout (infinity 0).
// * Jobs, not entries, are what threads walk: thread t of `stride` takes jobs t, t + stride, ...
//   so every lane of a warp has a job at every step (walking entries and skipping the odd ones
//   leaves ~17 of 32 lanes active, Nsight Compute) and neighbouring lanes read neighbouring
//   descriptors, parked products and (after round 1) points. The forward pass needs only the x:
//   x = 0 only at infinity (3 is not a square in Fq, nor b' in Fq2), y only when the x are equal.
//   Descriptors are fetched ahead of the copies of the operands they name, and the operands
//   ahead of use (the stage below), so no product waits on the descriptor -> point chain.
// * Forward: each denominator d enters the running product, the product BEFORE it parked in
//   sums[j].x (the thread's own slot). One Fermat inversion (Fq2 through the norm). Backward:
//   1/d = inv * parked, inv *= d, lambda = num / d, x3 = lambda^2 - x1 - x2,
//   y3 = lambda (x1 - x3) - y1; the points are read again (k pairs would not fit in registers).
// * Special cases need no second inversion: an infinity operand (the sum is the other) and
//   q = -p (infinity) have no denominator; p = q is a doubling, d = 2 y1, num = 3 x1^2. No
//   finite point has y = 0 (odd prime order), so d is never 0.
// * The operands travel through a shared-memory stage by cp.async, ahead of use (three jobs
//   ahead in the forward pass, one in the backward): 3-6% of G1 2^24 (see PairStage). With it
//   G1's pass runs near the product's measured rate: more warps per SM (4 blocks at 128 registers,
//   or 64-thread blocks) and operands re-read from the stage instead of held in registers
//   (140 registers) all timed the same or slower (bench_msm.py g1_pair4 / g1_pair64*).
// * Jobs per thread are chosen on the device from the real job count (pair_stride): the fewest
//   whole waves of resident threads at <= kmax jobs each. The host knows only a bound (every
//   scalar in every window): witness-like scalars fill a tenth of it, and a bound-sized grid
//   left each thread a tenth of its jobs per inversion.
// * Whether rounds run at all is the device's call too (msm_pair_plan, from the sort's entry
//   count against the host's per-round thresholds), so nothing waits on the host: skipped
//   rounds return at once and msm_accumulate_sel reads the last set that was written.
// * On an H200 a round at G1 2^24 does its E/2 additions in ~31 ms where they cost ~36 in the
//   XYZZ pass, and three rounds take G2 2^22 from 73.9 to 58.6 ms. On witness-like scalars (45%
//   zero, 45% one) they lose (G1 2^24 18.4 -> 20.8 ms forced), so the plan skips them there.
// * Every Fq product of a pass is its own call (f_mul_each), unlike the XYZZ formulas' pairs
//   (curve.cuh): on an H200, 1/d and the next running inverse in one body of two make G1
//   2^24's rounds 5% slower, and Fq2 products two to a body G2 2^22's 8%.
// * Per-thread bodies are DP_INLINE functions of (arguments, thread index), so a host build
//   runs them one thread after another (tests/test_kernels_host.py).

#ifndef DP_MSM_AFFINE_CU
#define DP_MSM_AFFINE_CU

// How a pair p + q is formed.
#define DP_PAIR_COPY 0u  // an operand is infinity (the sum is the other) or q = -p (infinity)
#define DP_PAIR_ADD 1u   // x_p != x_q: d = x_q - x_p, num = y_q - y_p
#define DP_PAIR_DBL 2u   // p = q: d = 2 y_p, num = 3 x_p^2

// p + q of kind DP_PAIR_ADD or DP_PAIR_DBL, given inv = 1/d.
template <typename F> DP_INLINE Aff<F> pair_finish(const Aff<F>& p, const Aff<F>& q, u32 kind, F inv) {
    F num;
    if (kind == DP_PAIR_ADD) {
        num = f_sub(q.y, p.y);
    } else {
        F x2 = f_sqr_each(p.x);
        num = f_add(f_add(x2, x2), x2);
    }
    F lambda = f_mul_each(num, inv);
    Aff<F> r;
    r.x = f_sub(f_sub(f_sqr_each(lambda), p.x), q.x);
    r.y = f_sub(f_mul_each(lambda, f_sub(p.x, r.x)), p.y);
    return r;
}

// Point `pt` (index << 1 | negated) of a round's input.
template <typename F> DP_INLINE Aff<F> pair_load(const Aff<F>* pts, u32 pt) {
    Aff<F> q = pts[pt >> 1];
    return (pt & 1u) ? aff_neg_t(q) : q;
}

// Job j of a round: the points it adds (index << 1 | negated); q = DP_NO_PT for a row's odd
// last entry, which is copied.
#define DP_NO_PT 0xffffffffu
struct alignas(8) PairJob {
    u32 p, q;
};

// Entry i = e of a round's input, its row starting at `start`: when it opens a pair (even
// offset in its row), job j = cursor_out[row] + offset / 2 and the output entry (row, j << 1).
DP_INLINE void msm_pair_jobs_body(const MsmEntry* in, u32 start, const u32* counts_in, const u32* cursor_out,
                                  PairJob* jobs, MsmEntry* out, u32 i, MsmEntry e) {
    u32 o = i - start;
    if (o & 1u) return;
    u32 j = cursor_out[e.row] + (o >> 1);
    PairJob jb;
    jb.p = e.pt;
    jb.q = o + 1u < counts_in[e.row] ? in[i + 1u].pt : DP_NO_PT;
    jobs[j] = jb;
    MsmEntry oe;
    oe.row = e.row;
    oe.pt = j << 1;
    out[j] = oe;
}

// Entries per thread and step of msm_pair_jobs' grid-stride loop, their loads issued together:
// one entry a step left one entry -> cursor -> pair chain of loads per thread in flight.
#define PAIR_JOBS_UNROLL 4u

// Grid-stride over the round's real entries: a small fixed grid, so a round the plan skips
// costs one launch of few blocks rather than one thread per entry of the host's bound.
extern "C" __global__ void msm_pair_jobs(const u32* plan, u32 round, const MsmEntry* in, const u32* cursor_in,
                                         const u32* counts_in, const u32* cursor_out, u32 rows, PairJob* jobs,
                                         MsmEntry* out) {
    if (round >= plan[0]) return;
    u32 total = cursor_in[rows - 1u] + counts_in[rows - 1u];
    u32 stride = gridDim.x * blockDim.x;
    for (u32 i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < total; i0 += PAIR_JOBS_UNROLL * stride) {
        MsmEntry e[PAIR_JOBS_UNROLL];
        u32 start[PAIR_JOBS_UNROLL];
DP_UNROLL
        for (u32 q = 0; q < PAIR_JOBS_UNROLL; q++)
            if (i0 + q * stride < total) e[q] = in[i0 + q * stride];
DP_UNROLL
        for (u32 q = 0; q < PAIR_JOBS_UNROLL; q++)
            if (i0 + q * stride < total) start[q] = cursor_in[e[q].row];
DP_UNROLL
        for (u32 q = 0; q < PAIR_JOBS_UNROLL; q++)
            if (i0 + q * stride < total)
                msm_pair_jobs_body(in, start[q], counts_in, cursor_out, jobs, out, i0 + q * stride, e[q]);
    }
}

// One pair round's arguments (see the banner).
template <typename F> struct PairRound {
    const PairJob* jobs;
    const Aff<F>* pts;       // the points the jobs index
    const u32* cursor_out;   // each row's first job
    const u32* counts_out;
    u32 rows;
    u32 resident;            // threads the device holds at once (the host's count)
    u32 kmin, kmax;          // least and most jobs per thread
    Aff<F>* sums;            // job j's sum
};

// Work per thread for `total` items on `resident` threads at most `most` each: the fewest whole
// waves, then as even a share as they allow.
DP_INLINE u64 wave_share(u32 total, u32 resident, u32 most) {
    u64 wave = (u64)resident * most;
    u64 waves = total > wave ? (total + wave - 1u) / wave : 1u;
    return (total + waves * resident - 1u) / (waves * resident);
}

// Threads of a round with n jobs (on the device: the host knows only a bound): the fewest whole
// waves of resident threads with at most kmax jobs each, then k as even as they allow (>= kmin),
// so a sparse round (witness scalars) still amortises each inversion over k jobs.
template <typename F> DP_INLINE u32 pair_stride(const PairRound<F>& a, u32 n, u32 launched) {
    u64 k = wave_share(n, a.resident, a.kmax);
    k = k < a.kmin ? a.kmin : (k > a.kmax ? a.kmax : k);
    u64 stride = (n + k - 1u) / k;
    return stride < launched ? (u32)stride : launched;
}

// Job jb's kind from its operands' x, and the slope denominator d unless the kind is
// DP_PAIR_COPY. x = 0 only at infinity: neither curve has a point with x = 0 (3 is not a
// square in Fq, nor b' = 3 / (9 + u) in Fq2), so the y are read only when the x are equal.
template <typename F> DP_INLINE u32 pair_kind_x(const Aff<F>* pts, PairJob jb, const F& px, const F& qx, F& d) {
    if (jb.q == DP_NO_PT || f_is_zero(px) || f_is_zero(qx)) return DP_PAIR_COPY;
    d = f_sub(qx, px);
    if (!f_is_zero(d)) return DP_PAIR_ADD;
    F py = pair_load(pts, jb.p).y;
    if (!f_is_zero(f_sub(pair_load(pts, jb.q).y, py))) return DP_PAIR_COPY;  // q = -p
    d = f_add(py, py);
    return DP_PAIR_DBL;
}

// Job j's sum once p and q (q zero for DP_NO_PT) are in registers; inv = 1 / (the product of
// this and every earlier job's denominator), parked = the product of the earlier ones.
template <typename F> DP_INLINE void pair_back_one(const PairRound<F>& a, PairJob jb, u32 j, const Aff<F>& p,
                                                   Aff<F> q, const F& parked, F& inv) {
    F d;
    u32 kind = pair_kind_x(a.pts, jb, p.x, q.x, d);
    if (kind != DP_PAIR_COPY) {
        F inv_d = f_mul_each(inv, parked);
        inv = f_mul_each(inv, d);
        a.sums[j] = pair_finish(p, q, kind, inv_d);
    } else if (f_is_zero(q.x)) {
        a.sums[j] = p;
    } else if (f_is_zero(p.x)) {
        a.sums[j] = q;
    } else {  // q = -p
        f_set_zero(q.x);
        f_set_zero(q.y);
        a.sums[j] = q;
    }
}

// The stage: the pair passes' operands copied into shared memory ahead of use by cp.async
// (no register holds them in flight). Round 1 gathers them from the bases at random and later
// rounds from the last round's sums; Nsight Compute on the unstaged G1 pass at 2^24 put 2.3 of
// its 6.0 cycles between issues on those loads. The backward pass copies job j - stride's two
// points into the other half of a double buffer while job j computes; the forward pass (one
// product a job: too little to cover a gather one job ahead) copies the x three jobs ahead into
// a ring of four slots in the same memory. H200, G1 2^24, against points prefetched into
// registers one job ahead: round 1 25.9 -> 23.8 ms, 2.3 -> 1.25 cycles on loads. The passes are written once, over PairStage or PairDirect.
// Layout: 16-byte chunk f of thread tid at [f * DP_PAIR_BLOCK + tid], so a warp's reads of one
// chunk are 512 consecutive bytes (no bank conflicts). Double buffering keeps cp.async off a
// buffer the thread may still be reading.
struct alignas(16) Chunk16 {
    u32 w[4];
};
#ifndef DP_PAIR_BLOCK
#define DP_PAIR_BLOCK 128  // threads per pair block (gpu/msm.py PAIR_THREADS)
#endif

#ifndef __CUDA_ARCH__
// Host builds (tests/test_kernels_host.py) queue the copies and land them only at a wait, as
// cp.async may: a wait in the wrong place reads stale chunks there too.
struct StageHostQueue {
    Chunk16* dst[64];
    const Chunk16* src[64];
    u32 group[64];
    u32 n = 0, open = 0;
};
inline StageHostQueue& stage_host_queue() {
    static thread_local StageHostQueue q;
    return q;
}
#endif

DP_INLINE void stage_copy16(Chunk16* dst, const Chunk16* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"((u32)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
#elif defined(__CUDA_ARCH__)
    *dst = *src;
#else
    StageHostQueue& q = stage_host_queue();
    if (q.n == 64u) __builtin_trap();
    q.dst[q.n] = dst;
    q.src[q.n] = src;
    q.group[q.n++] = q.open;
#endif
}

// Close the copies issued since the last commit (possibly none) as one group.
DP_INLINE void stage_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif !defined(__CUDA_ARCH__)
    stage_host_queue().open++;
#endif
}

#ifndef __CUDA_ARCH__
// Land every queued copy but those of the newest `pending` committed groups (and uncommitted).
inline void stage_host_land(u32 pending) {
    StageHostQueue& q = stage_host_queue();
    u32 kept = 0;
    for (u32 i = 0; i < q.n; i++) {
        if (q.group[i] + pending < q.open) {
            *q.dst[i] = *q.src[i];
        } else {
            q.dst[kept] = q.dst[i];
            q.src[kept] = q.src[i];
            q.group[kept++] = q.group[i];
        }
    }
    q.n = kept;
}
#endif

// Wait until at most the newest N committed groups are in flight: the buffer about to be read
// has landed (the backward pass waits with N = 1, the forward pass with N = 3).
template <u32 N> DP_INLINE void stage_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif !defined(__CUDA_ARCH__)
    stage_host_land(N);
#endif
}

// One thread's view of the stage: flat chunk f at base[f * DP_PAIR_BLOCK]. The backward pass's
// buffer b holds p at chunk b * BUF and q at b * BUF + CH; the forward pass's slot s (of 4) holds
// a job's x of p at s * CH and x of q at s * CH + CH / 2.
template <typename F> struct PairStage {
    static constexpr u32 CH = sizeof(Aff<F>) / 16u;  // chunks per point
    static constexpr u32 BUF = 2u * CH;
    Chunk16* base;  // this thread's chunk 0
    DP_INLINE void commit() const { stage_commit(); }
    template <u32 N> DP_INLINE void wait() const { stage_wait<N>(); }
    DP_INLINE void put(u32 f, const void* src, u32 count) const {
        const Chunk16* from = static_cast<const Chunk16*>(src);
#pragma unroll
        for (u32 c = 0; c < count; c++) stage_copy16(base + (f + c) * DP_PAIR_BLOCK, from + c);
    }
    template <typename T> DP_INLINE T take(u32 f) const {
        T r;
        u32* w = reinterpret_cast<u32*>(&r);
#pragma unroll
        for (u32 c = 0; c < sizeof(T) / 16u; c++) {
            Chunk16 v = base[(f + c) * DP_PAIR_BLOCK];
#pragma unroll
            for (u32 k = 0; k < 4u; k++) w[4u * c + k] = v.w[k];
        }
        return r;
    }
    DP_INLINE void issue(u32 b, const Aff<F>* pts, PairJob jb) const {
        put(b * BUF, pts + (jb.p >> 1), CH);
        if (jb.q != DP_NO_PT) put(b * BUF + CH, pts + (jb.q >> 1), CH);
    }
    DP_INLINE void issue_x(u32 s, const Aff<F>* pts, PairJob jb) const {
        put(s * CH, &pts[jb.p >> 1].x, CH / 2u);
        if (jb.q != DP_NO_PT) put(s * CH + CH / 2u, &pts[jb.q >> 1].x, CH / 2u);
    }
    DP_INLINE Aff<F> read(u32 b, u32 which, u32 pt) const {
        Aff<F> r = take<Aff<F>>(b * BUF + which * CH);
        return (pt & 1u) ? aff_neg_t(r) : r;
    }
    DP_INLINE F read_x(u32 s, u32 which, u32 pt) const {
        F r;
        if (pt == DP_NO_PT) f_set_zero(r);
        else r = take<F>(s * CH + which * (CH / 2u));
        return r;
    }
};

// The same interface without a stage (-DDP_G1_PAIR_STAGE=0 / -DDP_G2_PAIR_STAGE=0, bench_msm.py's
// unstaged builds): nothing is copied ahead, each point is read from global memory where it is used.
template <typename F> struct PairDirect {
    const Aff<F>* pts;
    DP_INLINE void commit() const {}
    template <u32 N> DP_INLINE void wait() const {}
    DP_INLINE void issue(u32, const Aff<F>*, PairJob) const {}
    DP_INLINE void issue_x(u32, const Aff<F>*, PairJob) const {}
    DP_INLINE Aff<F> read(u32, u32, u32 pt) const { return pair_load(pts, pt); }
    DP_INLINE F read_x(u32, u32, u32 pt) const {
        F r;
        if (pt == DP_NO_PT) f_set_zero(r);
        else r = pts[pt >> 1].x;
        return r;
    }
};

// Thread t's forward pass over jobs t, t + stride, ... (< n): each denominator enters the running
// product, the product before it parked in sums[j].x. Returns the last job; inv = 1 / the product
// (the product itself, 1, when every job was a copy). The x are staged three jobs ahead in a ring
// of four slots (the same shared memory as the backward pass's double buffer): one product a job
// is too little work to cover a gather from DRAM one job ahead. Descriptors come one job ahead of
// their copies.
template <typename F, typename S> DP_INLINE u32 pair_forward(const PairRound<F>& a, u32 t, u32 stride, u32 n, F& inv,
                                                             const S& st) {
    const PairJob none = {DP_NO_PT, DP_NO_PT};
    auto job = [&](u64 k) { return k < n ? a.jobs[k] : none; };
    PairJob j0 = job(t), j1 = job((u64)t + stride), j2 = job((u64)t + 2u * (u64)stride);
    PairJob j3 = job((u64)t + 3u * (u64)stride);
    st.issue_x(0u, a.pts, j0);
    st.commit();
    if (j1.p != DP_NO_PT) st.issue_x(1u, a.pts, j1);
    st.commit();
    if (j2.p != DP_NO_PT) st.issue_x(2u, a.pts, j2);
    st.commit();
    F acc;
    f_set_one(acc);
    bool any = false;
    u32 j = t, slot = 0u;
    for (;;) {
        if (j3.p != DP_NO_PT) st.issue_x((slot + 3u) & 3u, a.pts, j3);
        st.commit();
        st.template wait<3u>();
        PairJob j4 = job((u64)j + 4u * (u64)stride);
        F px = st.read_x(slot, 0u, j0.p), qx = st.read_x(slot, 1u, j0.q);
        F d;
        if (pair_kind_x(a.pts, j0, px, qx, d) != DP_PAIR_COPY) {
            a.sums[j].x = acc;  // the product before d, read back by the backward pass
            acc = f_mul_each(acc, d);
            any = true;
        }
        if ((u64)j + stride >= n) break;
        j += stride;
        j0 = j1;
        j1 = j2;
        j2 = j3;
        j3 = j4;
        slot = (slot + 1u) & 3u;
    }
    inv = any ? f_inv(acc) : acc;
    return j;
}

// Thread t's backward pass from its last job j down to t: both points of job j - stride are
// staged while job j computes; descriptors two jobs ahead, the parked product one.
template <typename F, typename S> DP_INLINE void pair_backward(const PairRound<F>& a, u32 t, u32 stride, u32 j, F inv,
                                                               const S& st) {
    const PairJob none = {DP_NO_PT, DP_NO_PT};
    PairJob jb = a.jobs[j];
    u32 b = 0u;
    st.issue(b, a.pts, jb);
    st.commit();
    F parked = a.sums[j].x;
    PairJob jb_n = j >= t + stride ? a.jobs[j - stride] : none;
    for (;;) {
        bool more = j >= t + stride;
        u32 jn = j - stride;
        PairJob jb_nn = none;
        F parked_n;
        if (more) {
            st.issue(b ^ 1u, a.pts, jb_n);
            parked_n = a.sums[jn].x;
            if (jn >= t + stride) jb_nn = a.jobs[jn - stride];
        }
        st.commit();  // job jn's copies (none on the last job): the group after job j's
        st.template wait<1u>();
        Aff<F> q;
        if (jb.q == DP_NO_PT) {
            f_set_zero(q.x);
            f_set_zero(q.y);
        } else {
            q = st.read(b, 1u, jb.q);
        }
        pair_back_one(a, jb, j, st.read(b, 0u, jb.p), q, parked, inv);
        if (!more) break;
        jb = jb_n;
        jb_n = jb_nn;
        parked = parked_n;
        j = jn;
        b ^= 1u;
    }
}

// Thread t of `stride` threads: jobs t, t + stride, ... (< n). Neighbouring threads take
// neighbouring jobs, so every load of a round is coalesced but round 1's gather of the bases.
// The forward pass reads only the x (half the bytes); the backward pass (six products a job)
// both points. `st`: the thread's PairStage (the default) or PairDirect.
template <typename F, typename S> DP_INLINE void msm_pairs_body(const PairRound<F>& a, u32 t, u32 launched, const S& st) {
    u32 n = a.cursor_out[a.rows - 1u] + a.counts_out[a.rows - 1u];
    u32 stride = pair_stride(a, n, launched);
    if (t >= stride || t >= n) return;
    F inv;
    u32 j = pair_forward(a, t, stride, n, inv, st);
    pair_backward(a, t, stride, j, inv, st);
}

// plan[0] = the rounds to run: how many of the first `rounds` thresholds min_total[r] the
// sort's entry count reaches (the host knows only a bound; witness-like scalars, mostly 0 and 1,
// leave buckets too thin for rounds to pay).
extern "C" __global__ void msm_pair_plan(const u32* cursor, const u32* counts, u32 rows, const u32* min_total,
                                         u32 rounds, u32* plan) {
    if (blockIdx.x * blockDim.x + threadIdx.x != 0u) return;
    u32 total = cursor[rows - 1u] + counts[rows - 1u];
    u32 r = 0u;
    while (r < rounds && total >= min_total[r]) r++;
    plan[0] = r;
}

// counts_out[row] = ceil(counts_in[row] / 2), when round `round` runs.
extern "C" __global__ void msm_pair_counts(const u32* plan, u32 round, const u32* counts_in, u32* counts_out,
                                           u32 rows) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (round >= plan[0] || r >= rows) return;
    counts_out[r] = (counts_in[r] >> 1) + (counts_in[r] & 1u);
}

// Slice length of the accumulation after rounds ran, from their real entry count (the host
// sized `slices` for the sort's bound, 2^R times as many): whole waves of resident threads at
// about `target` entries each (>= min_len), within the `slices` threads launched.
DP_INLINE u32 pair_slice_len(u32 total, u32 slices, u32 resident, u32 target, u32 min_len) {
    u64 len = wave_share(total, resident, target);
    if (len < min_len) len = min_len;
    if ((total + len - 1u) / len > slices) len = (total + slices - 1u) / slices;
    return (u32)len;
}

// One set of accumulation inputs: the sort's (set 0) or round r's output (set r + 1).
struct PairSet {
    const MsmEntry* entries;
    const void* points;
    const u32* cursor;
    const u32* counts;
};

// Pair kernels held to k blocks of DP_PAIR_BLOCK threads per SM (k = 0: unbounded, the default);
// the experiments of bench_msm.py's pair variants (unbounded, G1's takes 166 registers: 3 blocks).
#ifndef DP_G1_PAIR_MIN_BLOCKS
#define DP_G1_PAIR_MIN_BLOCKS 0
#endif
#ifndef DP_G2_PAIR_MIN_BLOCKS
#define DP_G2_PAIR_MIN_BLOCKS 0
#endif
#if DP_G1_PAIR_MIN_BLOCKS && (defined(__CUDACC__) || defined(__CUDACC_RTC__))
#define DP_G1_PAIR_BOUNDS __launch_bounds__(DP_PAIR_BLOCK, DP_G1_PAIR_MIN_BLOCKS)
#else
#define DP_G1_PAIR_BOUNDS
#endif
#if DP_G2_PAIR_MIN_BLOCKS && (defined(__CUDACC__) || defined(__CUDACC_RTC__))
#define DP_G2_PAIR_BOUNDS __launch_bounds__(DP_PAIR_BLOCK, DP_G2_PAIR_MIN_BLOCKS)
#else
#define DP_G2_PAIR_BOUNDS
#endif

// G1's accumulation after the pair rounds (msm_accumulate_sel_g1, every G1 MSM of 2^22 or more)
// is held to 3 blocks of 128 threads per SM (168 registers, a few spilled): with its products in
// pairs (curve.cuh) it takes 176 unbounded, 2 blocks. On an H200 the bound takes the
// accumulation of G1 2^24 from 7.7-7.8 to 7.3-7.5 ms. msm_accumulate_g1 (smaller MSMs, no pair
// rounds) stays unbounded: held to 3, witness-like 2^20 takes 1.0 against 0.6 ms. DP_G1_ACC_MIN_BLOCKS (msm.cu) bounds both; DP_G1_SEL_MIN_BLOCKS=0 unbounds this one.
#ifndef DP_G1_SEL_MIN_BLOCKS
#define DP_G1_SEL_MIN_BLOCKS 3
#endif
#if DP_G1_ACC_MIN_BLOCKS
#define DP_G1_SEL_BOUNDS DP_G1_ACC_BOUNDS
#elif DP_G1_SEL_MIN_BLOCKS && (defined(__CUDACC__) || defined(__CUDACC_RTC__))
#define DP_G1_SEL_BOUNDS __launch_bounds__(128, DP_G1_SEL_MIN_BLOCKS)
#else
#define DP_G1_SEL_BOUNDS
#endif

// The shared-memory stage of a pair kernel: dynamic shared memory of 4 points a thread (G1 32 KiB,
// G2 64 KiB a block of 128 threads: above the 48 KiB of static shared memory, so the host opts
// in; gpu/msm.py pair_stage_bytes), unless -DDP_G1_PAIR_STAGE=0 / -DDP_G2_PAIR_STAGE=0 (bench_msm.py's
// unstaged builds; the host then passes none). Host builds: one static array of G2's size.
#ifndef DP_G1_PAIR_STAGE
#define DP_G1_PAIR_STAGE 1
#endif
#ifndef DP_G2_PAIR_STAGE
#define DP_G2_PAIR_STAGE 1
#endif
#if defined(__CUDA_ARCH__)
#define DP_STAGE_ARRAY extern __shared__ Chunk16 stage_buf[];
#else
#define DP_STAGE_ARRAY static Chunk16 stage_buf[2u * PairStage<Fq2>::BUF * DP_PAIR_BLOCK];
#endif
#define DP_STAGE_DECL_1(F)                                                                     \
    DP_STAGE_ARRAY                                                                             \
    PairStage<F> st = {stage_buf + threadIdx.x};
#define DP_STAGE_DECL_0(F) PairDirect<F> st = {pts};
#define DP_STAGE_DECL(ON, F) DP_STAGE_DECL_##ON(F)

#define DP_MSM_PAIRS(G, F, ACC_BOUNDS, PAIR_BOUNDS, STAGED)                                          \
    extern "C" __global__ void PAIR_BOUNDS msm_pairs_##G(const u32* plan, u32 round, const PairJob* jobs, \
                                             const Aff<F>* pts, const u32* cursor_out,                 \
                                             const u32* counts_out, u32 rows, u32 resident, u32 kmin,  \
                                             u32 kmax, Aff<F>* sums) {                                 \
        if (round >= plan[0]) return;                                                                  \
        DP_STAGE_DECL(STAGED, F)                                                                       \
        PairRound<F> a = {jobs, pts, cursor_out, counts_out, rows, resident, kmin, kmax, sums};      \
        msm_pairs_body(a, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, st);        \
    }                                                                                                  \
    extern "C" __global__ void ACC_BOUNDS msm_accumulate_sel_##G(                                     \
        const u32* plan, const PairSet* sets, u32 rows, u32 len, u32 slices, u32 resident, u32 target,    \
        u32 min_len, Xyzz<F>* buckets, u32* spill_rows, Xyzz<F>* spill_pts) {                            \
        PairSet s = sets[plan[0]];                                                                     \
        if (plan[0] != 0u) len = pair_slice_len(s.cursor[rows - 1u] + s.counts[rows - 1u], slices,     \
                                                resident, target, min_len);                            \
        msm_accumulate_impl<F>(s.entries, static_cast<const Aff<F>*>(s.points), s.cursor, s.counts,    \
                               rows, len, slices, buckets, spill_rows, spill_pts);                     \
    }

DP_MSM_PAIRS(g1, Fq, DP_G1_SEL_BOUNDS, DP_G1_PAIR_BOUNDS, DP_G1_PAIR_STAGE)
DP_MSM_PAIRS(g2, Fq2, DP_G2_ACC_BOUNDS, DP_G2_PAIR_BOUNDS, DP_G2_PAIR_STAGE)

#undef DP_MSM_PAIRS
#undef DP_STAGE_ARRAY
#undef DP_STAGE_DECL
#undef DP_STAGE_DECL_0
#undef DP_STAGE_DECL_1

#endif  // DP_MSM_AFFINE_CU
