// livessb CUDA kernels: VP objective sums, exact derivatives, energy, reconstruction,
// spectra staging and COM. Compiled at run time by CuPy (NVRTC); see cuda_kernels.py.
//
// Layout: G is (B, M) complex64, M = Nr * Hc the flattened rfft half plane (row-major).
// One thread owns one frequency ν and loops over the BF pixels b in index order
// (tiles of BT pixels staged in shared memory), so every per-ν sum has a fixed order.
// Per-block partial sums are reduced by a fixed tree in shared memory and written
// to a partial array; the host reduces those rows (numpy, fixed order). No atomics.
//
// Γ for the six-parameter model (see physics/overlap.py) in the factored form
//   conj(Γ_b(ν)) = e^{-ic'} ((α-β) cos(Ψ/2) + i (α+β) sin(Ψ/2)),
//   c' = 2πλ kᵀMν (linear in k), Ψ/2 = πλ νᵀMν, α = S_m a_m, β = S_p a_p,
//   S = sinc(x), x_m = X_m - y, x_p = X_p - y, y = (Δ/2) 2πλ k·ν.
// The trotter mask is evaluated in float64 with the NumPy formula (bit-identical
// support to the CPU engine); the rest runs in float32 with float64 flushes.

#define BT 128          // BF pixels per shared-memory tile
#define NT 128          // threads (frequencies) per block
#define PI_D 3.141592653589793
#define MRAD_D 1e-3

struct Geo {
    double ka2;        // k_alpha^2 (mask)
    float ka;          // k_alpha
    float inv_w;       // 1 / edge width
    float twopilam;    // 2 π λ
};

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
    float q = sqrtf(d2);
    float a = __fmaf_rn(__fsub_rn(g.ka, q), g.inv_w, 0.5f);
    return fminf(fmaxf(a, 0.0f), 1.0f);
}

// Candidate constants for frequency (nr, nc). cand: C10, C12, c2, s2, t_r, t_c, depth, pad.
__device__ __forceinline__ void make_cand(const double* __restrict__ cand, double nr, double nc,
                                          double pilam, Cand& o) {
    double C10 = cand[0], C12 = cand[1], c2 = cand[2], s2 = cand[3];
    double tr = cand[4], tc = cand[5], dep = cand[6];
    double a = C12 * c2, b = C12 * s2;
    o.vr = (float)(2.0 * pilam * ((C10 + a) * nr + b * nc));
    o.vc = (float)(2.0 * pilam * (b * nr + (C10 - a) * nc));
    double nn = nr * nr + nc * nc;
    double half_psi = pilam * (C10 * nn + a * (nr * nr - nc * nc) + b * 2.0 * nr * nc);
    double s, c;
    sincos(half_psi, &s, &c);
    o.cE = (float)c;
    o.sE = (float)s;
    double hd = 0.5 * dep;
    double tp = 2.0 * PI_D * (nr * tr + nc * tc);
    double Xm = hd * (pilam * nn + tp), Xp = hd * (-pilam * nn + tp);
    o.hd = (float)hd;
    o.Xm = (float)Xm;
    o.Xp = (float)Xp;
    sincos(Xm, &s, &c);
    o.sXm = (float)s; o.cXm = (float)c;
    sincos(Xp, &s, &c);
    o.sXp = (float)s; o.cXp = (float)c;
}

__device__ __forceinline__ float sinc_f(float x, float s) {
    return fabsf(x) < 1e-3f ? __fsub_rn(1.0f, __fdiv_rn(__fmul_rn(x, x), 6.0f)) : __fdiv_rn(s, x);
}

// conj(Γ) for one pair and candidate: returns (pr, pi), u^2+v^2 via d; fills po.
__device__ __forceinline__ void gamma_conj(float kr, float kc, float q, float am, float ap,
                                           const Cand& c, float& pr, float& pi, float& u,
                                           float& v, PairOut& po) {
    float cp = __fmaf_rn(kr, c.vr, __fmul_rn(kc, c.vc));
    sincosf(cp, &po.sc, &po.cc);
    if (c.hd != 0.0f) {
        float y = __fmul_rn(c.hd, q);
        float sy, cy;
        sincosf(y, &sy, &cy);
        po.xm = __fsub_rn(c.Xm, y);
        po.xp = __fsub_rn(c.Xp, y);
        po.sm = __fsub_rn(__fmul_rn(c.sXm, cy), __fmul_rn(c.cXm, sy));
        po.cm = __fmaf_rn(c.cXm, cy, __fmul_rn(c.sXm, sy));
        po.sp = __fsub_rn(__fmul_rn(c.sXp, cy), __fmul_rn(c.cXp, sy));
        po.cp = __fmaf_rn(c.cXp, cy, __fmul_rn(c.sXp, sy));
        po.Sm = sinc_f(po.xm, po.sm);
        po.Sp = sinc_f(po.xp, po.sp);
    } else {
        po.xm = 0.0f; po.xp = 0.0f; po.sm = 0.0f; po.sp = 0.0f; po.cm = 1.0f; po.cp = 1.0f;
        po.Sm = 1.0f; po.Sp = 1.0f;
    }
    float al = __fmul_rn(po.Sm, am), be = __fmul_rn(po.Sp, ap);
    u = __fmul_rn(__fsub_rn(al, be), c.cE);
    v = __fmul_rn(__fadd_rn(al, be), c.sE);
    pr = __fmaf_rn(u, po.cc, __fmul_rn(v, po.sc));
    pi = __fsub_rn(__fmul_rn(v, po.cc), __fmul_rn(u, po.sc));
}

// Accumulate N += conj(Γ) G, D += |Γ|^2 (float partials).
__device__ __forceinline__ void acc_nd(float pr, float pi, float u, float v, float2 g,
                                       float& Nr, float& Ni, float& D) {
    Nr = __fadd_rn(Nr, __fsub_rn(__fmul_rn(pr, g.x), __fmul_rn(pi, g.y)));
    Ni = __fadd_rn(Ni, __fmaf_rn(pr, g.y, __fmul_rn(pi, g.x)));
    D = __fadd_rn(D, __fmaf_rn(u, u, __fmul_rn(v, v)));
}

__device__ __forceinline__ double loss_term(double Nr, double Ni, double D, double w) {
    return D > 1e-12 ? (Nr * Nr + Ni * Ni) / D * w : 0.0;
}

__device__ __forceinline__ double half_weight(int ic, int Nc) {
    if (ic == 0) return 1.0;
    if ((Nc % 2 == 0) && ic == Nc / 2) return 1.0;
    return 2.0;
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

// Mask and amplitudes of pair (b, ν). Returns false outside the trotter.
__device__ __forceinline__ bool pair_geo(double kr, double kc, double nr, double nc, float akb,
                                         const Geo& g, float& am, float& ap) {
    double dr = __dsub_rn(kr, nr), dc = __dsub_rn(kc, nc);
    double dm = __dadd_rn(__dmul_rn(dr, dr), __dmul_rn(dc, dc));
    double er = __dadd_rn(kr, nr), ec = __dadd_rn(kc, nc);
    double dp = __dadd_rn(__dmul_rn(er, er), __dmul_rn(ec, ec));
    bool inm = dm <= g.ka2, inp = dp <= g.ka2;
    if (inm == inp) return false;
    am = __fmul_rn(aperture_f((float)dm, g), akb);
    ap = __fmul_rn(aperture_f((float)dp, g), akb);
    return true;
}

#define TILE_LOAD()                                                              \
    __syncthreads();                                                             \
    for (int t = threadIdx.x; t < BT; t += NT) {                                 \
        int bb = b0 + t;                                                         \
        if (bb < B) {                                                            \
            s_kr[t] = k64[2 * bb]; s_kc[t] = k64[2 * bb + 1];                    \
            s_fr[t] = (float)k64[2 * bb]; s_fc[t] = (float)k64[2 * bb + 1];      \
            s_ak[t] = akb[bb];                                                   \
        }                                                                        \
    }                                                                            \
    __syncthreads();

#define TILE_SHARED()                                                            \
    __shared__ double s_kr[BT], s_kc[BT];                                        \
    __shared__ float s_fr[BT], s_fc[BT], s_ak[BT];

// ---------------------------------------------------------------------------------
// VP loss terms for KC candidates per thread; grid (ceil(Kpad/KC), ceil(M/NT)).
// partial: (Kpad, nblk) doubles, Σ_ν∈block w |N|^2 / D.
template <int KC>
__global__ void __launch_bounds__(NT) vp_eval(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float* __restrict__ akb,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam, double pilam, double* __restrict__ partial) {
    TILE_SHARED();
    const Geo geo = {g_ka2, g_ka, g_inv_w, g_twopilam};
    __shared__ double red[KC * NT];
    const int Hc = Nc / 2 + 1;
    const int m = blockIdx.y * NT + threadIdx.x;
    const int c0 = blockIdx.x * KC;
    const int nblk = gridDim.y;
    double nr = 0.0, nc = 0.0;
    bool active = m < M;
    if (active) {
        nr = nu_r[m / Hc];
        nc = nu_c[m % Hc];
        if (nr * nr + nc * nc > 4.0 * geo.ka2 * (1.0 + 1e-6)) active = false;
    }
    Cand cc[KC];
    float fN[KC][3];
    double dN[KC][3];
#pragma unroll
    for (int j = 0; j < KC; ++j) {
        make_cand(cand + 8 * (c0 + j), nr, nc, pilam, cc[j]);
        fN[j][0] = fN[j][1] = fN[j][2] = 0.0f;
        dN[j][0] = dN[j][1] = dN[j][2] = 0.0;
    }
    const float fnr = (float)nr, fnc = (float)nc;
    const float qr = __fmul_rn(geo.twopilam, fnr), qc = __fmul_rn(geo.twopilam, fnc);
    for (int b0 = 0; b0 < B; b0 += BT) {
        TILE_LOAD();
        const int nb = min(BT, B - b0);
        if (active) {
            for (int t = 0; t < nb; ++t) {
                float am, ap;
                if (!pair_geo(s_kr[t], s_kc[t], nr, nc, s_ak[t], geo, am, ap)) continue;
                const float2 g = G[(size_t)(b0 + t) * M + m];
                const float kr = s_fr[t], kc = s_fc[t];
                const float q = __fmaf_rn(kr, qr, __fmul_rn(kc, qc));
#pragma unroll
                for (int j = 0; j < KC; ++j) {
                    float pr, pi, u, v;
                    PairOut po;
                    gamma_conj(kr, kc, q, am, ap, cc[j], pr, pi, u, v, po);
                    acc_nd(pr, pi, u, v, g, fN[j][0], fN[j][1], fN[j][2]);
                }
            }
#pragma unroll
            for (int j = 0; j < KC; ++j) {
                dN[j][0] += fN[j][0]; dN[j][1] += fN[j][1]; dN[j][2] += fN[j][2];
                fN[j][0] = fN[j][1] = fN[j][2] = 0.0f;
            }
        }
    }
    const double w = active ? half_weight(m % Hc, Nc) : 0.0;
#pragma unroll
    for (int j = 0; j < KC; ++j)
        red[j * NT + threadIdx.x] = active ? loss_term(dN[j][0], dN[j][1], dN[j][2], w) : 0.0;
    block_reduce(red, KC);
    if (threadIdx.x < KC) partial[(size_t)(c0 + threadIdx.x) * nblk + blockIdx.y] = red[threadIdx.x * NT];
}

// ---------------------------------------------------------------------------------
// Loss, gradient and Hessian terms, one candidate per blockIdx.x.
// partial: (K, 28, nblk): [loss, grad(6), hess(21 in PAIRS order)] (sums before -1/E).
#define NQ 28
__global__ void __launch_bounds__(NT) vp_derivs(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float* __restrict__ akb,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam, double pilam, double* __restrict__ partial) {
    TILE_SHARED();
    const Geo geo = {g_ka2, g_ka, g_inv_w, g_twopilam};
    extern __shared__ double red[];  // NQ * NT
    const int Hc = Nc / 2 + 1;
    const int m = blockIdx.y * NT + threadIdx.x;
    const int ci = blockIdx.x;
    const int nblk = gridDim.y;
    const double* cd = cand + 8 * ci;
    double nr = 0.0, nc = 0.0;
    bool active = m < M;
    if (active) {
        nr = nu_r[m / Hc];
        nc = nu_c[m % Hc];
        if (nr * nr + nc * nc > 4.0 * geo.ka2 * (1.0 + 1e-6)) active = false;
    }
    Cand cc;
    make_cand(cd, nr, nc, pilam, cc);
    const double C12 = cd[1], c2 = cd[2], s2 = cd[3], dep = cd[6];
    const double tr = cd[4], tcc = cd[5];
    // Per-ν derivative constants (double, then float for the inner loop).
    const double Dn = nr * nr - nc * nc, Xn = 2.0 * nr * nc, nn = nr * nr + nc * nc;
    const double P0 = pilam * nn, P1 = pilam * (c2 * Dn + s2 * Xn);
    const double P12 = pilam * (-2.0 * s2 * Dn + 2.0 * c2 * Xn);
    const double P2 = C12 * P12, P22 = pilam * C12 * (-4.0 * c2 * Dn - 4.0 * s2 * Xn);
    const double tp = 2.0 * PI_D * (nr * tr + nc * tcc);
    const float fP[3] = {(float)P0, (float)P1, (float)P2};
    const float fP12 = (float)P12, fP22 = (float)P22;
    const float xt[2] = {(float)(PI_D * dep * MRAD_D * nr), (float)(PI_D * dep * MRAD_D * nc)};
    const float xtd[2] = {(float)(PI_D * MRAD_D * nr), (float)(PI_D * MRAD_D * nc)};
    const float Bm = (float)(pilam * nn + tp), Bp = (float)(-pilam * nn + tp);
    const float fC12 = (float)C12, fc2 = (float)c2, fs2 = (float)s2;
    const float fnr = (float)nr, fnc = (float)nc;
    const float qr = __fmul_rn(geo.twopilam, fnr), qc = __fmul_rn(geo.twopilam, fnc);

    float fN[3] = {0.f, 0.f, 0.f};
    double dN[3] = {0.0, 0.0, 0.0};
    // Complex accumulators (re, im): X[3], Na[3], Y[6], Z12, Z22, W[9], V[6] = 29.
    float X[3][2], Na[3][2], Y[6][2], Z12[2], Z22[2], W[9][2], V[6][2];
    // Real: R0, Q[3], R[3], Qab[6], Rab[6].
    float R0 = 0.f, Q[3], R[3], Qab[6], Rab[6];
#pragma unroll
    for (int i = 0; i < 3; ++i) { X[i][0] = X[i][1] = Na[i][0] = Na[i][1] = 0.f; Q[i] = R[i] = 0.f; }
#pragma unroll
    for (int i = 0; i < 6; ++i) { Y[i][0] = Y[i][1] = V[i][0] = V[i][1] = 0.f; Qab[i] = Rab[i] = 0.f; }
#pragma unroll
    for (int i = 0; i < 9; ++i) { W[i][0] = W[i][1] = 0.f; }
    Z12[0] = Z12[1] = Z22[0] = Z22[1] = 0.f;

    for (int b0 = 0; b0 < B; b0 += BT) {
        TILE_LOAD();
        const int nb = min(BT, B - b0);
        if (active) {
            for (int t = 0; t < nb; ++t) {
                float am, ap;
                if (!pair_geo(s_kr[t], s_kc[t], nr, nc, s_ak[t], geo, am, ap)) continue;
                const float2 g = G[(size_t)(b0 + t) * M + m];
                const float kr = s_fr[t], kc = s_fc[t];
                const float q = __fmaf_rn(kr, qr, __fmul_rn(kc, qc));
                float pr, pi, u, v;
                PairOut po;
                gamma_conj(kr, kc, q, am, ap, cc, pr, pi, u, v, po);
                acc_nd(pr, pi, u, v, g, fN[0], fN[1], fN[2]);
                // ---- derivative sums ----
                const float e1 = q;
                const float e2 = kr * qr - kc * qc;
                const float e3 = kr * qc + kc * qr;
                const float cd1 = fc2 * e2 + fs2 * e3;
                const float tt = -fs2 * e2 + fc2 * e3;
                const float cdv[3] = {e1, cd1, 2.f * fC12 * tt};
                const float cd12 = 2.f * tt, cd22 = -4.f * fC12 * cd1;
                // g' = e^{-ic'} G; h_m = E g', h_p = -conj(E) g'
                const float gr = po.cc * g.x + po.sc * g.y;
                const float gi = po.cc * g.y - po.sc * g.x;
                const float hm[2] = {cc.cE * gr - cc.sE * gi, cc.cE * gi + cc.sE * gr};
                const float hp[2] = {-(cc.cE * gr + cc.sE * gi), -(cc.cE * gi - cc.sE * gr)};
                // sinc derivatives
                float S1m, S2m, S1p, S2p;
                {
                    float x = po.xm;
                    if (fabsf(x) < 1e-3f) { S1m = -x / 3.f + x * x * x / 30.f; S2m = -1.f / 3.f + x * x / 10.f; }
                    else { S1m = (x * po.cm - po.sm) / (x * x); S2m = -po.Sm - 2.f * S1m / x; }
                    x = po.xp;
                    if (fabsf(x) < 1e-3f) { S1p = -x / 3.f + x * x * x / 30.f; S2p = -1.f / 3.f + x * x / 10.f; }
                    else { S1p = (x * po.cp - po.sp) / (x * x); S2p = -po.Sp - 2.f * S1p / x; }
                }
                const float Am = po.Sm * am, Ap = po.Sp * ap;
                const float xm3[3] = {xt[0], xt[1], 0.5f * (Bm - e1)};
                const float xp3[3] = {xt[0], xt[1], 0.5f * (Bp - e1)};
                float Ama[3], Apa[3];
#pragma unroll
                for (int a = 0; a < 3; ++a) { Ama[a] = S1m * xm3[a] * am; Apa[a] = S1p * xp3[a] * ap; }
                float Amab[6], Apab[6];
                {
                    int n = 0;
#pragma unroll
                    for (int a = 0; a < 3; ++a)
#pragma unroll
                        for (int bq = a; bq < 3; ++bq, ++n) {
                            float xab = (bq == 2 && a < 2) ? xtd[a] : 0.f;
                            Amab[n] = (S2m * xm3[a] * xm3[bq] + S1m * xab) * am;
                            Apab[n] = (S2p * xp3[a] * xp3[bq] + S1p * xab) * ap;
                        }
                }
                float Pm[3], Pp[3];
#pragma unroll
                for (int i = 0; i < 3; ++i) { Pm[i] = fP[i] - cdv[i]; Pp[i] = -fP[i] - cdv[i]; }
#define ACC(acc, rm, rp) { acc[0] += (rm) * hm[0] + (rp) * hp[0]; acc[1] += (rm) * hm[1] + (rp) * hp[1]; }
#pragma unroll
                for (int i = 0; i < 3; ++i) {
                    ACC(X[i], Pm[i] * Am, Pp[i] * Ap);
                    ACC(Na[i], Ama[i], Apa[i]);
                }
                {
                    int n = 0;
#pragma unroll
                    for (int i = 0; i < 3; ++i)
#pragma unroll
                        for (int j = i; j < 3; ++j, ++n) ACC(Y[n], Pm[i] * Pm[j] * Am, Pp[i] * Pp[j] * Ap);
                }
                ACC(Z12, (fP12 - cd12) * Am, (-fP12 - cd12) * Ap);
                ACC(Z22, (fP22 - cd22) * Am, (-fP22 - cd22) * Ap);
#pragma unroll
                for (int i = 0; i < 3; ++i)
#pragma unroll
                    for (int a = 0; a < 3; ++a) ACC(W[3 * i + a], Pm[i] * Ama[a], Pp[i] * Apa[a]);
#pragma unroll
                for (int n = 0; n < 6; ++n) ACC(V[n], Amab[n], Apab[n]);
#undef ACC
                // D-type sums (α = Am, β = Ap)
                R0 += Am * Ap;
#pragma unroll
                for (int a = 0; a < 3; ++a) {
                    Q[a] += Am * Ama[a] + Ap * Apa[a];
                    R[a] += Ama[a] * Ap + Am * Apa[a];
                }
                {
                    int n = 0;
#pragma unroll
                    for (int a = 0; a < 3; ++a)
#pragma unroll
                        for (int bq = a; bq < 3; ++bq, ++n) {
                            Qab[n] += Ama[a] * Ama[bq] + Am * Amab[n] + Apa[a] * Apa[bq] + Ap * Apab[n];
                            Rab[n] += Amab[n] * Ap + Ama[a] * Apa[bq] + Ama[bq] * Apa[a] + Am * Apab[n];
                        }
                }
            }
            dN[0] += fN[0]; dN[1] += fN[1]; dN[2] += fN[2];
            fN[0] = fN[1] = fN[2] = 0.f;
        }
    }
    double out[NQ];
#pragma unroll
    for (int j = 0; j < NQ; ++j) out[j] = 0.0;
    if (active) {
        const double w = half_weight(m % Hc, Nc);
        const double Nre = dN[0], Nim = dN[1], D = dN[2];
        out[0] = loss_term(Nre, Nim, D, w);
        if (D > 1e-12) {
            const double iu = 1.0 / D, idw = iu * w;
            const double n2 = Nre * Nre + Nim * Nim;
            double half_psi;
            {
                // Recompute Ψ/2 in double for cos Ψ, sin Ψ.
                const double C10 = cd[0];
                const double a = C12 * c2, b = C12 * s2;
                half_psi = pilam * (C10 * nn + a * Dn + b * Xn);
            }
            const double cosP = cos(2.0 * half_psi), sinP = sin(2.0 * half_psi);
            const double Pd[3] = {P0, P1, P2};
            double dNr[6], dNi[6], dD[6];
            for (int i = 0; i < 3; ++i) {  // N_i = i X_i
                dNr[i] = -(double)X[i][1]; dNi[i] = (double)X[i][0];
                dD[i] = 4.0 * sinP * Pd[i] * (double)R0;
                dNr[3 + i] = Na[i][0]; dNi[3 + i] = Na[i][1];
                dD[3 + i] = 2.0 * (double)Q[i] - 2.0 * cosP * (double)R[i];
            }
            double re_n_dn[6];
            for (int i = 0; i < 6; ++i) {
                re_n_dn[i] = Nre * dNr[i] + Nim * dNi[i];
                out[1 + i] = 2.0 * re_n_dn[i] * idw - n2 * dD[i] * idw * iu;
            }
            int n = 0, ny = 0, nv = 0;
            for (int i = 0; i < 6; ++i) {
                for (int j = i; j < 6; ++j, ++n) {
                    double d2r, d2i, d2D;
                    if (j < 3) {
                        d2r = -(double)Y[ny][0]; d2i = -(double)Y[ny][1];
                        double pij = 0.0;
                        if (i == 1 && j == 2) { d2r -= (double)Z12[1]; d2i += (double)Z12[0]; pij = P12; }
                        if (i == 2 && j == 2) { d2r -= (double)Z22[1]; d2i += (double)Z22[0]; pij = P22; }
                        d2D = (8.0 * cosP * Pd[i] * Pd[j] + 4.0 * sinP * pij) * (double)R0;
                        ++ny;
                    } else if (i < 3) {
                        const int a = j - 3;
                        d2r = -(double)W[3 * i + a][1]; d2i = (double)W[3 * i + a][0];
                        d2D = 4.0 * sinP * Pd[i] * (double)R[a];
                    } else {
                        d2r = V[nv][0]; d2i = V[nv][1];
                        d2D = 2.0 * (double)Qab[nv] - 2.0 * cosP * (double)Rab[nv];
                        ++nv;
                    }
                    const double t = 2.0 * (dNr[j] * dNr[i] + dNi[j] * dNi[i] + Nre * d2r + Nim * d2i)
                                     - 2.0 * re_n_dn[i] * dD[j] * iu - 2.0 * re_n_dn[j] * dD[i] * iu
                                     - n2 * d2D * iu + 2.0 * n2 * dD[i] * dD[j] * iu * iu;
                    out[7 + n] = t * idw;
                }
            }
        }
    }
    for (int j = 0; j < NQ; ++j) red[j * NT + threadIdx.x] = out[j];
    block_reduce(red, NQ);
    if (threadIdx.x < NQ)
        partial[((size_t)ci * NQ + threadIdx.x) * nblk + blockIdx.y] = red[threadIdx.x * NT];
}

// ---------------------------------------------------------------------------------
// Sideband energy Σ_ν w Σ_b m_b |G_b|^2: partial (nblk,).
__global__ void __launch_bounds__(NT) energy_kernel(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float* __restrict__ akb, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    double* __restrict__ partial, double* __restrict__ pairs) {
    TILE_SHARED();
    const Geo geo = {g_ka2, g_ka, g_inv_w, g_twopilam};
    __shared__ double red[2 * NT];
    const int Hc = Nc / 2 + 1;
    const int m = blockIdx.x * NT + threadIdx.x;
    double nr = 0.0, nc = 0.0;
    bool active = m < M;
    if (active) { nr = nu_r[m / Hc]; nc = nu_c[m % Hc]; }
    double e = 0.0, cnt = 0.0;
    for (int b0 = 0; b0 < B; b0 += BT) {
        TILE_LOAD();
        const int nb = min(BT, B - b0);
        if (active) {
            float fe = 0.f;
            for (int t = 0; t < nb; ++t) {
                float am, ap;
                if (!pair_geo(s_kr[t], s_kc[t], nr, nc, s_ak[t], geo, am, ap)) continue;
                const float2 g = G[(size_t)(b0 + t) * M + m];
                fe += g.x * g.x + g.y * g.y;
                cnt += 1.0;
            }
            e += fe;
        }
    }
    const double w = active ? half_weight(m % Hc, Nc) : 0.0;
    red[threadIdx.x] = e * w;
    red[NT + threadIdx.x] = cnt;
    block_reduce(red, 2);
    if (threadIdx.x == 0) { partial[blockIdx.x] = red[0]; pairs[blockIdx.x] = red[NT]; }
}

// ---------------------------------------------------------------------------------
// Reconstruction on the f-times finer half plane (Fr, Fc): thread per fine ν.
// mode 0: O = (1/B) Σ_b G conj(Γ)/max(|Γ|, eps); mode 1: O = N / (D + 1e-3 B).
// row_alias: (Fr,) coarse row of each fine row (before the Hermitian fold).
__global__ void __launch_bounds__(NT) reconstruct_kernel(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc, int Fr, int Fc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const int* __restrict__ row_alias,
    const double* __restrict__ k64, const float* __restrict__ akb,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam, double pilam, float eps, int mode,
    float2* __restrict__ out) {
    TILE_SHARED();
    const Geo geo = {g_ka2, g_ka, g_inv_w, g_twopilam};
    const int Hc = Nc / 2 + 1, Hf = Fc / 2 + 1;
    const int MF = Fr * Hf;
    const int m = blockIdx.x * NT + threadIdx.x;
    double nr = 0.0, nc = 0.0;
    bool active = m < MF;
    int src = 0;
    bool cj = false;
    if (active) {
        const int ir = m / Hf, ic = m % Hf;
        nr = nu_r[ir]; nc = nu_c[ic];
        if (nr * nr + nc * nc > 4.0 * geo.ka2 * (1.0 + 1e-6)) active = false;
        int R = row_alias[ir], C = ic % Nc;
        cj = C > Nc / 2;
        if (cj) { R = (Nr - R) % Nr; C = Nc - C; }
        src = R * Hc + C;
    }
    Cand cc;
    make_cand(cand, nr, nc, pilam, cc);
    const float fnr = (float)nr, fnc = (float)nc;
    const float qr = __fmul_rn(geo.twopilam, fnr), qc = __fmul_rn(geo.twopilam, fnc);
    double aR = 0.0, aI = 0.0, aD = 0.0;
    for (int b0 = 0; b0 < B; b0 += BT) {
        TILE_LOAD();
        const int nb = min(BT, B - b0);
        if (active) {
            float fr_ = 0.f, fi_ = 0.f, fd_ = 0.f;
            for (int t = 0; t < nb; ++t) {
                float am, ap;
                if (!pair_geo(s_kr[t], s_kc[t], nr, nc, s_ak[t], geo, am, ap)) continue;
                float2 g = G[(size_t)(b0 + t) * M + src];
                if (cj) g.y = -g.y;
                const float kr = s_fr[t], kc = s_fc[t];
                const float q = __fmaf_rn(kr, qr, __fmul_rn(kc, qc));
                float pr, pi, u, v;
                PairOut po;
                gamma_conj(kr, kc, q, am, ap, cc, pr, pi, u, v, po);
                if (mode == 0) {
                    const float mag = sqrtf(u * u + v * v);
                    const float inv = 1.0f / fmaxf(mag, eps);
                    fr_ += (pr * g.x - pi * g.y) * inv;
                    fi_ += (pr * g.y + pi * g.x) * inv;
                } else {
                    acc_nd(pr, pi, u, v, g, fr_, fi_, fd_);
                }
            }
            aR += fr_; aI += fi_; aD += fd_;
        }
    }
    if (m < MF) {
        float2 o;
        if (mode == 0) { o.x = (float)(aR / B); o.y = (float)(aI / B); }
        else { const double den = aD + 1e-3 * B; o.x = (float)(aR / den); o.y = (float)(aI / den); }
        out[m] = o;
    }
}

// ---------------------------------------------------------------------------------
// Spectra staging: out[(p, r, c)] = counts[b0+p, R0+r, C0+c] - mean[b0+p] inside the
// window (h, w), 0 in the padding (the mean pattern minus itself). bf: (B, Rr, Rc).
template <typename T>
__global__ void stage_window(const T* __restrict__ bf, int Rr, int Rc, int b0, int np,
                             int R0, int C0, int h, int w, int Nr, int Nc,
                             const double* __restrict__ mean, float* __restrict__ out) {
    const size_t n = (size_t)np * Nr * Nc;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % Nc);
        const int r = (int)((i / Nc) % Nr);
        const int p = (int)(i / ((size_t)Nr * Nc));
        float v = 0.0f;
        if (r < h && c < w) {
            const int b = b0 + p;
            v = (float)((double)bf[((size_t)b * Rr + (R0 + r)) * Rc + (C0 + c)] - mean[b]);
        }
        out[i] = v;
    }
}

// Window mean of every BF pixel: one block per pixel, fixed-order sums.
template <typename T>
__global__ void window_mean(const T* __restrict__ bf, int Rr, int Rc, int R0, int C0, int h,
                            int w, double* __restrict__ mean) {
    __shared__ double red[256];
    const int b = blockIdx.x;
    double s = 0.0;
    const size_t n = (size_t)h * w;
    for (size_t i = threadIdx.x; i < n; i += 256) {
        const int r = (int)(i / w), c = (int)(i % w);
        s += (double)bf[((size_t)b * Rr + (R0 + r)) * Rc + (C0 + c)];
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int st = 128; st > 0; st >>= 1) {
        if (threadIdx.x < st) red[threadIdx.x] += red[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) mean[b] = red[0] / (double)n;
}

// Centre of mass over the BF pixels of every pattern: out (P, 2) detector px.
template <typename T>
__global__ void bf_com(const T* __restrict__ bf, int B, long long P,
                       const double* __restrict__ kpx, double* __restrict__ out) {
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    double s = 0.0, sr = 0.0, sc = 0.0;
    for (int b = 0; b < B; ++b) {
        const double v = (double)bf[(size_t)b * P + p];
        s += v;
        sr += v * kpx[2 * b];
        sc += v * kpx[2 * b + 1];
    }
    const double tot = s > 0 ? s : 1.0;
    out[2 * p] = sr / tot;
    out[2 * p + 1] = sc / tot;
}

// Gather BF pixels of device-resident counts: counts (rows*Rc, K) → bf (B, Rr*Rc) slab.
template <typename T>
__global__ void gather_bf(const T* __restrict__ counts, long long npos, long long pos0,
                          int K, const int* __restrict__ idx, int B, long long P,
                          T* __restrict__ bf) {
    const long long n = npos * (long long)B;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long p = i % npos;
        const int b = (int)(i / npos);
        bf[(size_t)b * P + pos0 + p] = counts[(size_t)(pos0 + p) * K + idx[b]];
    }
}

// Peak fp32 FMA rate probe (benchmark ceiling).
__global__ void fma_peak(float* out, int iters, float a, float b) {
    float x0 = threadIdx.x * 1e-3f, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
    float x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
    for (int i = 0; i < iters; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
