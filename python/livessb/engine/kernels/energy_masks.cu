// Sideband energy per rotation, and the support masks of reconstruction grids.
// ---------------------------------------------------------------------------------
// Sideband energy Σ_ν w Σ_b m_b |G_b|^2: partial (nsplit, nblk).
__global__ void __launch_bounds__(NT) energy_kernel(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float4* __restrict__ px, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    const double* __restrict__ g_alias, const uint4* __restrict__ g_alias_tab,
    double* __restrict__ partial, double* __restrict__ pairs, int bsplit) {
    // Grid (nblk, nsplit): split z sums pixels [z·bsplit, (z+1)·bsplit) into partial
    // (nsplit, nblk) (small windows have too few frequency blocks to fill the device).
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam), g_alias,
                               g_alias_tab, B);
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

// alias_tab (alias_pixels="excluded": the grid's exclusion table, alias_exclusion; else
// nullptr): a pixel that no active frequency of the warp may take is skipped too.
__global__ void __launch_bounds__(NT) support_mask(
    int B, int M, int H, int tile_r, const double* __restrict__ nu_r,
    const double* __restrict__ nu_c,
    const float4* __restrict__ px, double ka2, float ka, int lobe,
    const uint4* __restrict__ alias_tab, uint4* __restrict__ masks) {
    const unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int s = blockIdx.x * NT + threadIdx.x;
    const size_t row = (size_t)(s >> 5);  // the consumer's warp
    double nr, nc;
    const int m = slot_bin(s, M / H, H, tile_r);
    const bool active = grid_nu(m, M, nu_r, nu_c, ka2, nr, nc);
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
        // The pixels some active lane may take (an inactive lane takes none): the OR over
        // the warp of their rows' clear bits, bit lane of word q for pixel
        // tile·BT + 32q + lane below.
        uint4 kept = make_uint4(~0u, ~0u, ~0u, ~0u);
        if (alias_tab != nullptr) {
            uint4 own = make_uint4(0u, 0u, 0u, 0u);
            if (active) {
                const uint4 ex = alias_tab[(size_t)m * ntiles + tile];
                own = make_uint4(~ex.x, ~ex.y, ~ex.z, ~ex.w);
            }
            for (int o = 16; o > 0; o >>= 1) {
                own.x |= __shfl_xor_sync(FULL, own.x, o);
                own.y |= __shfl_xor_sync(FULL, own.y, o);
                own.z |= __shfl_xor_sync(FULL, own.z, o);
                own.w |= __shfl_xor_sync(FULL, own.w, o);
            }
            kept = own;
        }
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
                const unsigned kw = q == 0 ? kept.x : q == 1 ? kept.y : q == 2 ? kept.z : kept.w;
                maybe = maybe && ((kw >> lane) & 1u);
            }
            words[q] = __ballot_sync(FULL, maybe);
        }
        if (lane == 0)
            masks[row * ntiles + tile] = make_uint4(words[0], words[1], words[2], words[3]);
    }
}

// ---------------------------------------------------------------------------------
// The exclusion table of alias_pixels="excluded" (ALIAS_PIXELS; in the default module it
// writes zeros): bit i of word w of row m (uint32 out[m · 4·ntiles + w]) is set where the
// pair (pixel b = 32w + i, bin m) is left out of every walk: it shares the single-sideband
// support of an alias of bin m (alias_shared with the aliases within reach: the test the
// walks made pair by pair), or it is outside the trotter by a margin: outside both discs
// or inside both by 1e-3 kα, far wider than rounding (pair_geo rejects those pairs too).
// So a clear bit marks a pair the walk may take, and the support masks, OR-ing the
// clear bits over a warp's bins, list only the pixels some lane takes. Every bin m < M
// (the energy walks them all). Thread per word (consecutive threads, consecutive words).
// Per window and rotation (pixel rows k64, px).
__global__ void __launch_bounds__(NT) alias_exclusion(
    int B, int M, const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float4* __restrict__ px, double g_ka2, float g_ka,
    float g_inv_w, float g_twopilam, const double* __restrict__ g_alias,
    unsigned* __restrict__ out) {
    const int words = 4 * ((B + BT - 1) / BT);
    const long long i = (long long)blockIdx.x * NT + threadIdx.x;
    if (i >= (long long)M * words) return;
    unsigned dropped = 0u;
#if ALIAS_PIXELS
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam), g_alias);
    const int m = (int)(i / words), w = (int)(i % words);
    const double nr = nu_r[m], nc = nu_c[m];
    const unsigned reach = (geo.a_mr | geo.a_mc) ? alias_reach(nr, nc, geo) : 0u;
    const float fnr = (float)nr, fnc = (float)nc;
    const float out2 = (g_ka * 1.001f) * (g_ka * 1.001f);
    const float in2 = (g_ka * 0.999f) * (g_ka * 0.999f);
    dropped = ~0u;
    for (int j = 0; j < 32 && 32 * w + j < B; ++j) {
        const int b = 32 * w + j;
        const float4 p = px[b];
        const float dr = p.x - fnr, dc = p.y - fnc, er = p.x + fnr, ec = p.y + fnc;
        const float dm = dr * dr + dc * dc, dp = er * er + ec * ec;
        const bool off = (dm > out2 && dp > out2) || (dm < in2 && dp < in2);
        if (!off && !(reach && alias_shared(p.x, p.y, k64 + 2 * b, nr, nc, geo.ka2, geo.a_sr,
                                            geo.a_sc, geo.a_mr, geo.a_mc, reach)))
            dropped &= ~(1u << j);
    }
#endif
    out[i] = dropped;
}
