// Frequency grid, block reductions, trotter test and the pixel walk of the ν-parallel kernels.
__device__ __forceinline__ double loss_term(double Nr, double Ni, double D, double w) {
    return D > 1e-12 ? (Nr * Nr + Ni * Ni) / D * w : 0.0;
}

__device__ __forceinline__ double half_weight(int ic, int Nc) {
    if (ic == 0) return 1.0;
    if ((Nc % 2 == 0) && ic == Nc / 2) return 1.0;
    return 2.0;
}

// Half-plane bin m of thread slot s (blockIdx · NT + threadIdx) on a (rows, H) grid
// (m = row·H + col): a bijection of [0, rows·H), so launches keep ceil(M / NT) blocks.
// A warp's 32 slots take a tile of tr rows × 32/tr columns. Where a pair's arithmetic
// dominates (several candidates per thread: vp_eval<KC ≥ 2>, vp_derivs, a map's
// reconstructions) kernels take TILE_R × TILE_C tiles (each row 8 adjacent bins: 64-byte
// loads) rather than 32 bins along a row, a long strip of ν: in a compact tile the lanes
// of a warp fall in the same trotter lobe of a pixel far more often (less divergence),
// and a warp's support-mask box is small (fewer masked visits). The columns right of the
// last whole tile, then the rows below it, take the remaining slots as runs along a
// column / a row. Where a pair is light (one candidate's direct form, the energy and the
// θ grid that must match it, one reconstruction) the loads are the cost: tr = 1 is the
// identity, m = s, whose warps read 256 aligned bytes of G per pixel (8 sectors; M is a
// multiple of 32), where a row's 8-bin segments or 32 bins from a row start, the rows of
// G not being 32-byte aligned, take 9-11 (H200 at dd4c94a, strips from row starts: one
// candidate's evaluation 7.3 -> 8.5 ms). Slots past the grid give m ≥ rows·H (inactive).
#ifndef TILE_R  // (-D overrides: benchmarks/kernel_variants.py times other shapes)
#define TILE_R 4
#endif
#ifndef TILE_C
#define TILE_C 8
#endif
static_assert(TILE_R * TILE_C == 32, "a tile is one warp");
__device__ __forceinline__ int slot_bin(int s, int rows, int H, int tr = TILE_R) {
    if (tr == 1) return s;
    const int tc = 32 / tr;
    const int Hm = H - H % tc, Rm = rows - rows % tr;
    const int tiled = Rm * Hm;  // a multiple of 32
    if (s < tiled) {
        const int t = s >> 5, l = s & 31, per_band = Hm / tc;
        return ((t / per_band) * tr + l / tc) * H + (t % per_band) * tc + l % tc;
    }
    s -= tiled;
    const int right = rows * (H - Hm);  // columns [Hm, H), column by column
    if (s < right) return (s % rows) * H + Hm + s / rows;
    s -= right;
    if (s < (rows - Rm) * Hm) return (Rm + s / Hm) * H + s % Hm;  // rows [Rm, rows)
    return rows * H + s;
}

// slot_bin of every slot [0, n) into out (tests compare it with its Python mirror).
__global__ void __launch_bounds__(NT) slot_bins(int n, int rows, int H, int tile_r,
                                                int* __restrict__ out) {
    const int s = blockIdx.x * NT + threadIdx.x;
    if (s < n) out[s] = slot_bin(s, rows, H, tile_r);
}

// Frequency of thread m on a (rows, H) grid, read from per-bin tables (M each, row-major:
// the grid's own frequencies or each bin's effective one, physics/frequencies.py); false
// for m ≥ M and beyond |ν| = 2kα, where no pixel is in the trotter (the ν-parallel
// kernels skip those threads).
__device__ __forceinline__ bool grid_nu(int m, int M, const double* __restrict__ nu_r,
                                        const double* __restrict__ nu_c, double ka2,
                                        double& nr, double& nc) {
    nr = 0.0;
    nc = 0.0;
    if (m >= M) return false;
    nr = nu_r[m];
    nc = nu_c[m];
    return nr * nr + nc * nc <= 4.0 * ka2 * (1.0 + 1e-6);
}

// Fixed-order tree sum over the block of `n` doubles per thread stored in red[n][NT].
__device__ __forceinline__ void block_reduce(double* red, int n) {
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            for (int j = 0; j < n; ++j) red[j * NT + threadIdx.x] += red[j * NT + threadIdx.x + s];
        }
        __syncthreads();
    }
}

// Whether pixel k lies in the hard discs at +c and -c (|k ∓ c|² ≤ kα²), in float64 with the
// NumPy formula's rounded operations in its order (no contraction): the edge cases of the
// float-first tests of pair_geo and alias_shared.
__device__ __forceinline__ void discs_f64(const double* kd, double cr, double cc, double ka2,
                                          bool& in_minus, bool& in_plus) {
    const double kr = kd[0], kc = kd[1];
    const double dr = __dsub_rn(kr, cr), dc = __dsub_rn(kc, cc);
    const double dm = __dadd_rn(__dmul_rn(dr, dr), __dmul_rn(dc, dc));
    const double er = __dadd_rn(kr, cr), ec = __dadd_rn(kc, cc);
    const double dp = __dadd_rn(__dmul_rn(er, er), __dmul_rn(ec, ec));
    in_minus = dm <= ka2;
    in_plus = dp <= ka2;
}

#if ALIAS_PIXELS
// Whether pixel k lies in the single-sideband support of an alias ν + m/step of ν (m ≠ 0)
// within reach (bits, alias_reach): physics.aliases.in_alias_support. As pair_geo, float
// first: its squared distances err by ~1e-6 k_alpha² (every value within a few k_alpha of
// the origin), so only within 1e-4 k_alpha² of an edge does the float64 test decide, with
// the Numba kernel's operations in its order (rounded ones: no contraction): both engines
// keep the same pairs. Called by alias_exclusion only, once per (bin, pixel) and rotation:
// the walks read its table (a call per pair in the hot loop cost twice the default's time).
__device__ __noinline__ bool alias_shared(float fkr, float fkc, const double* kd, double nr,
                                          double nc, double ka2, double sr, double sc,
                                          int m_r, int m_c, unsigned bits) {
    const float fka2 = (float)ka2, tol = 1e-4f * fka2;
    const float fnr = (float)nr, fnc = (float)nc, fsr = (float)sr, fsc = (float)sc;
    int i = 0;
    for (int mr = -m_r; mr <= m_r; ++mr) {
        for (int mc = -m_c; mc <= m_c; ++mc) {
            if (mr == 0 && mc == 0) continue;
            const bool reach = (bits >> min(i, 31)) & 1u;
            ++i;
            if (!reach) continue;
            const float ar = fnr + (float)mr * fsr, ac = fnc + (float)mc * fsc;
            const float qr = fkr - ar, qc = fkc - ac, pr = fkr + ar, pc = fkc + ac;
            const float dm = qr * qr + qc * qc, dp = pr * pr + pc * pc;
            bool in_minus = dm <= fka2, in_plus = dp <= fka2;
            if ((fabsf(dm - fka2) < tol) | (fabsf(dp - fka2) < tol)) {
                const double dar = __dadd_rn(nr, __dmul_rn((double)mr, sr));
                const double dac = __dadd_rn(nc, __dmul_rn((double)mc, sc));
                discs_f64(kd, dar, dac, ka2, in_minus, in_plus);
            }
            if (in_minus != in_plus) return true;
        }
    }
    return false;
}
#endif

// Whether pixel t of a tile keeps its pair: in the alias module unless bit t of the tile's
// row of the exclusion table (word t / 32, read once per tile) is set; always elsewhere.
__device__ __forceinline__ bool alias_kept(uint4 ex, int t) {
#if ALIAS_PIXELS
    const int q = t >> 5;
    const unsigned w = q == 0 ? ex.x : q == 1 ? ex.y : q == 2 ? ex.z : ex.w;
    return !((w >> (t & 31)) & 1u);
#else
    return true;
#endif
}

// Mask, amplitudes and trotter lobe of pair (b, ν). Returns false outside the trotter;
// minus: the hard disc at +ν holds k (|k-ν|² ≤ kα², the P(k-ν)P*(k) lobe), else the one
// at -ν (trotter_support's own test, so the lobes are the CPU engine's).
__device__ __forceinline__ bool pair_geo(float fkr, float fkc, float fnr, float fnc,
                                         const double* kd, double nr, double nc, float akb,
                                         const Geo& g, float& am, float& ap, bool& minus) {
    // float first; the float64 NumPy formula decides only within 1e-4 of an edge.
    const float fr = fkr - fnr, fc = fkc - fnc, pr = fkr + fnr, pc = fkc + fnc;
    float dm = fr * fr + fc * fc, dp = pr * pr + pc * pc;
    const float ka2 = g.ka * g.ka, tol = 1e-4f * ka2;
    bool inm = dm <= ka2, inp = dp <= ka2;
    if ((fabsf(dm - ka2) < tol) | (fabsf(dp - ka2) < tol)) {
        discs_f64(kd, nr, nc, g.ka2, inm, inp);
    }
    if (inm == inp) return false;
    minus = inm;
    // One disc holds k: away from the soft edges its aperture is exactly 1 and the
    // other's exactly 0 (make_geo); near either edge (which includes every pair the
    // float64 test decided) both profiles, with their square roots.
    am = inm ? akb : 0.0f;
    ap = inp ? akb : 0.0f;
    if ((fminf(dm, dp) > g.in2) | (fmaxf(dm, dp) < g.out2)) {  // (one branch, no short circuit)
        am = __fmul_rn(aperture_f(dm, g), akb);
        ap = __fmul_rn(aperture_f(dp, g), akb);
    }
    return true;
}

// float4 element t of a shared array at shared-window address base (see walk_pairs).
__device__ __forceinline__ float4 ld_shared(unsigned base, int t) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(base + 16u * t));
    return v;
}

__device__ __forceinline__ void st_shared(unsigned base, int t, float4 v) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "r"(base + 16u * t), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

__device__ __forceinline__ int ld_shared_u8(unsigned base, int i) {
    unsigned short v;
    asm volatile("ld.shared.u8 %0, [%1];" : "=h"(v) : "r"(base + (unsigned)i));
    return v;
}

// This warp's list of the set bits of a 128-bit tile mask (word q, bit i = pixel 32q + i)
// in index order, written to the byte array at shared-window address base; returns the
// count. Lane l places the bits [4l, 4l + 4) after the popcount of the bits below them.
__device__ __forceinline__ int mask_to_list(uint4 mk, int lane, unsigned base) {
    const int q = lane >> 3, sh = (lane & 7) * 4;
    const unsigned wq = q == 0 ? mk.x : q == 1 ? mk.y : q == 2 ? mk.z : mk.w;
    int at = __popc(wq & ((1u << sh) - 1u)) + (q > 0 ? __popc(mk.x) : 0)
             + (q > 1 ? __popc(mk.y) : 0) + (q > 2 ? __popc(mk.z) : 0);
    for (unsigned nib = (wq >> sh) & 0xFu; nib; nib &= nib - 1u, ++at) {
        const unsigned short t = (unsigned short)(4 * lane + __ffs(nib) - 1);
        asm volatile("st.shared.u8 [%0], %1;" :: "r"(base + (unsigned)at), "h"(t) : "memory");
    }
    return __popc(mk.x) + __popc(mk.y) + __popc(mk.z) + __popc(mk.w);
}

// The pixel walk shared by the ν-parallel kernels: BF pixels [BL, BH) in tiles of BT
// (BL a multiple of BT); for an active thread, pair(kr, kc, g, am, ap, minus) for every trotter
// pair of its frequency (spectra G[b*M + src]; pixel geometry px[b] = (k_r, k_c, aperture,
// anchor flag) as float, staged in shared memory per tile), then tile_end() after each
// tile (where the float partials are flushed to float64). Spectra are prefetched two pixels ahead to
// hide the load latency behind the arithmetic of the current pixel.
// ALIAS_PIXELS: a pair whose bit is set in the exclusion table (geo.a_tab, row src per
// tile) is left out before its trotter test.
// MASKED: wmask[tile] (this warp's row of a support mask, see support_mask) lists the
// tile's pixels that may be in the trotter of some lane; only those are visited, in index
// order, so the sums are those of the full walk. Pays where most pixels are outside
// every lane's trotter (reconstruction grids); dense walks run faster unmasked.
// Every lane of a warp must call it. A warp walks when any of its lanes is active; its
// inactive lanes load nothing and are in no trotter. Each warp stages the tile's pixel
// rows in its own shared copy (warp syncs only: warps whose trotters differ do not wait
// for each other at every tile).
// WARP (unmasked walks only): pixel(p, in) runs for every pixel after its trotter test,
// so it may vote over the warp (vp_eval's recurrences step there); the other kernels
// pass NoPixel.
template <bool MASKED, bool WARP, typename Pixel, typename Pair, typename TileEnd>
__device__ __forceinline__ void walk_pairs(
    const float2* __restrict__ G, int M, int src, bool active, int BL, int BH,
    const double* __restrict__ k64, const float4* __restrict__ px,
    const uint4* __restrict__ wmask, double nr, double nc, const Geo& geo, Pixel&& pixel,
    Pair&& pair, TileEnd&& tile_end) {
    static_assert(!(MASKED && WARP), "a masked walk skips pixels: no per-pixel hook");
    __shared__ float4 s_px_all[NT / 32][BT];
    __shared__ unsigned char s_list_all[MASKED ? NT / 32 : 1][BT];  // masked walks' lists
    // Shared-window address of this warp's copy, kept in a register: otherwise it is
    // recomputed from the CTA id and lane at every pixel (8 instructions).
    unsigned s_px = (unsigned)__cvta_generic_to_shared(s_px_all[threadIdx.x >> 5]);
    asm volatile("" : "+r"(s_px));
    unsigned s_list = 0;
    if (MASKED) {
        s_list = (unsigned)__cvta_generic_to_shared(s_list_all[threadIdx.x >> 5]);
        asm volatile("" : "+r"(s_list));
    }
    const int lane = threadIdx.x & 31;
    const float fnr = (float)nr, fnc = (float)nc;
    if (!__any_sync(0xffffffffu, active)) return;  // warp-uniform
    const float2 zero = make_float2(0.f, 0.f);
    for (int b0 = BL; b0 < BH; b0 += BT) {
        const int nb = min(BT, BH - b0);
        uint4 ex = make_uint4(0u, 0u, 0u, 0u);  // (the default module: unused)
#if ALIAS_PIXELS  // this frequency's row of the tile: the pixels an alias shares (src: its bin)
        if (active && geo.a_tab != nullptr)
            ex = __ldg(geo.a_tab + (size_t)src * geo.a_tiles + b0 / BT);
#endif
        __syncwarp();
        for (int t = lane; t < nb; t += 32) st_shared(s_px, t, px[b0 + t]);
        __syncwarp();
        if (MASKED) {  // the tile's listed pixels, spectra prefetched two ahead
            const float2* gt = G + (size_t)b0 * M + src;
            asm volatile("" : "+l"(gt));  // kept in registers, not re-derived per pixel
            const int n = mask_to_list(wmask[b0 / BT], lane, s_list);
            __syncwarp();
            // (offsets t·M in 32 bits: t < BT, and M < 2^32 / BT for any scan that fits)
            const unsigned uM = (unsigned)M;
            float2 g0 = active && n > 0 ? __ldg(gt + ld_shared_u8(s_list, 0) * uM) : zero;
            float2 g1 = active && n > 1 ? __ldg(gt + ld_shared_u8(s_list, 1) * uM) : zero;
            for (int i = 0; i < n; ++i) {
                const int t = ld_shared_u8(s_list, i);
                const float2 g = g0;
                g0 = g1;
                if (active && i + 2 < n) g1 = __ldg(gt + ld_shared_u8(s_list, i + 2) * uM);
                const float4 p = ld_shared(s_px, t);
                float am, ap;
                bool minus;
                if (active && alias_kept(ex, t)
                    && pair_geo(p.x, p.y, fnr, fnc, k64 + 2 * (b0 + t), nr, nc, p.z, geo, am,
                                ap, minus))
                    pair(p.x, p.y, g, am, ap, minus);
            }
        } else {
            const float2* gp = G + (size_t)b0 * M + src;
            float2 g0 = active ? gp[0] : zero;
            float2 g1 = active && nb > 1 ? gp[M] : zero;
            gp += 2 * (size_t)M;
#pragma unroll WALK_UNROLL_N
            for (int t = 0; t < nb; ++t, gp += M) {
                const float2 g = g0;
                g0 = g1;
                if (t + 2 < nb && active) g1 = *gp;
                const float4 p = ld_shared(s_px, t);
                float am, ap;
                bool minus;
                const bool in = active && alias_kept(ex, t)
                                && pair_geo(p.x, p.y, fnr, fnc, k64 + 2 * (b0 + t), nr, nc,
                                            p.z, geo, am, ap, minus);
                if (WARP) pixel(p, in);
                if (in) pair(p.x, p.y, g, am, ap, minus);
            }
        }
        tile_end();
    }
}

struct NoPixel {
    __device__ __forceinline__ void operator()(const float4&, bool) const {}
};

// |g|² of one in-trotter pair (the sideband energy term; one form for both kernels).
__device__ __forceinline__ float energy_term(float2 g) {
    return __fmaf_rn(g.x, g.x, __fmul_rn(g.y, g.y));
}
