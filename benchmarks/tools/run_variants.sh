# Device run: CUDA parity tests, then the kernel-variant timings (results under $OUT).
export PYTHONPATH=python
python3 -m pytest -q -x tests/test_cuda_parity.py -k "not slow" 2>&1 | tail -3 | tee $OUT/parity.log
python3 benchmarks/tools/kernel_variants.py $OUT/variants.json 512 2>&1 | tail -20
