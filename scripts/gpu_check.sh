#!/usr/bin/env bash
# Run on a CUDA machine that reaches no package registry (the project's lent H200), from the
# repo root, with the wheels prepared by `../shared/tools/gpu-wheels pytest-xdist "setuptools>=77" wheel`
# carried in .whl/.
#   scripts/gpu_check.sh doctor warmup tests lessons bench
# Phases: warmup (compile every kernel specialisation into the on-disk kernel cache, so that
# the later phases only load them; $WARMUP_JOBS processes, default one per core), lessons-cold
# (`make lessons` from a new empty cache: the solved lessons while warmup compiles in the
# background), first-run (bench startup's rungs and cold lessons flow, into $OUT/performance.md),
# warmup-coverage (the solved lessons launch nothing that warmup --lessons misses, with this GPU's
# geometry), tests (the whole suite at sglang's sizes, in $TEST_WORKERS processes sharing the GPU,
# default 8, when pytest-xdist is installed), tests-quick (-m "not slow"), lessons,
# bench (swap-in, spec, canary, the split of a public call, graph), startup (bench startup alone,
# with its cold and warm compile per family in fresh processes: minutes, the speculative family's
# cold compile alone about 2).
# (compute-sanitizer memcheck and racecheck run inside the tests: the tests marked `gpu`.)
# The kernel cache lives in $NUMBA_CACHE_DIR (default ~/.cache/hisparse-numba/kernels).
# Logs go to $OUT (or build/gpu) as one file per phase; the last lines of each are printed.
set -uo pipefail
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD JUPYTER_PATH=/tmp/site/share/jupyter   # nbconvert's templates too
  # pip's isolated builds (the packaging test builds a wheel) take setuptools and wheel from .whl too
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl
fi
export HISPARSE_NUMBA_BACKEND=cuda PYTHONUNBUFFERED=1 MPLBACKEND=Agg
status=0
run() {  # run NAME CMD...: tee the log, remember failures
  local name=$1; shift
  echo "=== $name: $*" | tee -a "$OUT/$name.txt"
  local t0=$SECONDS
  "$@" >>"$OUT/$name.txt" 2>&1; local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$OUT/$name.txt"
  tail -n 25 "$OUT/$name.txt" | grep -v '^===' ; [ $rc -eq 0 ] || status=1
}
workers() {  # the suite is mostly host-bound launches and NumPy references: spread it over processes
  python3 -c "import xdist" 2>/dev/null && echo "-n ${TEST_WORKERS:-8}"
}
for phase in "$@"; do
  case $phase in
    doctor)  run doctor python3 -m hisparse_numba doctor ;;
    warmup)  run warmup python3 -m hisparse_numba.warmup --all ${WARMUP_JOBS:+--jobs $WARMUP_JOBS} ;;
    lessons-cold)  # what `make lessons` does, from an empty kernel cache (later phases keep using it):
      # the warmup compiling in the background while the solved lessons run, each waiting for its own
      export NUMBA_CACHE_DIR=$(mktemp -d -t hisparse-cold-cache.XXXX)
      run lessons-cold python3 -m hisparse_numba lessons run --solved --warmup \
        ${WARMUP_JOBS:+--compile-jobs $WARMUP_JOBS} ${LESSON_JOBS:+--jobs $LESSON_JOBS} --out "$OUT/lessons-solved" ;;
    first-run)  # a learner's cold GPU: each rung's cold/warm compile (fresh processes, in parallel),
      # then the cold lessons flow (first lesson kernel, every lesson done), each from an empty
      # cache; the table also goes to $OUT/performance.md (startup markers); then the rungs with
      # Numba's inlining (HISPARSE_NUMBA_INLINE=numba), for comparison. About 3 minutes on an H100.
      run first-run python3 -m hisparse_numba bench startup --parts rungs,flow --markdown "$OUT/performance.md"
      run first-run-numba-inline env HISPARSE_NUMBA_INLINE=numba python3 -m hisparse_numba bench startup --parts rungs ;;
    warmup-coverage)  # on this GPU, every specialisation the solved lessons launch is one warmup --lessons launches
      run warmup-coverage python3 -m pytest -q -p no:cacheprovider tests/test_warmup_coverage.py ;;
    tests)   run tests python3 -m pytest -q -x -p no:cacheprovider --durations=15 $(workers) tests ;;
    tests-quick) run tests python3 -m pytest -q -x -p no:cacheprovider $(workers) -m "not slow" tests ;;
    lessons) run lessons python3 -m hisparse_numba lessons run --out "$OUT/lessons" ;;
    bench)
      for b in swap-in spec canary; do run bench python3 -m hisparse_numba bench $b; done
      run bench python3 -m hisparse_numba.bench.startup --no-fresh
      run bench python3 -m hisparse_numba.bench.graph ;;
    startup) run startup python3 -m hisparse_numba.bench.startup ;;
    *) echo "unknown phase $phase"; status=2 ;;
  esac
done
exit $status
