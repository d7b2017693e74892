#!/bin/bash
# quickstart sweeps, old tree (2f44285) then new tree (HEAD), alternating; wall seconds from /usr/bin/time
set -u
out=/tmp/spd/runs; mkdir -p $out
for r in "$@"; do
  for tree in old new; do
    rm -rf $out/qs_${tree}_$r
    echo "== $tree round $r start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    ( cd /tmp/spd/$tree && PYTHONPATH=/tmp/spd/$tree /usr/bin/time -f "%e s wall %U user %S sys" /work/main/.venv/bin/python -m fedrr.experiment.cli sweep configs/quickstart.toml --out $out/qs_${tree}_$r --no-progress ) > $out/qs_${tree}_$r.log 2>&1
    tail -1 $out/qs_${tree}_$r.log
  done
done
