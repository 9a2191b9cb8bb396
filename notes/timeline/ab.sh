#!/usr/bin/env bash
# One device call (`run` with carry [".whl", ".final"]): `bash notes/timeline/ab.sh COPY... [tests]`.
# Each COPY is a package copy in .final/COPY/hisparse_numba (`git archive <commit> hisparse_numba |
# tar -x -C .final/<name>`); two to four fit one call (four with ROUNDS=2). With "tests" last, the working tree's
# speculative tests run with the simulator off (8 workers, 130-330 s) beside the cold round of
# `bench spec --batches 64 8 1` of every copy (the compiles; its figures do not count); then, with
# nothing else on the GPU, warm rounds one copy at a time, each inside its copy's folder
# (`python -m` puts the current directory first on sys.path). About 150 s for two copies without
# the tests, 60-70 s more a copy. Environment: TEST_FILES (the test files), COLD (the cold round's
# timeout, 300 s), DEADLINE (no warm round starts after it, 500 s), ROUNDS (warm rounds, 3),
# TIMELINE and GRAPH_TL (below).
set -u
TESTS=
COPIES=()
for a in "$@"; do
  if [ "$a" = tests ]; then TESTS=tests; else COPIES+=("$a"); fi
done
DEADLINE=${DEADLINE:-500}     # no warm round starts after this many seconds
COLD=${COLD:-300}             # the cold round's timeout
ROUNDS=${ROUNDS:-3}           # warm rounds of every copy
TEST_FILES=${TEST_FILES:-"tests/hisparse/test_speculative_random.py tests/hisparse/test_spec_state.py tests/hisparse/test_speculative.py
  tests/hisparse/test_spec_victims.py tests/hisparse/test_fuzz_speculative.py tests/hisparse/test_speculative_checks.py
  tests/hisparse/test_spec_hash.py tests/hisparse/test_spec_specialisations.py"}
T0=$SECONDS
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export HISPARSE_NUMBA_BACKEND=cuda PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if [ "$TESTS" = tests ]; then
  ( PYTHONPATH=/tmp/site:$R NUMBA_CACHE_DIR=$R/build/ktests timeout 330 python3 -m pytest -q -p no:cacheprovider -n 8 --durations=4 \
    $TEST_FILES > $OUT/tests.txt 2>&1
    echo "tests rc=$? t=$((SECONDS-T0))" >> $OUT/log.txt ) & PT=$!
fi
run() {
  local name=$1 tmo=$2 tag=$3 root=$R/.final/$1
  ( cd $root && PYTHONPATH=/tmp/site:$root python3 -c "import hisparse_numba as h; print(h.__file__)" > $OUT/$name-$tag.txt 2>&1 && PYTHONPATH=/tmp/site:$root NUMBA_CACHE_DIR=$R/build/k$name timeout $tmo python3 -m hisparse_numba bench spec --batches 64 8 1 --variants spec_1_full >> $OUT/$name-$tag.txt 2>&1 )
  echo "$name $tag rc=$? t=$((SECONDS-T0))" >> $OUT/log.txt
}
# TIMELINE=1: the working tree's stamped kernel (make_tl.py) compiles beside the cold round and
# runs its timeline once the warm rounds are over (tl_run.py waits for $OUT/bench_done)
if [ -n "${TIMELINE:-}" ]; then
  rm -f $OUT/bench_done
  python3 notes/timeline/make_tl.py > $OUT/tl.txt 2>&1
  ( PYTHONPATH=/tmp/site:$R:$R/notes/timeline TL_CYCLES=3 NUMBA_CACHE_DIR=$R/build/ktl timeout $((DEADLINE + 150)) python3 notes/timeline/tl_run.py >> $OUT/tl.txt 2>&1
    echo "tl rc=$? t=$((SECONDS-T0))" >> $OUT/log.txt ) & PTL=$!
fi
# GRAPH_TL=1: for every copy, tl_graph.py (its kernel with the first entry and the last exit
# stamped, replayed from a CUDA graph as graph_us is) compiles beside the cold round and runs once
# the warm rounds are over, one copy at a time; graph-<copy>.txt
GPIDS=()
if [ -n "${GRAPH_TL:-}" ]; then
  rm -f $OUT/bench_done
  for n in "${COPIES[@]}"; do
    d=$R/build/tl_$n; mkdir -p $d; cp notes/timeline/stamps.py notes/timeline/tl_problem.py notes/timeline/tl_graph.py $d/
    TL_SRC=$R/.final/$n/hisparse_numba/hisparse/speculative/kernel.py TL_OUT=$d python3 notes/timeline/make_tl.py > $OUT/graph-$n.txt 2>&1
    ( cd $R/.final/$n && PYTHONPATH=/tmp/site:$R/.final/$n:$d NUMBA_CACHE_DIR=$R/build/kg$n OUT=$d timeout $((DEADLINE + 200)) python3 $d/tl_graph.py >> $OUT/graph-$n.txt 2>&1
      echo "graph $n rc=$? t=$((SECONDS-T0))" >> $OUT/log.txt ) & GPIDS+=($!)
  done
fi
# the cold round compiles (its figures are not comparable when the tests run beside it)
PIDS=()
for n in "${COPIES[@]}"; do
  run $n $COLD r1 & PIDS+=($!)
done
wait "${PIDS[@]}" ${PT:-}
sleep 2
for tag in $(seq -f r%g 2 $((ROUNDS + 1))); do
  for n in "${COPIES[@]}"; do
    [ $((SECONDS-T0)) -gt $DEADLINE ] && break 2
    run $n 45 $tag
  done
done
if [ -n "${PTL:-}" ]; then touch $OUT/bench_done; wait $PTL; rm -f $OUT/bench_done; fi
for n in "${COPIES[@]}"; do     # graph timelines one copy at a time, nothing else on the GPU
  [ -n "${GRAPH_TL:-}" ] || break
  touch $R/build/tl_$n/bench_done
  while [ -z "$(grep -s "graph $n rc" $OUT/log.txt)" ]; do sleep 1; done
done
[ ${#GPIDS[@]} -gt 0 ] && wait "${GPIDS[@]}"
( cd $OUT && for f in *-r*.txt; do echo "== $f"; grep -E "hisparse_numba/__init__|spec_1_full" $f | head -6; done > summary.txt
  [ -f tests.txt ] && { grep -E "^FAILED|^ERROR" tests.txt | head -20; tail -6 tests.txt; } >> summary.txt
  [ -f tl.txt ] && grep -E "^committer|^copiers|^wrong|Error" tl.txt >> summary.txt
  for f in graph-*.txt; do [ -f $f ] && { echo "== $f"; grep -E "^mean|^wrong|Error" $f; } >> summary.txt; done
  cat log.txt >> summary.txt; rm -f pip.txt
  for n in "${COPIES[@]}"; do cat $n-r*.txt > $n.txt && rm -f $n-r*.txt; done )   # few files come back
cat $OUT/summary.txt
