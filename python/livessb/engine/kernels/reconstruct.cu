// SSB and Wiener reconstruction on the (upsampled) frequency grid.
// ---------------------------------------------------------------------------------
// Reconstruction on the f-times finer half plane (Fr, Fc): thread per fine ν.
// mode 0: O = (1/B) Σ_b G conj(Γ)/max(|Γ|, eps); mode 1: O = N / (D + 1e-3 B).
// row_alias: (Fr,) coarse row of each fine row (before the Hermitian fold).
//
// Inside a trotter one disc holds k (outside the soft-edge band the other aperture is
// exactly 0), and conj(Γ) is one phasor, conj(Γ) = σ S a e^{iφ}: on the m side (a_m ≠ 0)
// σ = +1, φ = Ψ/2 - c', S a = S_m a_m; on the p side σ = -1, φ = -(Ψ/2 + c'),
// S a = S_p a_p; and |Γ| = |S a|. So the SSB term is σ sign(Sa) min(1, |Sa|/eps) G e^{iφ}:
// one sincos, one sine and one reciprocal per pair, where the full form takes two
// sincos, two reciprocals and a square root (SFU work). Band pairs take the full form.
// K candidates per thread (a map's tiles, K of them per launch): the walk, the spectra
// loads and each pair's geometry are shared, each candidate has its own Γ and sums (the
// same operations in the same order as K = 1, so each tile's image is that of its own
// launch). cand: K rows of 8; out: K × MF.
// THIN: every candidate has depth 0 (the host checks), so S = sinc(0) = 1 exactly and the
// outside-band pairs skip the sinc (its argument x = X - hd q is exactly ±0 there): the
// same bits as THIN = false, without one sine and one reciprocal per pair and candidate.
// A warp's frequencies (walk.cu slot_bin): one candidate's pairs are light (a sincos and
// a few fmas), so its launch is bound by the spectra's loads and takes strips of 32 bins
// (whole sectors); K > RECON_STRIP_MAX_K candidates per thread share each load and take
// the scoring kernels' compact tiles (less divergence). The masks follow (support_mask).
#ifndef RECON_STRIP_MAX_K
#define RECON_STRIP_MAX_K 1
#endif
#define RECON_TILE_R(K) ((K) <= RECON_STRIP_MAX_K ? 1 : TILE_R)
template <int K, bool THIN>
__global__ void __launch_bounds__(NT, RECON_MINB_FOR(K)) reconstruct_kernel(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc, int Fr, int Fc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const int* __restrict__ row_alias,
    const double* __restrict__ k64, const float4* __restrict__ px,
    const uint4* __restrict__ masks, int mask_stride,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    const double* __restrict__ g_alias, const uint4* __restrict__ g_alias_tab, double pilam,
    float eps, int mode, int n_sum, float2* __restrict__ out) {
    // The scan's own grid leaves out the alias pixels as the fit does; finer grids keep
    // every pair (their frequencies are the aliases themselves).
    // (there the fine bin m is the coarse bin src: the table's rows are the scan's bins)
    const bool own = Fr == Nr && Fc == Nc;
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam),
                               own ? g_alias : nullptr, own ? g_alias_tab : nullptr, B);
    const int Hc = Nc / 2 + 1, Hf = Fc / 2 + 1;
    const int MF = Fr * Hf;
    const int slot = blockIdx.x * NT + threadIdx.x;
    const int m = slot_bin(slot, Fr, Hf, RECON_TILE_R(K));
    double nr, nc;
    const bool active = grid_nu(m, MF, nu_r, nu_c, geo.ka2, nr, nc);
    int src = 0;
    bool cj = false;
    if (m < MF) {  // the coarse spectrum this fine frequency reads (aliased, folded)
        const int ir = m / Hf, ic = m % Hf;
        int R = row_alias[ir], C = ic % Nc;
        cj = C > Nc / 2;
        if (cj) { R = (Nr - R) % Nr; C = Nc - C; }
        src = R * Hc + C;
    }
    Cand cc[K];
    float hp[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        make_cand(cand + 8 * k, nr, nc, pilam, cc[k]);
        hp[k] = (float)remainder(cand_phases(cand + 8 * k, nr, nc, pilam).half_psi, 2.0 * PI_D);
    }
    const float inv_eps = 1.0f / eps;
    const float qr = __fmul_rn(geo.twopilam, (float)nr), qc = __fmul_rn(geo.twopilam, (float)nc);
    double aR[K], aI[K], aD[K];
    float fr_[K], fi_[K], fd_[K];
#pragma unroll
    for (int k = 0; k < K; ++k) { aR[k] = aI[k] = aD[k] = 0.0; fr_[k] = fi_[k] = fd_[k] = 0.f; }
    const uint4* wmask = masks + (size_t)(slot >> 5) * mask_stride;  // this warp's row
    walk_pairs<true, false>(G, M, src, active, 0, B, k64, px, wmask, nr, nc, geo, NoPixel(),
        [&](float kr, float kc, float2 g, float am, float ap, bool) {
            if (cj) g.y = -g.y;
            const float q = __fmaf_rn(kr, qr, __fmul_rn(kc, qc));
            if (am != 0.f && ap != 0.f) {  // the soft-edge band: both discs, full form
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    float pr, pi, u, v;
                    PairOut po;
                    gamma_conj(kr, kc, q, am, ap, cc[k], pr, pi, u, v, po);
                    if (mode == 0) {
                        const float inv = fminf(rsqrtf(u * u + v * v), inv_eps);
                        fr_[k] += (pr * g.x - pi * g.y) * inv;
                        fi_[k] += (pr * g.y + pi * g.x) * inv;
                    } else {
                        acc_nd(pr, pi, u, v, g, fr_[k], fi_[k], fd_[k]);
                    }
                }
                return;
            }
            const bool side_m = am != 0.f;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const float cpv = __fmaf_rn(kr, cc[k].vr, __fmul_rn(kc, cc[k].vc));
                float sn, cs;  // e^{iφ}; -(Ψ/2 + c') as (-Ψ/2) - c': the same rounding
                fast_sincos(__fsub_rn(side_m ? hp[k] : -hp[k], cpv), &sn, &cs);
                float sa = side_m ? am : ap;  // S a, S = 1 at depth 0
                if (!THIN) {
                    const float x = __fmaf_rn(-cc[k].hd, q, side_m ? cc[k].Xm : cc[k].Xp);
                    sa = __fmul_rn(sinc_f(x, fast_sin(x)), sa);
                }
                const float ssa = side_m ? sa : -sa;  // σ S a
                float f;  // the term's real factor: σ sign(Sa) min(1, |Sa|/eps), or σ S a
                if (mode == 0) f = copysignf(fminf(fabsf(ssa) * inv_eps, 1.0f), ssa);
                else { f = ssa; fd_[k] = __fmaf_rn(sa, sa, fd_[k]); }
                const float hr = __fmaf_rn(cs, g.x, -__fmul_rn(sn, g.y));
                const float hi = __fmaf_rn(cs, g.y, __fmul_rn(sn, g.x));
                fr_[k] = __fmaf_rn(f, hr, fr_[k]);
                fi_[k] = __fmaf_rn(f, hi, fi_[k]);
            }
        },
        [&]() {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                aR[k] += fr_[k]; aI[k] += fi_[k]; aD[k] += fd_[k];
                fr_[k] = fi_[k] = fd_[k] = 0.f;
            }
        });
    if (m < MF) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            float2 o;
            // n_sum: the pixels the masks keep (B, or the count of a BF-pixel subset)
            if (mode == 0) { o.x = (float)(aR[k] / n_sum); o.y = (float)(aI[k] / n_sum); }
            else {
                const double den = aD[k] + 1e-3 * n_sum;
                o.x = (float)(aR[k] / den); o.y = (float)(aI[k] / den);
            }
            out[(size_t)k * MF + m] = o;
        }
    }
}
