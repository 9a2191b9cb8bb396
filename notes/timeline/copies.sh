#!/usr/bin/env bash
# Package copies for ab.sh: `bash notes/timeline/copies.sh NAME=PATCH[+PATCH...] ...` writes
# .final/NAME/hisparse_numba, main's package (git archive HEAD) with the named patches of this
# folder applied ("-" for none), e.g. `copies.sh land=- l1=l1-warm idx=last-tile-index`.
set -eu
R=$(git rev-parse --show-toplevel)
for spec in "$@"; do
  name=${spec%%=*}; patches=${spec#*=}
  rm -rf "$R/.final/$name"; mkdir -p "$R/.final/$name"
  git -C "$R" archive HEAD hisparse_numba | tar -x -C "$R/.final/$name"
  if [ "$patches" != - ]; then
    for p in ${patches//+/ }; do
      (cd "$R" && git apply --directory=".final/$name" --include=".final/$name/hisparse_numba/*" "notes/timeline/$p.patch")
    done
  fi
  echo "$name: $(cd "$R/.final/$name" && find hisparse_numba -name '*.py' | sort | xargs cat | sha1sum | cut -c1-12) ($patches)"
done
