// The descan measurement's pass (python/livessb/preprocess/corrections.py) over counts
// resident on the GPU with no bad pixel to repair: per b×b block of scan positions, each
// frame's total and the disk centre of the block-summed window (the centroid of the
// 25–75 % ramp of the block's disk level), reading the counts once in their own dtype,
// no float copy, no temporaries. One block of DT threads per scan block. Integer counts
// sum exactly in float64, so the totals and the ramp weights equal the host's bit for
// bit; only the centroid sums' order differs. Fixed-order reductions: deterministic.
#define DT 256
template <int N>
__device__ __forceinline__ void block_reduce(double (&s)[N], double (*part)[3]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        for (int o = 16; o > 0; o >>= 1) s[j] += __shfl_down_sync(0xffffffffu, s[j], o);
        if (lane == 0) part[warp][j] = s[j];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int j = 0; j < N; ++j) {
            double t = 0.0;
            for (int w = 0; w < DT / 32; ++w) t += part[w][j];
            s[j] = t;  // thread 0 holds the block's sums
        }
    }
    __syncthreads();  // part is free again
}

template <typename T>
__global__ void __launch_bounds__(DT) descan_moments(
    const T* __restrict__ counts, int Rr, int Rc, int kr, int kc, int b, int r0, int c0,
    int h, int w, const unsigned char* __restrict__ window, double level_per_total,
    double ramp_lo, double ramp_span, double* __restrict__ totals,
    double* __restrict__ centres) {
    __shared__ double part[DT / 32][3];
    __shared__ double block_total;
    const int nbc = (Rc + b - 1) / b;
    const int br = blockIdx.x / nbc, bc = blockIdx.x - (blockIdx.x / nbc) * nbc;
    const int fr0 = br * b, fc0 = bc * b;
    const int fr1 = min(fr0 + b, Rr), fc1 = min(fc0 + b, Rc);
    const size_t npix = (size_t)kr * kc;
    double acc = 0.0;  // thread 0: the block's total, frame by frame in scan order
    for (int fr = fr0; fr < fr1; ++fr) {
        for (int fc = fc0; fc < fc1; ++fc) {
            const T* f = counts + ((size_t)fr * Rc + fc) * npix;
            double s[1] = {0.0};
            for (size_t i = threadIdx.x; i < npix; i += DT) s[0] += (double)f[i];
            block_reduce<1>(s, part);
            if (threadIdx.x == 0) {
                totals[(size_t)fr * Rc + fc] = s[0];
                acc += s[0];
            }
        }
    }
    if (h == 0) return;  // totals only (dose normalisation without descan)
    if (threadIdx.x == 0) block_total = acc;
    __syncthreads();
    const double level = level_per_total * block_total;
    double m[3] = {0.0, 0.0, 0.0};  // Σ t, Σ t·row, Σ t·col
    for (int i = threadIdx.x; i < h * w; i += DT) {
        if (!window[i]) continue;
        const int ir = i / w, ic = i - (i / w) * w;
        const size_t off = (size_t)(r0 + ir) * kc + (c0 + ic);
        double v = 0.0;
        for (int fr = fr0; fr < fr1; ++fr)
            for (int fc = fc0; fc < fc1; ++fc)
                v += (double)counts[((size_t)fr * Rc + fc) * npix + off];
        double t = (v / level - ramp_lo) / ramp_span;  // the host's operations, in order
        t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);  // NaN stays NaN, as np.clip keeps it
        m[0] += t;
        m[1] += t * (double)(r0 + ir);
        m[2] += t * (double)(c0 + ic);
    }
    block_reduce<3>(m, part);
    if (threadIdx.x == 0) {
        const bool ok = m[0] > 0.0;  // false for NaN: nothing reached the ramp
        const double none = __longlong_as_double(0x7ff8000000000000LL);  // NaN
        centres[2 * (size_t)blockIdx.x] = ok ? m[1] / m[0] : none;
        centres[2 * (size_t)blockIdx.x + 1] = ok ? m[2] / m[0] : none;
    }
}
#undef DT
