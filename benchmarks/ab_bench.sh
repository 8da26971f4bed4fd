# Device run: an interleaved A/B of `livessb.bench` between the package code in OLD (a folder
# holding an earlier commit's python/, e.g. from `git archive COMMIT python | tar -x -C OLD`,
# carried) and this checkout's, ROUNDS rounds of old then new, RUNS runs each, in one lease.
# Usage (device tool): bash benchmarks/ab_bench.sh OLD [RUNS] [ROUNDS]  -> $OUT/ab_{old,new}_R.json
# SITE: a folder of carried wheels' packages (/tmp/site) to put after the package code.
set -u
OLD=$1 RUNS=${2:-3} ROUNDS=${3:-2}
export PYTHONUNBUFFERED=1
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    src=python; [ "$v" = old ] && src="$OLD/python"
    PYTHONPATH="$src${SITE:+:$SITE}" python3 -m livessb.bench --no-parity --runs "$RUNS" --map 8 \
        --json "$OUT/ab_${v}_$r.json" > "/tmp/ab_${v}_$r.log" 2>&1 || tail -5 "/tmp/ab_${v}_$r.log"
    python3 - "$OUT/ab_${v}_$r.json" "$v $r" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["times_s"]
print(sys.argv[2], {k: round(v["warm_median"] * 1e3, 1) for k, v in t.items()})
PY
  done
done
