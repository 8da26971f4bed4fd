// livessb CUDA kernels: VP objective sums, exact derivatives, energy, reconstruction,
// spectra staging and COM. Compiled at run time by CuPy (NVRTC); see cuda_kernels.py.
//
// Layout: G is (B, M) complex64, M = Nr * Hc the flattened rfft half plane (row-major).
// One thread owns one frequency ν (a warp a compact tile of them, slot_bin in walk.cu)
// and loops over the BF pixels b in index order
// (float partials flushed to float64 every BT pixels), so every per-ν sum has a fixed order.
// Per-block partial sums are reduced by a fixed tree in shared memory and written
// to a partial array; the host reduces those rows (numpy, fixed order). No atomics.
//
// Γ for the six-parameter model (see physics/overlap.py) in the factored form
//   conj(Γ_b(ν)) = e^{-ic'} ((α-β) cos(Ψ/2) + i (α+β) sin(Ψ/2)),
//   c' = 2πλ kᵀMν (linear in k), Ψ/2 = πλ νᵀMν, α = S_m a_m, β = S_p a_p,
//   S = sinc(x), x_m = X_m - y, x_p = X_p - y, y = (Δ/2) 2πλ k·ν.
// The scoring kernel (vp_eval, 2 or 4 candidates per thread) advances e^{-ic'} and
// e^{ix_m} along detector rows by recurrence instead (see the comment there).
// The trotter mask is evaluated in float64 with the NumPy formula (bit-identical
// support to the CPU engine); the rest runs in float32 with float64 flushes.
// Reconstruction grids walk per-warp support masks (support_mask, once per rotation):
// a warp skips the pixels outside the trotter of all its frequencies.

#define BT 128          // BF pixels per float partial sum (flushed to float64 after each)
#define NT 128          // threads (frequencies) per block
#define PI_D 3.141592653589793
#define MRAD_D 1e-3
// Minimum resident blocks per SM of the hot kernels (register budget; -D overrides).
#ifndef EVAL_MINB4  // four candidates per thread (the search's launches)
#define EVAL_MINB4 4
#endif
#ifndef EVAL_MINB_FOR  // by candidates per thread: more of them need more registers
#define EVAL_MINB_FOR(KC) ((KC) <= 2 ? 6 : EVAL_MINB4)
#endif
#ifndef DERIV_MINB
#define DERIV_MINB 3
#endif
#ifndef RECON_MINB
#define RECON_MINB 8
#endif
#ifndef RECON_MINB_FOR  // by candidates per thread (a map's tiles per launch)
#define RECON_MINB_FOR(K) ((K) == 1 ? RECON_MINB : (K) == 2 ? 6 : 4)
#endif
#ifndef WALK_UNROLL  // pixels per iteration of the unmasked walk (-D overrides)
#define WALK_UNROLL 1
#endif
constexpr int WALK_UNROLL_N = WALK_UNROLL;  // (pragmas take constants, not macros)

// ALIAS_PIXELS (the module that alias_pixels="excluded" compiles, cuda_kernels.module):
// pair_geo leaves out the pixels an alias ν + m/step of an undersampled scan shares
// (physics/aliases.py). Without it the alias argument is ignored: the default kernels
// are the same instructions as before the option existed.
#ifndef ALIAS_PIXELS
#define ALIAS_PIXELS 0
#endif

struct Geo {
    double ka2;        // k_alpha^2 (mask)
    float ka;          // k_alpha
    float inv_w;       // 1 / edge width
    float twopilam;    // 2 π λ
    float in2, out2;   // |q|² below which the aperture is exactly 1, above which exactly 0
#if ALIAS_PIXELS
    double a_sr, a_sc; // alias spacing 1/step per scan axis (1/Å)
    int a_mr, a_mc;    // alias orders tested per axis (0: none, every pair kept)
    double a_reach2;   // (max |k| + k_alpha)²: an alias farther out holds no BF pixel
    // The pairs the walks leave out (an alias shares them, or they lie outside the
    // trotter), a row per bin of uint4 per tile of BT pixels (alias_exclusion): the walks
    // read one per tile instead of testing the aliases pair by pair.
    const uint4* a_tab;
    int a_tiles;       // tiles per row of a_tab
#endif
};

// 1/x by the SFU alone (rcp.approx.ftz: MUFU.RCP). __fdividef(s, x) is s times this same
// reciprocal wherever |x| is a normal float, but its SASS also rescales a denormal x (two
// FMULs, a compare and two selects per quotient): the sinc arguments that reach a quotient
// are ≥ 1e-3 in magnitude, so the same bits come from MUFU.RCP and one FMUL.
__device__ __forceinline__ float fast_rcp(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// The aperture's soft edge spans |q| ∈ ka ∓ w/2; in2 and out2 sit 1e-5 (relative) inside
// that band's ends, far beyond the rounding of aperture_f, which therefore clamps to
// exactly 1 below in2 and exactly 0 above out2: pair_geo takes those values without the
// square root (same bits).
__device__ __forceinline__ Geo make_geo(double ka2, float ka, float inv_w, float twopilam) {
    const float half_w = __fmul_rn(0.5f, fast_rcp(inv_w));
    const float lo = (ka - half_w) * (1.0f - 1e-5f), hi = (ka + half_w) * (1.0f + 1e-5f);
    Geo g;
    g.ka2 = ka2; g.ka = ka; g.inv_w = inv_w; g.twopilam = twopilam;
    g.in2 = lo > 0.0f ? lo * lo : -1.0f;
    g.out2 = hi * hi;
#if ALIAS_PIXELS
    g.a_sr = g.a_sc = g.a_reach2 = 0.0;
    g.a_mr = g.a_mc = 0;
    g.a_tab = nullptr;
    g.a_tiles = 0;
#endif
    return g;
}

// g with the alias spacing (1/step_r, 1/step_c, m_r, m_c) of physics.aliases.alias_spacing
// and the reach² (launch.KernelGeo), and the window's exclusion table at this rotation
// (tab, rows of ceil(B / BT) uint4; the host builds it wherever alias is set); nullptr
// (or the default module) keeps every pair.
__device__ __forceinline__ Geo with_alias(Geo g, const double* __restrict__ alias,
                                          const uint4* __restrict__ tab = nullptr,
                                          int B = 0) {
#if ALIAS_PIXELS
    if (alias != nullptr) {
        g.a_sr = alias[0]; g.a_sc = alias[1];
        g.a_mr = (int)alias[2]; g.a_mc = (int)alias[3];
        g.a_reach2 = alias[4];
        g.a_tab = tab;
        g.a_tiles = (B + BT - 1) / BT;
    }
#endif
    return g;
}

#if ALIAS_PIXELS
// The aliases ν' = ν + m/step of one frequency (bit i: the i-th m ≠ 0 in alias_shared's
// order) whose discs can hold a BF pixel: |k ∓ ν'| ≥ |ν'| − max|k| > k_alpha for every
// pixel beyond the reach, so leaving those out changes no pair (the float64 sum and
// product as the test's own). From the 32nd on (bit 31) aliases are always tested.
__device__ __forceinline__ unsigned alias_reach(double nr, double nc, const Geo& g) {
    unsigned bits = 0u;
    int i = 0;
    for (int mr = -g.a_mr; mr <= g.a_mr; ++mr) {
        for (int mc = -g.a_mc; mc <= g.a_mc; ++mc) {
            if (mr == 0 && mc == 0) continue;
            if (i >= 31) return bits | 0x80000000u;  // (bit 31: the rest tested)
            const double ar = __dadd_rn(nr, __dmul_rn((double)mr, g.a_sr));
            const double ac = __dadd_rn(nc, __dmul_rn((double)mc, g.a_sc));
            if (__dadd_rn(__dmul_rn(ar, ar), __dmul_rn(ac, ac)) <= g.a_reach2) bits |= 1u << i;
            ++i;
        }
    }
    return bits;
}
#endif

struct Cand {          // per (ν, candidate) constants
    float vr, vc;      // c' = kr*vr + kc*vc
    float cE, sE;      // e^{iΨ/2}
    float hd;          // Δ/2
    float Xm, Xp;      // x_m = Xm - hd*q, x_p = Xp - hd*q
    float sXm, cXm, sXp, cXp;
};

struct PairOut {       // per-pair values the derivative kernel reuses
    float sc, cc;      // sin, cos of c'
    float xm, xp, sm, cm, sp, cp;   // sinc arguments and their sin/cos
    float Sm, Sp;
};

__device__ __forceinline__ float aperture_f(float d2, const Geo& g) {
    float q = d2 > 0.0f ? __fmul_rn(d2, rsqrtf(d2)) : 0.0f;  // |q| (SFU rsqrt)
    float a = __fmaf_rn(__fsub_rn(g.ka, q), g.inv_w, 0.5f);
    return fminf(fmaxf(a, 0.0f), 1.0f);
}

// A candidate's per-ν quantities in float64 (one formula for every kernel's setup):
// c' = kr*vr + kc*vc, x = X - hd*q, Ψ/2 = half_psi.
// cand: C10, C12, c2, s2, t_r, t_c, depth, pad.
struct CandPhases {
    double vr, vc, hd, Xm, Xp, half_psi;
};

__device__ __forceinline__ CandPhases cand_phases(const double* __restrict__ cand, double nr,
                                                  double nc, double pilam) {
    const double C10 = cand[0], C12 = cand[1], c2 = cand[2], s2 = cand[3];
    const double a = C12 * c2, b = C12 * s2, nn = nr * nr + nc * nc;
    const double hd = 0.5 * cand[6], tp = 2.0 * PI_D * (nr * cand[4] + nc * cand[5]);
    CandPhases o;
    o.vr = 2.0 * pilam * ((C10 + a) * nr + b * nc);
    o.vc = 2.0 * pilam * (b * nr + (C10 - a) * nc);
    o.hd = hd;
    o.Xm = hd * (pilam * nn + tp);
    o.Xp = hd * (-pilam * nn + tp);
    o.half_psi = pilam * (C10 * nn + a * (nr * nr - nc * nc) + b * 2.0 * nr * nc);
    return o;
}

// Candidate constants for frequency (nr, nc) of the direct (sincos per pair) kernels.
__device__ __forceinline__ void make_cand(const double* __restrict__ cand, double nr, double nc,
                                          double pilam, Cand& o) {
    const CandPhases p = cand_phases(cand, nr, nc, pilam);
    const double Xm = p.Xm, Xp = p.Xp;
    o.vr = (float)p.vr;
    o.vc = (float)p.vc;
    double s, c;
    sincos(p.half_psi, &s, &c);
    o.cE = (float)c;
    o.sE = (float)s;
    o.hd = (float)p.hd;
    o.Xm = (float)Xm;
    o.Xp = (float)Xp;
    sincos(Xm, &s, &c);
    o.sXm = (float)s; o.cXm = (float)c;
    sincos(Xp, &s, &c);
    o.sXp = (float)s; o.cXp = (float)c;
}

// x, opaque to the optimizer (an empty asm that "modifies" it): the value is kept
// instead of being recomputed from its sources where it is used.
__device__ __forceinline__ float opaque(float x) {
    asm volatile("" : "+f"(x));
    return x;
}

// sinc(x) = sin(x)/x (the CPU engine's form: 1 - x²/6 below |x| = 1e-3). The fast sine
// is accurate relative to x near 0, so the quotient keeps float precision there. Both
// forms are computed and one selected: no branch per pair.
#define SINC_SERIES 0.6f
__device__ __forceinline__ float sinc_f(float x, float s) {
    const float quotient = __fmul_rn(s, fast_rcp(x));
    const float series = __fmaf_rn(__fmul_rn(x, x), -0.16666667f, 1.0f);
    return fabsf(x) < 1e-3f ? series : quotient;
}

// First and second derivatives of sinc: series below SINC_SERIES (x cos x - sin x
// cancels there), closed form above.
__device__ __forceinline__ void sinc_d12(float x, float S, float sn, float cs, float& S1,
                                        float& S2) {
    if (fabsf(x) < SINC_SERIES) {
        const float x2 = x * x;
        S1 = x * (-1.f / 3.f + x2 * (1.f / 30.f + x2 * (-1.f / 840.f + x2 * (1.f / 45360.f
                 + x2 * (-1.f / 3991680.f)))));
        S2 = -1.f / 3.f + x2 * (0.1f + x2 * (-1.f / 168.f + x2 * (1.f / 6480.f
                 + x2 * (-1.f / 443520.f))));
    } else {
        const float ix = fast_rcp(x);  // (|x| ≥ SINC_SERIES here)
        S1 = (x * cs - sn) * ix * ix;
        S2 = -S - 2.f * S1 * ix;
    }
}

// sin and cos of x: Cody-Waite reduction by 2π (two constants), then the SFU pair.
// Absolute error ~5e-7 after reduction; float32 arguments themselves carry ~|x|·6e-8.
// n = rint(x/2π) by the 1.5·2^23 shift inside one fma (FMA pipe; FRND would use the
// conversion unit); exact for |x| < 2^22·2π.
__device__ __forceinline__ float reduce_2pi(float x) {
    const float n = __fsub_rn(__fmaf_rn(x, 0.159154943091895336f, 12582912.0f), 12582912.0f);
    const float r = __fmaf_rn(n, -6.28318548202514648f, x);
    return __fmaf_rn(n, 1.74845553e-7f, r);
}

__device__ __forceinline__ void fast_sincos(float x, float* s, float* c) {
    __sincosf(reduce_2pi(x), s, c);
}

__device__ __forceinline__ float fast_sin(float x) { return __sinf(reduce_2pi(x)); }

// conj(Γ) for one pair and candidate: returns (pr, pi), u^2+v^2 via d; fills po.
__device__ __forceinline__ void gamma_conj(float kr, float kc, float q, float am, float ap,
                                           const Cand& c, float& pr, float& pi, float& u,
                                           float& v, PairOut& po) {
    float cp = __fmaf_rn(kr, c.vr, __fmul_rn(kc, c.vc));
    fast_sincos(cp, &po.sc, &po.cc);
    // No zero-depth branch: at Δ = 0 these give y = x = 0, S = 1 exactly (the series),
    // and a branch per candidate costs more than it saves (depths are rarely 0).
    const float y = __fmul_rn(c.hd, q);
    float sy, cy;
    fast_sincos(y, &sy, &cy);
    po.xm = __fsub_rn(c.Xm, y);
    po.xp = __fsub_rn(c.Xp, y);
    po.sm = __fmaf_rn(c.sXm, cy, -__fmul_rn(c.cXm, sy));
    po.cm = __fmaf_rn(c.cXm, cy, __fmul_rn(c.sXm, sy));
    po.sp = __fmaf_rn(c.sXp, cy, -__fmul_rn(c.cXp, sy));
    po.cp = __fmaf_rn(c.cXp, cy, __fmul_rn(c.sXp, sy));
    po.Sm = sinc_f(po.xm, po.sm);
    po.Sp = sinc_f(po.xp, po.sp);
    float al = __fmul_rn(po.Sm, am), be = __fmul_rn(po.Sp, ap);
    u = __fmul_rn(__fsub_rn(al, be), c.cE);
    v = __fmul_rn(__fadd_rn(al, be), c.sE);
    pr = __fmaf_rn(u, po.cc, __fmul_rn(v, po.sc));
    pi = __fmaf_rn(v, po.cc, -__fmul_rn(u, po.sc));
}

// Accumulate N += conj(Γ) G, D += |Γ|^2 (float partials).
__device__ __forceinline__ void acc_nd(float pr, float pi, float u, float v, float2 g,
                                       float& Nr, float& Ni, float& D) {
    Nr = __fmaf_rn(pr, g.x, __fmaf_rn(-pi, g.y, Nr));
    Ni = __fmaf_rn(pr, g.y, __fmaf_rn(pi, g.x, Ni));
    D = __fmaf_rn(u, u, __fmaf_rn(v, v, D));
}
