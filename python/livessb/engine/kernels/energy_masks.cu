// Sideband energy per rotation, and the support masks of reconstruction grids.
// ---------------------------------------------------------------------------------
// Sideband energy Σ_ν w Σ_b m_b |G_b|^2: partial (nsplit, nblk).
__global__ void __launch_bounds__(NT) energy_kernel(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float4* __restrict__ px, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    const double* __restrict__ g_alias,
    double* __restrict__ partial, double* __restrict__ pairs, int bsplit) {
    // Grid (nblk, nsplit): split z sums pixels [z·bsplit, (z+1)·bsplit) into partial
    // (nsplit, nblk) (small windows have too few frequency blocks to fill the device).
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam), g_alias);
    __shared__ double red[2 * NT];
    const int BL = blockIdx.y * bsplit, BH = min(B, BL + bsplit);
    const size_t out_at = (size_t)blockIdx.y * gridDim.x + blockIdx.x;
    const int Hc = Nc / 2 + 1;
    const int m = slot_bin(blockIdx.x * NT + threadIdx.x, Nr, Hc, 1);  // the θ grid's blocks
    double nr = 0.0, nc = 0.0;
    bool active = m < M;
    if (active) { nr = nu_r[m]; nc = nu_c[m]; }  // per-bin tables, as grid_nu reads them
    double e = 0.0, cnt = 0.0;
    float fe = 0.f;
    walk_pairs<false, false>(G, M, m, active, BL, BH, k64, px, nullptr, nr, nc, geo, NoPixel(),
        [&](float, float, float2 g, float, float, bool) {
            fe = __fadd_rn(fe, energy_term(g));
            cnt += 1.0;
        },
        [&]() { e += fe; fe = 0.f; });
    const double w = active ? half_weight(m % Hc, Nc) : 0.0;
    red[threadIdx.x] = e * w;
    red[NT + threadIdx.x] = cnt;
    block_reduce(red, 2);
    if (threadIdx.x == 0) { partial[out_at] = red[0]; pairs[out_at] = red[NT]; }
}

// ---------------------------------------------------------------------------------
// Support masks for a masked walk over a frequency grid (M = rows·H bins; slot s ↔ bin
// m = slot_bin(s, rows, H, tile_r) ↔ ν = (nu_r[m], nu_c[m]), per-bin tables and warp
// tiles as in the consumer):
// bit t of masks[(s/32)·ntiles + tile] is set unless pixel tile·BT + t is provably outside
// the trotter of every active frequency of warp s/32 (active: |ν| ≤ 2kα, the consumer's
// rule): either outside both disks |k ∓ ν| ≤ kα for all of them, or inside both. Tested
// against the bounding box of the warp's frequencies with a margin of 1e-3 kα, far
// wider than rounding, so the exact per-pair test still decides every set bit.
// lobe ≥ 0: the mask of one trotter lobe (vp_derivs' threads sum one lobe each): a pixel
// is skipped when it is outside the disc |k ∓ ν| ≤ kα of its lobe (lobe 0: k-ν, 1: k+ν)
// for all of them, or inside the other disc for all of them.
// One warp per mask row; lane j tests pixels j, j + 32, ... of each tile. Per rotation.
__device__ __forceinline__ float box_near2(float x, float y, float4 bx) {  // (r0, r1, c0, c1)
    const float dx = fmaxf(fmaxf(bx.x - x, x - bx.y), 0.f);
    const float dy = fmaxf(fmaxf(bx.z - y, y - bx.w), 0.f);
    return dx * dx + dy * dy;
}

__device__ __forceinline__ float box_far2(float x, float y, float4 bx) {
    const float dx = fmaxf(fabsf(x - bx.x), fabsf(x - bx.y));
    const float dy = fmaxf(fabsf(y - bx.z), fabsf(y - bx.w));
    return dx * dx + dy * dy;
}

__global__ void __launch_bounds__(NT) support_mask(
    int B, int M, int H, int tile_r, const double* __restrict__ nu_r,
    const double* __restrict__ nu_c,
    const float4* __restrict__ px, double ka2, float ka, int lobe, uint4* __restrict__ masks) {
    const unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int s = blockIdx.x * NT + threadIdx.x;
    const size_t row = (size_t)(s >> 5);  // the consumer's warp
    double nr, nc;
    const bool active = grid_nu(slot_bin(s, M / H, H, tile_r), M, nu_r, nu_c, ka2, nr, nc);
    const float BIG = 3.0e38f;  // empty box (NVRTC has no INFINITY)
    float4 bx = make_float4(BIG, -BIG, BIG, -BIG);
    if (active) bx = make_float4((float)nr, (float)nr, (float)nc, (float)nc);
    for (int o = 16; o > 0; o >>= 1) {
        bx.x = fminf(bx.x, __shfl_xor_sync(FULL, bx.x, o));
        bx.y = fmaxf(bx.y, __shfl_xor_sync(FULL, bx.y, o));
        bx.z = fminf(bx.z, __shfl_xor_sync(FULL, bx.z, o));
        bx.w = fmaxf(bx.w, __shfl_xor_sync(FULL, bx.w, o));
    }
    const bool any = __any_sync(FULL, active);
    const float out2 = (ka * 1.001f) * (ka * 1.001f), in2 = (ka * 0.999f) * (ka * 0.999f);
    const int ntiles = (B + BT - 1) / BT;
    for (int tile = 0; tile < ntiles; ++tile) {
        unsigned words[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int b = tile * BT + q * 32 + lane;
            bool maybe = false;
            if (any && b < B) {
                const float4 p = px[b];
                // out_m: outside |k-ν| ≤ kα for every frequency; in_p: inside |k+ν| ≤ kα ...
                const bool out_m = box_near2(p.x, p.y, bx) > out2;
                const bool out_p = box_near2(-p.x, -p.y, bx) > out2;
                const bool in_m = box_far2(p.x, p.y, bx) < in2;
                const bool in_p = box_far2(-p.x, -p.y, bx) < in2;
                if (lobe == 0) maybe = !(out_m || in_p);
                else if (lobe == 1) maybe = !(out_p || in_m);
                else maybe = !((out_m && out_p) || (in_m && in_p));
            }
            words[q] = __ballot_sync(FULL, maybe);
        }
        if (lane == 0)
            masks[row * ntiles + tile] = make_uint4(words[0], words[1], words[2], words[3]);
    }
}
