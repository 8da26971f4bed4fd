# Device run (results under $OUT): the CUDA parity tests, the kernel-variant timings,
# `livessb benchmark` (SPEC §4 workload + an 8×8 map), live-steering preview latency, the
# live-region drag and crystal mode's cost. Usage (device tool):
# bash benchmarks/device_run.sh COMMIT [RUNS]
# The device hands back only a few files of $OUT: every record is packed into
# $OUT/device_run.tgz at the end (unpack with `tar xzf device_run.tgz` where it lands).
# The widget benchmarks need anywidget & co.: carry them as wheels in .whl/ (see
# /work/.library/device/README.md); they are installed into /tmp/site when present. Carry
# python/livessb/static too (the git-ignored widget bundle).
set -u
export PYTHONPATH=python PYTHONUNBUFFERED=1 LIVESSB_COMMIT=${1:-unknown}
RUNS=${2:-6}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl && export PYTHONPATH=python:/tmp/site
fi
# Parity: the engine, the features on top of it (errors, maps, refine, sampling, memory) and
# the preprocessing; what each measured goes to parity_measured.jsonl.
LIVESSB_PARITY_LOG="$OUT/parity_measured.jsonl" python3 -m pytest -q -p no:cacheprovider \
    tests/test_cuda_parity.py tests/test_cuda_features.py tests/test_cuda_preprocess.py \
    tests/test_cuda_virtual.py tests/test_cuda_effective.py tests/test_cuda_patterns.py \
    tests/test_cuda_load_scan.py tests/test_cuda_alias.py tests/test_cuda_scan_window.py \
    tests/test_cuda_lattice.py 2>&1 \
    | tail -15 | tee "$OUT/parity.log"
python3 benchmarks/kernel_variants.py "$OUT/variants.json" 512 2>&1 | tail -4
python3 -m livessb.bench --json "$OUT/bench.json" --runs "$RUNS" --map 8 > "$OUT/bench.log" 2>&1
tail -14 "$OUT/bench.log" | cut -c1-600
python3 benchmarks/preview_latency.py --device cuda --json "$OUT/preview.json" 2>&1 | tail -3
python3 benchmarks/live_region_latency.py --device cuda --json "$OUT/live_region.json" 2>&1 \
    | tail -3
python3 benchmarks/virtual_latency.py "$OUT/virtual.json" 2>&1 | tail -1
python3 benchmarks/lattice_timing.py "$OUT/lattice.json" cuda 3 2>&1 | tail -3
# one file to hand back (the device returns a few files of $OUT, not a dozen)
(cd "$OUT" && tar czf device_run.tgz --exclude=device_run.tgz ./* \
    && find . -maxdepth 1 -type f ! -name device_run.tgz -delete)
