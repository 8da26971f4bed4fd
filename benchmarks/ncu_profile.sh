# Device run: Nsight Compute profile of the hot kernels (one launch each inside a
# profiler range) at the benchmark size; report, details and per-SASS-line counters
# land under $OUT. Usage (device tool): bash benchmarks/ncu_profile.sh [scan [kernel regex]]
export PYTHONPATH=python
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
SCAN=${1:-512}
KERNELS=${2:-"vp_eval|vp_derivs|reconstruct_kernel"}
$NCU --profile-from-start off --set full -k regex:"$KERNELS" \
    -o "$OUT/prof" python3 benchmarks/profile_kernels.py "$SCAN" > "$OUT/ncu.log" 2>&1
tail -5 "$OUT/ncu.log"
$NCU --import "$OUT/prof.ncu-rep" --page details > "$OUT/details.txt" 2>&1
$NCU --import "$OUT/prof.ncu-rep" --page source --print-source sass --csv > "$OUT/sass.csv"
