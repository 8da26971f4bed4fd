# Device run: an interleaved A/B between the package code in OLD (a folder holding an earlier
# commit's python/, e.g. from `git archive COMMIT python | tar -x -C OLD`, carried) and this
# checkout's, ROUNDS rounds of old then new, RUNS runs each, in one lease (a lease's speed
# drifts by more than the changes measured). WHAT: `bench` (the default: `livessb.bench`, the
# SPEC workload and a map -> $OUT/ab_{old,new}_R.json) or `lattice` (crystal mode's cost,
# benchmarks/lattice_timing.py -> $OUT/lattice_{old,new}_R.json).
# Usage (device tool): bash benchmarks/ab_bench.sh OLD [RUNS] [ROUNDS] [WHAT]
# SITE: a folder of carried wheels' packages (/tmp/site) to put after the package code.
set -u
OLD=$1 RUNS=${2:-3} ROUNDS=${3:-2} WHAT=${4:-bench}
export PYTHONUNBUFFERED=1
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    src=python; [ "$v" = old ] && src="$OLD/python"
    export PYTHONPATH="$src${SITE:+:$SITE}"
    if [ "$WHAT" = lattice ]; then
      python3 benchmarks/lattice_timing.py "$OUT/lattice_${v}_$r.json" cuda "$RUNS" 2>&1 \
          | tail -2 | sed "s/^/$v $r /"
      continue
    fi
    python3 -m livessb.bench --no-parity --runs "$RUNS" --map 8 \
        --json "$OUT/ab_${v}_$r.json" > "/tmp/ab_${v}_$r.log" 2>&1 || tail -5 "/tmp/ab_${v}_$r.log"
    python3 - "$OUT/ab_${v}_$r.json" "$v $r" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["times_s"]
print(sys.argv[2], {k: round(v["warm_median"] * 1e3, 1) for k, v in t.items()})
PY
  done
done
