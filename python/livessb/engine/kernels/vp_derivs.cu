// Exact loss, gradient and Hessian of the VP objective.
// ---------------------------------------------------------------------------------
#define NQ 28
#define N_PER_NU 8  // per-ν terms kept: loss, 6 gradient terms, the C10 curvature
// Derivative sums per frequency (float within a tile, float64 in shared memory).
// The tilt factors x_τ = πΔ·1e-3·ν and ∂²x/∂τ∂Δ = π·1e-3·ν are per-ν constants and are
// applied after the b-sums, so only these 55 sums run over pairs (T = S'·a, D = T·x_Δ,
// U = S''·a, UD = U·x_Δ, UDD = UD·x_Δ; complex ones as (re, im)).
#define NA 55
#define IX(i) (2 * (i))
#define INT_ 6
#define IND 8
#define IY(n) (10 + 2 * (n))
#define IZ12 22
#define IZ22 24
#define IWT(i) (26 + 2 * (i))
#define IWD(i) (32 + 2 * (i))
#define IVTT 38
#define IVTD 40
#define IVDD 42
#define IR0 44
#define IQT 45
#define IQD 46
#define IRT 47
#define IRD 48
#define IQTT 49
#define IQTD 50
#define IQDD 51
#define IRTT 52
#define IRTD 53
#define IRDD 54

// Per-ν loss, gradient and Hessian terms from N, D and the NA derivative sums (sh, stride NT).
__device__ void derivs_epilogue(const double* sh, const double* dN, bool active, int m, int Hc,
                                int Nc, double nr, double nc, const double* cd, double pilam,
                                double* out) {
#define SA(j) sh[(j) * NT + threadIdx.x]
    const double C12 = cd[1], c2 = cd[2], s2 = cd[3], dep = cd[6];
    const double Dn = nr * nr - nc * nc, Xn = 2.0 * nr * nc, nn = nr * nr + nc * nc;
    const double P0 = pilam * nn, P1 = pilam * (c2 * Dn + s2 * Xn);
    const double P12 = pilam * (-2.0 * s2 * Dn + 2.0 * c2 * Xn);
    const double P2 = C12 * P12, P22 = pilam * C12 * (-4.0 * c2 * Dn - 4.0 * s2 * Xn);
#pragma unroll
    for (int j = 0; j < NQ; ++j) out[j] = 0.0;
    if (active) {
        const double w = half_weight(m % Hc, Nc);
        const double Nre = dN[0], Nim = dN[1], D = dN[2];
        out[0] = loss_term(Nre, Nim, D, w);
        if (D > 1e-12) {
            const double iu = 1.0 / D, idw = iu * w;
            const double n2 = Nre * Nre + Nim * Nim;
            const double half_psi = pilam * (cd[0] * nn + C12 * c2 * Dn + C12 * s2 * Xn);
            const double cosP = cos(2.0 * half_psi), sinP = sin(2.0 * half_psi);
            const double Pd[3] = {P0, P1, P2};
            const double xt[2] = {PI_D * dep * MRAD_D * nr, PI_D * dep * MRAD_D * nc};
            const double xtd[2] = {PI_D * MRAD_D * nr, PI_D * MRAD_D * nc};
            const double Qa[3] = {xt[0] * SA(IQT), xt[1] * SA(IQT), SA(IQD)};
            const double Ra[3] = {xt[0] * SA(IRT), xt[1] * SA(IRT), SA(IRD)};
            double dNr[6], dNi[6], dD[6];
            for (int i = 0; i < 3; ++i) {  // N_i = i X_i
                dNr[i] = -SA(IX(i) + 1); dNi[i] = SA(IX(i));
                dD[i] = 4.0 * sinP * Pd[i] * SA(IR0);
                dD[3 + i] = 2.0 * Qa[i] - 2.0 * cosP * Ra[i];
            }
            dNr[3] = xt[0] * SA(INT_); dNi[3] = xt[0] * SA(INT_ + 1);
            dNr[4] = xt[1] * SA(INT_); dNi[4] = xt[1] * SA(INT_ + 1);
            dNr[5] = SA(IND); dNi[5] = SA(IND + 1);
            double re_n_dn[6];
            for (int i = 0; i < 6; ++i) {
                re_n_dn[i] = Nre * dNr[i] + Nim * dNi[i];
                out[1 + i] = 2.0 * re_n_dn[i] * idw - n2 * dD[i] * idw * iu;
            }
            int n = 0, ny = 0;
            for (int i = 0; i < 6; ++i) {
                for (int j = i; j < 6; ++j, ++n) {
                    double d2r, d2i, d2D;
                    if (j < 3) {
                        d2r = -SA(IY(ny)); d2i = -SA(IY(ny) + 1);
                        double pij = 0.0;
                        if (i == 1 && j == 2) { d2r -= SA(IZ12 + 1); d2i += SA(IZ12); pij = P12; }
                        if (i == 2 && j == 2) { d2r -= SA(IZ22 + 1); d2i += SA(IZ22); pij = P22; }
                        d2D = (8.0 * cosP * Pd[i] * Pd[j] + 4.0 * sinP * pij) * SA(IR0);
                        ++ny;
                    } else if (i < 3) {
                        const int a = j - 3;
                        double wr, wi;
                        if (a < 2) { wr = xt[a] * SA(IWT(i)); wi = xt[a] * SA(IWT(i) + 1); }
                        else { wr = SA(IWD(i)); wi = SA(IWD(i) + 1); }
                        d2r = -wi; d2i = wr;
                        d2D = 4.0 * sinP * Pd[i] * Ra[a];
                    } else {
                        const int a = i - 3, bq = j - 3;
                        double Qab, Rab;
                        if (bq < 2) {
                            const double f = xt[a] * xt[bq];
                            d2r = f * SA(IVTT); d2i = f * SA(IVTT + 1);
                            Qab = f * SA(IQTT); Rab = f * SA(IRTT);
                        } else if (a < 2) {
                            d2r = xt[a] * SA(IVTD) + xtd[a] * SA(INT_);
                            d2i = xt[a] * SA(IVTD + 1) + xtd[a] * SA(INT_ + 1);
                            Qab = xt[a] * SA(IQTD) + xtd[a] * SA(IQT);
                            Rab = xt[a] * SA(IRTD) + xtd[a] * SA(IRT);
                        } else {
                            d2r = SA(IVDD); d2i = SA(IVDD + 1);
                            Qab = SA(IQDD); Rab = SA(IRDD);
                        }
                        d2D = 2.0 * Qab - 2.0 * cosP * Rab;
                    }
                    const double t = 2.0 * (dNr[j] * dNr[i] + dNi[j] * dNi[i] + Nre * d2r + Nim * d2i)
                                     - 2.0 * re_n_dn[i] * dD[j] * iu - 2.0 * re_n_dn[j] * dD[i] * iu
                                     - n2 * d2D * iu + 2.0 * n2 * dD[i] * dD[j] * iu * iu;
                    out[7 + n] = t * idw;
                }
            }
        }
    }
#undef SA
}


// A thread of the derivative kernels: frequency m = slot_bin(slot) of the half plane
// (slot: blockIdx.y blocks of NT; its warp's row of the lobe masks is slot / 32) and
// trotter lobe of candidate blockIdx.x / 2; grid (2K, nblk). The objective keeps
// one object per lobe (physics/objective.py), so each lobe has its own N, D and sums
// (the epilogue's algebra holds per lobe); ci = blockIdx.x indexes the (candidate, lobe)
// rows of partial and raw, the k-ν lobe (pair_geo's minus) first. The loss terms of the
// two lobes add up on the host. (Per-lobe sums in one thread would double the NA float
// accumulators and their float64 shared copies: registers and occupancy.)
struct DerivThread {
    int M, Hc, slot, m, ci, nblk;
    const double* cd;  // the candidate's row of the table
    double nr, nc;
    bool active;
    bool minus;  // this thread's lobe: the pairs whose k-ν lies in the disc, or the others
    __device__ __forceinline__ DerivThread(int M, int Nc, const double* __restrict__ nu_r,
                                           const double* __restrict__ nu_c,
                                           const double* __restrict__ cand, double ka2)
        : M(M), Hc(Nc / 2 + 1), slot(blockIdx.y * NT + threadIdx.x),
          m(slot_bin(slot, M / Hc, Hc)), ci(blockIdx.x), nblk(gridDim.y),
          cd(cand + 8 * (blockIdx.x >> 1)), minus((blockIdx.x & 1) == 0) {
        active = grid_nu(m, M, nu_r, nu_c, ka2, nr, nc);
    }
};

// The epilogue's per-ν terms from the sums (sh: NA × NT, dN), reduced over the block into
// partial (K, NQ, nblk); sh is reused for the reduction. per_nu (nullptr: not wanted) gets
// each frequency's loss, gradient and C10-curvature terms, (2K, N_PER_NU, M): the misfit
// errors' clusters (fit/robust) and the frequency bands (fit/systematic).
__device__ __forceinline__ void derivs_write(double* sh, const double* dN, const DerivThread& th,
                                             int Nc, double pilam, double* __restrict__ partial,
                                             double* __restrict__ per_nu) {
    double out[NQ];
    derivs_epilogue(sh, dN, th.active, th.m, th.Hc, Nc, th.nr, th.nc, th.cd, pilam, out);
    if (per_nu != nullptr && th.m < th.M) {
        for (int j = 0; j < N_PER_NU; ++j)
            per_nu[((size_t)th.ci * N_PER_NU + j) * th.M + th.m] = out[j];
    }
    for (int j = 0; j < NQ; ++j) sh[j * NT + threadIdx.x] = out[j];
    block_reduce(sh, NQ);
    if (threadIdx.x < NQ)
        partial[((size_t)th.ci * NQ + threadIdx.x) * th.nblk + blockIdx.y] = sh[threadIdx.x * NT];
}

// One disc side's factors of a pair: amplitude-weighted sinc and its Δ-derivatives.
struct Side {
    float A, T, D, U, UD, UDD;  // S·a, S'·a, T·x_Δ, S''·a, U·x_Δ, UD·x_Δ
};

// a += x*y + z*w as two fmas (no separate product and add)
#define FMA2(a, x, y, z, w) a = fmaf((x), (y), fmaf((z), (w), a))

// The derivative sums of one side (sign +1: the disc at +ν, h = E g'; -1: at -ν,
// h = -conj(E) g') into the float partials A; returns the side's factors for cross_sums.
__device__ __forceinline__ Side side_sums(
    float* A, const float h[2], float a, float x, float S, float sn, float cs, float xD,
    float sign, const float fP[3], float fP12, float fP22, const float cdv[3], float cd12,
    float cd22) {
    float S1, S2;
    sinc_d12(x, S, sn, cs, S1, S2);
    Side v;
    v.A = S * a;
    v.T = S1 * a;
    v.D = v.T * xD;
    v.U = S2 * a;
    v.UD = v.U * xD;
    v.UDD = v.UD * xD;
    float P[3];
#pragma unroll
    for (int i = 0; i < 3; ++i) P[i] = sign * fP[i] - cdv[i];
    // Σ coefficient·X·h for X = A, T, D: the products X·h once, then 2 fmas each
    const float HA[2] = {v.A * h[0], v.A * h[1]};
    const float HT[2] = {v.T * h[0], v.T * h[1]};
    const float HD[2] = {v.D * h[0], v.D * h[1]};
#define ACC1(j, c, H) { A[(j)] = fmaf((c), (H)[0], A[(j)]); A[(j) + 1] = fmaf((c), (H)[1], A[(j) + 1]); }
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        ACC1(IX(i), P[i], HA);
        ACC1(IWT(i), P[i], HT);
        ACC1(IWD(i), P[i], HD);
    }
    ACC1(INT_, 1.f, HT);
    ACC1(IND, 1.f, HD);
    int n = 0;
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = i; j < 3; ++j, ++n) ACC1(IY(n), P[i] * P[j], HA);
    ACC1(IZ12, sign * fP12 - cd12, HA);
    ACC1(IZ22, sign * fP22 - cd22, HA);
    ACC1(IVTT, v.U, h);
    ACC1(IVTD, v.UD, h);
    ACC1(IVDD, v.UDD, h);
#undef ACC1
    A[IQT] = fmaf(v.A, v.T, A[IQT]);
    A[IQD] = fmaf(v.A, v.D, A[IQD]);
    FMA2(A[IQTT], v.T, v.T, v.A, v.U);
    FMA2(A[IQTD], v.T, v.D, v.A, v.UD);
    FMA2(A[IQDD], v.D, v.D, v.A, v.UDD);
    return v;
}

// The sums that couple the two sides (zero unless both apertures are nonzero).
__device__ __forceinline__ void cross_sums(float* A, const Side& m, const Side& p) {
    A[IR0] = fmaf(m.A, p.A, A[IR0]);
    FMA2(A[IRT], m.T, p.A, m.A, p.T);
    FMA2(A[IRD], m.D, p.A, m.A, p.D);
    FMA2(A[IRTT], m.U, p.A, 2.f * m.T, p.T); A[IRTT] = fmaf(m.A, p.U, A[IRTT]);
    FMA2(A[IRTD], m.UD, p.A, m.T, p.D); FMA2(A[IRTD], m.D, p.T, m.A, p.UD);
    FMA2(A[IRDD], m.UDD, p.A, 2.f * m.D, p.D); A[IRDD] = fmaf(m.A, p.UDD, A[IRDD]);
}
#undef FMA2

// Loss, gradient and Hessian terms, one (candidate, lobe) per blockIdx.x (DerivThread).
// partial: (2K, 28, nblk): [loss, grad(6), hess(21 in PAIRS order)] (sums before -1/E).
__global__ void __launch_bounds__(NT, DERIV_MINB) vp_derivs(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float4* __restrict__ px,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    const double* __restrict__ g_alias, const uint4* __restrict__ g_alias_tab,
    double pilam, double* __restrict__ partial, int bsplit, double* __restrict__ raw,
    const uint4* __restrict__ masks, int mask_stride, double* __restrict__ per_nu) {
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam), g_alias,
                               g_alias_tab, B);
    extern __shared__ double sh[];  // NA * NT float64 accumulators, then the reduction
    const int BL = blockIdx.z * bsplit, BH = min(B, BL + bsplit);
    const DerivThread th(M, Nc, nu_r, nu_c, cand, geo.ka2);
    const int m = th.m;
    const double* cd = th.cd;
    const double nr = th.nr, nc = th.nc;
    Cand cc;
    make_cand(cd, nr, nc, pilam, cc);
    const double C12 = cd[1], c2 = cd[2], s2 = cd[3];
    const double tr = cd[4], tcc = cd[5];
    const double Dn = nr * nr - nc * nc, Xn = 2.0 * nr * nc, nn = nr * nr + nc * nc;
    const double P0 = pilam * nn, P1 = pilam * (c2 * Dn + s2 * Xn);
    const double P12 = pilam * (-2.0 * s2 * Dn + 2.0 * c2 * Xn);
    const double P2 = C12 * P12, P22 = pilam * C12 * (-4.0 * c2 * Dn - 4.0 * s2 * Xn);
    const double tp = 2.0 * PI_D * (nr * tr + nc * tcc);
    // opaque(): keep these floats in registers; otherwise the compiler re-derives them
    // from their float64 sources inside the pixel loop (conversions on every pair).
    const float fP[3] = {opaque((float)P0), opaque((float)P1), opaque((float)P2)};
    const float fP12 = opaque((float)P12), fP22 = opaque((float)P22);
    const float Bm = opaque((float)(pilam * nn + tp)), Bp = opaque((float)(-pilam * nn + tp));
    const float fC12 = opaque((float)C12), fc2 = opaque((float)c2), fs2 = opaque((float)s2);
    const float qr = opaque(__fmul_rn(geo.twopilam, (float)nr));
    const float qc = opaque(__fmul_rn(geo.twopilam, (float)nc));

    float fN[3] = {0.f, 0.f, 0.f};
    double dN[3] = {0.0, 0.0, 0.0};
    float A[NA];
#pragma unroll
    for (int j = 0; j < NA; ++j) { A[j] = 0.f; sh[j * NT + threadIdx.x] = 0.0; }

    // Masked walk: the lobe masks (support_mask, lobe 0 rows then lobe 1 rows, per
    // rotation) list the pixels that may be in this lobe for some lane of the warp; a
    // lobe is sparse where |ν| is large, and a dense walk would step every pixel.
    const size_t rows = (size_t)gridDim.y * (NT / 32);
    const uint4* wmask = masks + ((th.minus ? 0 : rows) + (th.slot >> 5)) * mask_stride;
    walk_pairs<true, false>(G, M, m, th.active, BL, BH, k64, px, wmask, nr, nc, geo, NoPixel(),
        [&](float kr, float kc, float2 g, float am, float ap, bool minus) {
            if (minus != th.minus) return;  // the other lobe's thread sums this pair
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
            // Each disc side's sums only where its aperture is nonzero: inside a trotter
            // exactly one hard disc holds k, so the other side is zero except in the
            // soft-edge band (skipping it only drops exact zeros: same sums). Every lane
            // runs one side_sums body on the side its apertures select (+ν first, as
            // ever): with a body per side, a warp whose lanes sit in different discs
            // ran both. The second side and the cross terms only in the band.
            if (ap != 0.f || am != 0.f) {
                const bool pf = ap != 0.f;
                const float h1[2] = {pf ? hp[0] : hm[0], pf ? hp[1] : hm[1]};
                const Side v1 = side_sums(A, h1, pf ? ap : am, pf ? po.xp : po.xm,
                                          pf ? po.Sp : po.Sm, pf ? po.sp : po.sm,
                                          pf ? po.cp : po.cm, 0.5f * ((pf ? Bp : Bm) - e1),
                                          pf ? -1.f : 1.f, fP, fP12, fP22, cdv, cd12, cd22);
                if (pf && am != 0.f) {
                    const Side vm = side_sums(A, hm, am, po.xm, po.Sm, po.sm, po.cm,
                                              0.5f * (Bm - e1), 1.f, fP, fP12, fP22, cdv, cd12,
                                              cd22);
                    cross_sums(A, vm, v1);
                }
            }
        },
        [&]() {
            dN[0] += fN[0]; dN[1] += fN[1]; dN[2] += fN[2];
            fN[0] = fN[1] = fN[2] = 0.f;
#pragma unroll
            for (int j = 0; j < NA; ++j) { sh[j * NT + threadIdx.x] += (double)A[j]; A[j] = 0.f; }
        });
    if (gridDim.z > 1) {  // raw (2K, nsplit, 3 + NA, M) sums; vp_derivs_finish combines them
        if (m < M) {
            const size_t base = ((size_t)th.ci * gridDim.z + blockIdx.z) * (3 + NA);
            for (int q = 0; q < 3; ++q) raw[(base + q) * M + m] = dN[q];
            for (int j = 0; j < NA; ++j) raw[(base + 3 + j) * M + m] = sh[j * NT + threadIdx.x];
        }
        return;
    }
    derivs_write(sh, dN, th, Nc, pilam, partial, per_nu);
}

// Combine the b-split raw sums of vp_derivs in split order, then the epilogue; grid (2K, nblk).
__global__ void __launch_bounds__(NT) vp_derivs_finish(
    const double* __restrict__ raw, int nsplit, int M, int Nc, const double* __restrict__ nu_r,
    const double* __restrict__ nu_c, const double* __restrict__ cand, double ka2, double pilam,
    double* __restrict__ partial, double* __restrict__ per_nu) {
    extern __shared__ double sh[];  // NA * NT
    const DerivThread th(M, Nc, nu_r, nu_c, cand, ka2);
    const int m = th.m;
    double dN[3] = {0.0, 0.0, 0.0};
    for (int j = 0; j < NA; ++j) sh[j * NT + threadIdx.x] = 0.0;
    if (m < M) {
        for (int z = 0; z < nsplit; ++z) {
            const size_t base = ((size_t)th.ci * nsplit + z) * (3 + NA);
            for (int q = 0; q < 3; ++q) dN[q] += raw[(base + q) * M + m];
            for (int j = 0; j < NA; ++j) sh[j * NT + threadIdx.x] += raw[(base + 3 + j) * M + m];
        }
    }
    derivs_write(sh, dN, th, Nc, pilam, partial, per_nu);
}
