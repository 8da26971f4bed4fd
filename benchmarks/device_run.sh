# Device run: the CUDA parity tests, the kernel-variant timings, then `livessb benchmark`
# (results under $OUT). Usage (device tool): bash benchmarks/device_run.sh COMMIT
export PYTHONPATH=python
python3 -m pytest -q tests/test_cuda_parity.py 2>&1 | tail -15 | tee "$OUT/parity.log"
python3 benchmarks/kernel_variants.py "$OUT/variants.json" 512 2>&1 | tail -4
LIVESSB_COMMIT=${1:-unknown} python3 -m livessb.bench --json "$OUT/bench.json" --runs 6 \
    > "$OUT/bench.log" 2>&1
tail -8 "$OUT/bench.log" | cut -c1-600
