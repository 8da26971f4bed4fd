export PYTHONPATH=python
which ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
python3 benchmarks/tools/profile_kernels.py 512 2>&1 | tail -3
$NCU --profile-from-start off --set full --import-source yes -k regex:"vp_eval|vp_derivs|reconstruct_kernel" -o $OUT/prof python3 benchmarks/tools/profile_kernels.py 512 > $OUT/ncu.log 2>&1
tail -5 $OUT/ncu.log
$NCU --import $OUT/prof.ncu-rep --page details > $OUT/details.txt 2>&1
$NCU --import $OUT/prof.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>$OUT/sass.err
ls -la $OUT
