// Scoring: the VP loss of candidates (recurrent phases), and the θ grid in one launch.
// ---------------------------------------------------------------------------------
// VP loss terms for KC candidates per thread; grid (ceil(Kpad/KC), ceil(M/NT), nsplit).
// partial: (Kpad, nblk) doubles, Σ_ν∈block w |N|^2 / D.
// ROT (no split): one candidate at R rotations, KC of them per thread (rotations
// KC·blockIdx.x + j), the G loads and the pair geometry shared. The trotter pairs (pixel
// sets, apertures) are the held rotation's, from its geometry rows (k64, px), and so is
// the sideband energy (the engine's, not summed here); the phases are those of each
// pair's k turned by θ_r - θ₀ (turn[2r], turn[2r + 1] = its cos, sin): pixels that switch
// lobes as θ moves carry their own noise, and L(θ) would step with it. The k-linear
// phases c' = k·v and y ∝ k·ν take (R k)·v = k·(Rᵀv): each rotation turns its v and ν
// once (float64) instead of every pixel's k, and its phasors step along the detector rows
// as a candidate's do (the recurrent form, H100: 25 rotations 65.6 -> 56.8 ms). At θ₀
// (cos 1, sin 0 turn nothing, exactly) a rotation's sums are those of the candidate
// scored by evaluate in a group, bit for bit (unsplit windows). R is padded to a
// multiple of KC.
//
// Recurrent form (SPEC "why the fast path can be fast"): for fixed ν and candidate, c'
// and x_m are linear in k, so along a detector row (k += dk per pixel) the phasors
// z = E e^{-ic'} (E = e^{iΨ/2}, a per-ν constant) and e^{ix_m} advance by one complex
// multiplication each; an exact sincos re-anchors them at the pixels flagged in px.w
// (row starts, every ANCHOR_PIXELS within a row, tile starts) and after pixels the
// warp skipped, so the drift stays ~1e-6 rad, below the float32 rounding of the
// arguments themselves. With H = z G, α = S_m a_m, β = S_p a_p: conj(Γ) G = (α - e^{-iΨ}β) H,
// |Γ|² = α² + β² - 2 cos Ψ αβ, and e^{ix_p} = e^{ix_m} e^{i(X_p - X_m)}. The objective
// keeps one object per trotter lobe (physics/objective.py): N and D per lobe, the lobe
// being the hard disc that holds k (pair_geo's minus). Inside a trotter one side's
// aperture is zero except in the soft-edge band, and the side is nearly uniform over a
// warp: each side's terms run only where its aperture is nonzero, α H, α² into the k-ν
// lobe's N₋, D₋ and β H, β² into the k+ν lobe's N₊' = -e^{iΨ} N₊ (|N₊'| = |N₊|: no
// rotation after the sums). A band pair adds its other side to the lobe that holds k:
// -e^{-iΨ} β H (k-ν lobe) or -e^{iΨ} α H (k+ν lobe), with the cross term -2 cos Ψ αβ.
// Constants used at every pixel live in registers, those of the anchors and the band in
// shared memory.
struct Rec {           // per (ν, candidate) constants read at every pixel
    float zr, zi;      // e^{-i dc'} per pixel step
    float er, ei;      // e^{-i dy} per pixel step (dy = hd * dq)
    float hd, Xm, Xp;  // Δ/2, x = X - hd*q
    float cK, sK;      // e^{i(Xp - Xm)}
};
#define NS 6    // sums per candidate: N₋ (re, im), D₋, N₊' (re, im), D₊
#define RARE 5  // shared constants per candidate: vr, vc (c' = kr*vr + kc*vc),
                // hpm (Ψ/2 reduced to [-π, π]), -2 cos Ψ, sin Ψ

// Turned: Rᵀ(x, y) for R = [[c, -s], [s, c]] (the identity, exactly, at c = 1, s = 0).
__device__ __forceinline__ void turn_back(double c, double s, double& x, double& y) {
    const double t = c * x + s * y;
    y = c * y - s * x;
    x = t;
}

// TURN (a θ grid's rotation; tr, ts its cos and sin): v and ν (given as ν itself) turned
// back for the k-linear phases only. Candidates: no turn, not even by the identity.
template <bool TURN>
__device__ __forceinline__ void make_rec(const double* __restrict__ cand, double nr, double nc,
                                         double tr, double ts, double pilam, double dkr,
                                         double dkc, Rec& o,
                                         float* rare) {  // rare[q * NT], q < RARE
    const CandPhases p = cand_phases(cand, nr, nc, pilam);
    double vr = p.vr, vc = p.vc;
    if (TURN) {
        turn_back(tr, ts, vr, vc);
        turn_back(tr, ts, nr, nc);
    }
    double s, c;
    o.hd = (float)p.hd;
    o.Xm = (float)p.Xm;
    o.Xp = (float)p.Xp;
    sincos(dkr * vr + dkc * vc, &s, &c);
    o.zr = (float)c; o.zi = (float)-s;
    sincos(p.hd * 2.0 * pilam * (dkr * nr + dkc * nc), &s, &c);
    o.er = (float)c; o.ei = (float)-s;
    sincos(p.Xp - p.Xm, &s, &c);
    o.cK = (float)c; o.sK = (float)s;
    rare[0] = (float)vr;
    rare[NT] = (float)vc;
    rare[2 * NT] = (float)remainder(p.half_psi, 2.0 * PI_D);
    double sP, cP;
    sincos(2.0 * p.half_psi, &sP, &cP);
    rare[3 * NT] = (float)(-2.0 * cP);
    rare[4 * NT] = (float)sP;
}

// z *= w (complex, components as floats).
__device__ __forceinline__ void rotate(float& zr, float& zi, float wr, float wi) {
    const float r = __fmaf_rn(zr, wr, -__fmul_rn(zi, wi));
    zi = __fmaf_rn(zr, wi, __fmul_rn(zi, wr));
    zr = r;
}

// sinc(x) from a sine carried by the recurrence: its error is absolute (~1e-6), so below
// |x| = 1e-2 the series (1 - x²/6, exact to 1e-10 there) replaces the quotient.
__device__ __forceinline__ float sinc_rec(float x, float s) {
    return fabsf(x) < 1e-2f ? __fmaf_rn(__fmul_rn(x, x), -0.16666667f, 1.0f)
                            : __fmul_rn(s, fast_rcp(x));
}

// A warp's frequencies (walk.cu slot_bin): recurrent candidates and rotations (KC ≥ 2)
// share each pixel's loads and arithmetic is what they cost, so they take the compact
// tiles (less divergence); the direct form of one candidate takes strips of 32 bins,
// whose loads cost fewer sectors (H200: one candidate 7.4 -> 9.3 ms with tiles).
#define EVAL_TILE_R(KC) ((KC) == 1 ? 1 : TILE_R)
template <int KC, bool ROT>
__global__ void __launch_bounds__(NT, EVAL_MINB_FOR(KC)) vp_eval(
    const float2* __restrict__ G, int B, int M, int Nr, int Nc,
    const double* __restrict__ nu_r, const double* __restrict__ nu_c,
    const double* __restrict__ k64, const float4* __restrict__ px,
    const double* __restrict__ cand, double g_ka2, float g_ka, float g_inv_w, float g_twopilam,
    const double* __restrict__ g_alias, const uint4* __restrict__ g_alias_tab,
    double pilam, double* __restrict__ partial, int bsplit, double* __restrict__ raw,
    double* __restrict__ unused, const double* __restrict__ dk,
    const double* __restrict__ turn) {
    // (unused: the θ grid's energy output until its energy became the window's; kept so
    // that the scoring kernels' parameter layout, and with it their registers and code,
    // stay those measured)
    const Geo geo = with_alias(make_geo(g_ka2, g_ka, g_inv_w, g_twopilam), g_alias,
                               g_alias_tab, B);
    // float64 sums (N₋, D₋, N₊', D₊ per candidate, re and im) live in shared memory, not
    // registers (more resident warps); later reused for the block reduction.
    __shared__ double acc[NS * KC * NT];
    __shared__ float rare_all[KC * RARE * NT];
#define ACC_(j, q) acc[(NS * (j) + (q)) * NT + threadIdx.x]
#define RARE_(j, q) rare_all[((j) * RARE + (q)) * NT + threadIdx.x]
    const int BL = blockIdx.z * bsplit, BH = min(B, BL + bsplit);
    const int Hc = Nc / 2 + 1;
    const int m = slot_bin(blockIdx.y * NT + threadIdx.x, Nr, Hc, EVAL_TILE_R(KC));
    const int c0 = blockIdx.x * KC;
    const int nblk = gridDim.y;
    double nr, nc;
    const bool active = grid_nu(m, M, nu_r, nu_c, geo.ka2, nr, nc);
    const double* ctab = ROT ? cand : cand + 8 * c0;
    Rec rc[KC];
    float zr[KC], zi[KC], er[KC], ei[KC];  // E e^{-ic'}, e^{ix_m} at the current pixel
    float fN[KC][NS];
#pragma unroll
    for (int j = 0; j < KC; ++j) {
        // (rotations: v and ν turned back by θ_j - θ₀, exactly nothing at θ₀)
        make_rec<ROT>(ctab + (ROT ? 0 : 8 * j), nr, nc, ROT ? turn[2 * (c0 + j)] : 1.0,
                      ROT ? turn[2 * (c0 + j) + 1] : 0.0, pilam, dk[0], dk[1], rc[j],
                      &RARE_(j, 0));
        zr[j] = 1.f; zi[j] = er[j] = ei[j] = 0.f;
#pragma unroll
        for (int q = 0; q < NS; ++q) { fN[j][q] = 0.0f; ACC_(j, q) = 0.0; }
    }
    const float qr = __fmul_rn(geo.twopilam, (float)nr), qc = __fmul_rn(geo.twopilam, (float)nc);
    // each rotation's 2πλ Rᵀν (k·q of the y phase: the turn on q, not on every k)
    float qrj[ROT ? KC : 1], qcj[ROT ? KC : 1];
#pragma unroll
    for (int j = 0; j < (ROT ? KC : 0); ++j) {
        double fr = nr, fc = nc;
        turn_back(turn[2 * (c0 + j)], turn[2 * (c0 + j) + 1], fr, fc);
        qrj[j] = __fmul_rn(geo.twopilam, (float)fr);
        qcj[j] = __fmul_rn(geo.twopilam, (float)fc);
    }
    auto anchor_one = [&](int j, float kr, float kc, float q) {  // exact phasors at (kr, kc)
        const float cp = __fmaf_rn(kr, RARE_(j, 0), __fmul_rn(kc, RARE_(j, 1)));
        fast_sincos(__fsub_rn(RARE_(j, 2), cp), &zi[j], &zr[j]);
        fast_sincos(__fmaf_rn(-rc[j].hd, q, rc[j].Xm), &ei[j], &er[j]);
    };
    auto anchor = [&](float kr, float kc, float q) {
#pragma unroll
        for (int j = 0; j < KC; ++j)
            anchor_one(j, kr, kc, ROT ? __fmaf_rn(kr, qrj[j], __fmul_rn(kc, qcj[j])) : q);
    };
    bool stale = true;  // the phasors missed a pixel: the next one re-anchors
    // One candidate per thread (single evaluations): the pixel's overhead is not shared,
    // and an exact sincos per in-trotter pair is cheaper than stepping and voting at
    // every pixel (the same sums, anchored everywhere).
    constexpr bool RECUR = KC > 1;
    walk_pairs<false, RECUR>(G, M, m, active, BL, BH, k64, px, nullptr, nr, nc, geo,
        [&](const float4& p, bool in) {
            // Warp-uniform: a pixel outside every lane's trotter is skipped, not stepped.
            if (!__any_sync(0xffffffffu, in)) {
                stale = true;
                return;
            }
            // Step every pixel; an anchor then overwrites with an exact sincos (one path
            // into the same registers: no moves where two paths would meet).
#pragma unroll
            for (int j = 0; j < KC; ++j) {
                rotate(zr[j], zi[j], rc[j].zr, rc[j].zi);
                rotate(er[j], ei[j], rc[j].er, rc[j].ei);
            }
            if (stale || p.w != 0.f) {
                stale = false;
                anchor(p.x, p.y, __fmaf_rn(p.x, qr, __fmul_rn(p.y, qc)));
            }
        },
        [&](float kr, float kc, float2 g, float am, float ap, bool minus) {
            float q[KC];  // each rotation's own k·q (one for candidates)
#pragma unroll
            for (int j = 0; j < KC; ++j) {
                q[j] = ROT ? __fmaf_rn(kr, qrj[j], __fmul_rn(kc, qcj[j]))
                           : __fmaf_rn(kr, qr, __fmul_rn(kc, qc));
                if (!RECUR) anchor_one(j, kr, kc, q[j]);
            }
            float hr[KC], hi[KC], al[KC];
#pragma unroll
            for (int j = 0; j < KC; ++j) {
                hr[j] = __fmaf_rn(zr[j], g.x, -__fmul_rn(zi[j], g.y));
                hi[j] = __fmaf_rn(zr[j], g.y, __fmul_rn(zi[j], g.x));
                al[j] = 0.f;
            }
            if (am != 0.f) {  // α H and α² on the k-ν lobe (a k+ν band pair: below)
#pragma unroll
                for (int j = 0; j < KC; ++j) {
                    const float x = __fmaf_rn(-rc[j].hd, q[j], rc[j].Xm);
                    al[j] = __fmul_rn(sinc_rec(x, ei[j]), am);
                    const float w = minus ? al[j] : 0.f;
                    fN[j][0] = __fmaf_rn(w, hr[j], fN[j][0]);
                    fN[j][1] = __fmaf_rn(w, hi[j], fN[j][1]);
                    fN[j][2] = __fmaf_rn(w, al[j], fN[j][2]);
                }
            }
            if (ap != 0.f) {  // β H and β² on the k+ν lobe (a k-ν band pair: below)
                float be[KC];
#pragma unroll
                for (int j = 0; j < KC; ++j) {
                    const float x = __fmaf_rn(-rc[j].hd, q[j], rc[j].Xp);
                    const float s = __fmaf_rn(ei[j], rc[j].cK, __fmul_rn(er[j], rc[j].sK));
                    be[j] = __fmul_rn(sinc_rec(x, s), ap);
                    const float w = minus ? 0.f : be[j];
                    fN[j][3] = __fmaf_rn(w, hr[j], fN[j][3]);
                    fN[j][4] = __fmaf_rn(w, hi[j], fN[j][4]);
                    fN[j][5] = __fmaf_rn(w, be[j], fN[j][5]);
                }
                if (am != 0.f) {  // both apertures nonzero: the soft-edge band
#pragma unroll
                    for (int j = 0; j < KC; ++j) {
                        // The other side u of the lobe that holds k: -e^{∓iΨ} u H on its N
                        // and u² - 2 cos Ψ αβ on its D (k-ν lobe: u = β, e^{-iΨ}; k+ν: α, e^{iΨ}).
                        const float u = minus ? be[j] : al[j];
                        const float cP = __fmul_rn(-0.5f, RARE_(j, 3));
                        const float sP = minus ? -RARE_(j, 4) : RARE_(j, 4);
                        const float ur = __fmul_rn(u, hr[j]), ui = __fmul_rn(u, hi[j]);
                        const float vr = __fmaf_rn(sP, ui, -__fmul_rn(cP, ur));
                        const float vi = -__fmaf_rn(sP, ur, __fmul_rn(cP, ui));
                        const float t = __fmaf_rn(u, u, __fmul_rn(RARE_(j, 3),
                                                                  __fmul_rn(al[j], be[j])));
                        const float mm = minus ? 1.f : 0.f, mp = minus ? 0.f : 1.f;
                        fN[j][0] = __fmaf_rn(mm, vr, fN[j][0]);
                        fN[j][1] = __fmaf_rn(mm, vi, fN[j][1]);
                        fN[j][2] = __fmaf_rn(mm, t, fN[j][2]);
                        fN[j][3] = __fmaf_rn(mp, vr, fN[j][3]);
                        fN[j][4] = __fmaf_rn(mp, vi, fN[j][4]);
                        fN[j][5] = __fmaf_rn(mp, t, fN[j][5]);
                    }
                }
            }
        },
        [&]() {
#pragma unroll
            for (int j = 0; j < KC; ++j)
#pragma unroll
                for (int q = 0; q < NS; ++q) { ACC_(j, q) += fN[j][q]; fN[j][q] = 0.0f; }
        });
#undef RARE_
    if (gridDim.z > 1) {  // raw (K, nsplit, NS, M) sums; vp_eval_finish combines them
        if (m < M) {
#pragma unroll
            for (int j = 0; j < KC; ++j)
                for (int q = 0; q < NS; ++q)
                    raw[(((size_t)(c0 + j) * gridDim.z + blockIdx.z) * NS + q) * M + m] = ACC_(j, q);
        }
        return;
    }
    const double w = active ? half_weight(m % Hc, Nc) : 0.0;
    double lt[KC];
#pragma unroll
    for (int j = 0; j < KC; ++j)
        lt[j] = active ? loss_term(ACC_(j, 0), ACC_(j, 1), ACC_(j, 2), w)
                         + loss_term(ACC_(j, 3), ACC_(j, 4), ACC_(j, 5), w) : 0.0;
#pragma unroll
    for (int j = 0; j < KC; ++j) acc[j * NT + threadIdx.x] = lt[j];
#undef ACC_
    block_reduce(acc, KC);
    if (threadIdx.x < KC) partial[(size_t)(c0 + threadIdx.x) * nblk + blockIdx.y] = acc[threadIdx.x * NT];
}
#undef RARE

// Combine the b-split raw sums of vp_eval in split order, both lobes; grid (K, nblk).
__global__ void __launch_bounds__(NT) vp_eval_finish(const double* __restrict__ raw, int nsplit,
                                                    int M, int Nc, double* __restrict__ partial) {
    __shared__ double red[NT];
    const int Hc = Nc / 2 + 1;
    const int m = slot_bin(blockIdx.y * NT + threadIdx.x, M / Hc, Hc, 1);  // (any order)
    const int c = blockIdx.x;
    double v = 0.0;
    if (m < M) {
        double d[NS] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        for (int z = 0; z < nsplit; ++z)
            for (int q = 0; q < NS; ++q) d[q] += raw[(((size_t)c * nsplit + z) * NS + q) * M + m];
        const double w = half_weight(m % Hc, Nc);
        v = loss_term(d[0], d[1], d[2], w) + loss_term(d[3], d[4], d[5], w);
    }
    red[threadIdx.x] = v;
    block_reduce(red, 1);
    if (threadIdx.x == 0) partial[(size_t)c * gridDim.y + blockIdx.y] = red[0];
}
#undef NS
