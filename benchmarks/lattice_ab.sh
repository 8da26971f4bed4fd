# Device run: crystal mode's cost (benchmarks/lattice_timing.py, the demo's 16² and 32²
# regions) interleaved between the package code in OLD (a folder holding an earlier
# commit's python/, e.g. from `git archive COMMIT python | tar -x -C OLD`, carried) and this
# checkout's, ROUNDS rounds of old then new in one lease (a lease's speed drifts by more than
# the changes measured). Usage (device tool): bash benchmarks/lattice_ab.sh OLD [RUNS] [ROUNDS]
# -> $OUT/lattice_{old,new}_R.json. SITE: carried wheels' packages (/tmp/site), after the code.
set -u
OLD=$1 RUNS=${2:-3} ROUNDS=${3:-2}
export PYTHONUNBUFFERED=1
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    src=python; [ "$v" = old ] && src="$OLD/python"
    PYTHONPATH="$src${SITE:+:$SITE}" python3 benchmarks/lattice_timing.py \
        "$OUT/lattice_${v}_$r.json" cuda "$RUNS" 2>&1 | tail -2 | sed "s/^/$v $r /"
  done
done
