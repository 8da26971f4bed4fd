// Effective scan frequencies' sums (physics/frequencies.py, effective_sums): per half-plane
// bin m (one thread), over the BF pixels, |Gw|² and conj(Gw)·Gt of the stencils along each
// scan axis, Gw = G[ν] − (G[ν−1] + G[ν+1])/2 and Gt = (G[ν−1] − G[ν+1])/2i: rows periodic,
// the columns past the half plane's edges from Hermitian symmetry (G[r, −c] =
// conj G[−r, c]); the DC bin (the mean pattern) counts as zero. One pass over the float32
// spectra (neighbours come from the cache), float64 sums in pixel order: deterministic.
// Grid (ceil(M/NT), nsplit): split z sums the BF pixels [z·per, (z+1)·per) (small windows
// have few frequency blocks: the splits fill the device). out: (nsplit, 6, M) = |Gw|², Re,
// Im of the cross for rows, then for columns; the caller adds the splits in order.
__device__ __forceinline__ double2 eff_at(const float2* __restrict__ Gb, int idx, bool flip) {
    if (idx == 0) return make_double2(0.0, 0.0);
    const float2 v = Gb[idx];
    return make_double2((double)v.x, flip ? -(double)v.y : (double)v.y);
}

__device__ __forceinline__ void eff_add(double* acc, double2 c, double2 lo, double2 hi) {
    const double wr = c.x - 0.5 * (lo.x + hi.x), wi = c.y - 0.5 * (lo.y + hi.y);
    const double tr = 0.5 * (lo.y - hi.y), ti = -0.5 * (lo.x - hi.x);  // (lo − hi)·(−i/2)
    acc[0] += wr * wr + wi * wi;
    acc[1] += wr * tr + wi * ti;
    acc[2] += wr * ti - wi * tr;
}

__global__ void __launch_bounds__(NT) effective_sums(
    const float2* __restrict__ G, int B, int Nr, int Nc, int per, double* __restrict__ out) {
    const int H = Nc / 2 + 1, M = Nr * H;
    const int m = blockIdx.x * NT + threadIdx.x;
    if (m >= M) return;
    const int b0 = blockIdx.y * per, b1 = min(B, b0 + per);
    out += (size_t)blockIdx.y * 6 * M;
    const int ir = m / H, ic = m % H;
    const int mirror = (Nr - ir) % Nr;  // the row of −ν_r
    const int up = ((ir + Nr - 1) % Nr) * H + ic, down = ((ir + 1) % Nr) * H + ic;
    const bool lconj = ic == 0, rconj = ic == H - 1;
    const int left = lconj ? mirror * H + 1 : m - 1;  // column −1 ≡ conj(column 1 at −r)
    const int right = rconj ? mirror * H + (Nc - H) : m + 1;  // column H ≡ −(Nc − H)
    double row[3] = {0.0, 0.0, 0.0}, col[3] = {0.0, 0.0, 0.0};
#pragma unroll 4
    for (int b = b0; b < b1; ++b) {  // (unrolled: four pixels' loads in flight)
        const float2* Gb = G + (size_t)b * M;
        const double2 c = eff_at(Gb, m, false);
        eff_add(row, c, eff_at(Gb, up, false), eff_at(Gb, down, false));
        eff_add(col, c, eff_at(Gb, left, lconj), eff_at(Gb, right, rconj));
    }
    for (int q = 0; q < 3; ++q) {
        out[(size_t)q * M + m] = row[q];
        out[(size_t)(3 + q) * M + m] = col[q];
    }
}
