#!/usr/bin/env bash
# One device call (`run` with carry [".whl"]): `bash notes/timeline/timeline.sh [cycles]`. The
# working tree's kernel with stamps (make_tl.py), on bench spec's batch-1 problem, 24 selections
# `cycles` times over (default 3); about 115 s on the H200 (the stamped kernel compiles cold).
set -u
T0=$SECONDS
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export HISPARSE_NUMBA_BACKEND=cuda PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 notes/timeline/make_tl.py > $OUT/make_tl.txt 2>&1
touch $OUT/bench_done
PYTHONPATH=/tmp/site:$R:$R/notes/timeline TL_CYCLES=${1:-3} NUMBA_CACHE_DIR=$R/build/ktl timeout 300 python3 notes/timeline/tl_run.py > $OUT/tl.txt 2>&1
echo "tl rc=$? t=$((SECONDS-T0))" >> $OUT/log.txt
rm -f $OUT/bench_done
cat $OUT/make_tl.txt $OUT/log.txt $OUT/tl.txt
