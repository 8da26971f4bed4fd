// The virtual images' pass (python/livessb/virtual.py): per pattern, the counts inside
// the BF disk and outside it and their first moments about the disk centre, float64.
// One block of VT threads per pattern: each warp takes detector rows, its lanes the
// columns of a row (coalesced reads, no division per pixel). The inside test is the
// host's, unfused (dr*dr + dc*dc <= r2 in float64, as NumPy computes it), so both masks
// agree pixel for pixel and integer counts sum exactly on either side.
#define VT 256
template <typename T>
__global__ void __launch_bounds__(VT) detector_sums(
    const T* __restrict__ counts, long long P, int kr, int kc, double cr, double cc,
    double r2, double* __restrict__ out) {
    const long long p = blockIdx.x;
    if (p >= P) return;  // the whole block: the reduction below syncs
    const T* f = counts + (size_t)p * kr * kc;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double s[4] = {0.0, 0.0, 0.0, 0.0};  // inside, outside, Σ v·dr, Σ v·dc
    for (int r = warp; r < kr; r += VT / 32) {
        const double dr = (double)r - cr;
        const double dr2 = __dmul_rn(dr, dr);
        double in = 0.0, outside = 0.0;
        for (int c = lane; c < kc; c += 32) {
            const double v = (double)f[(size_t)r * kc + c];
            const double dc = (double)c - cc;
            if (__dadd_rn(dr2, __dmul_rn(dc, dc)) <= r2) in += v; else outside += v;
            s[3] += v * dc;
        }
        s[0] += in;
        s[1] += outside;
        s[2] += (in + outside) * dr;
    }
    __shared__ double part[VT / 32][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        for (int o = 16; o > 0; o >>= 1) s[j] += __shfl_down_sync(0xffffffffu, s[j], o);
        if (lane == 0) part[warp][j] = s[j];
    }
    __syncthreads();
    if (threadIdx.x < 4) {
        double t = 0.0;
        for (int w = 0; w < VT / 32; ++w) t += part[w][threadIdx.x];
        out[4 * p + threadIdx.x] = t;
    }
}
#undef VT
