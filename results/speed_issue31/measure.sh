#!/bin/bash
# old (0feb183, branch point) vs new (HEAD of speed) — run one after another, never two at once
cd /work/wt-speed
PY=/work/main/.venv/bin/python
stamp() { echo "== $1 $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
for i in 1 2; do
  for t in old new; do
    stamp "bench $t $i"
    PYTHONPATH=/tmp/spd/$t $PY /tmp/spd/new/simulations/bench_spread_em.py --no-serial --rounds 2 --out /tmp/spd/bench_${t}_$i 2>&1 | grep -E "^round|^\| spread|^\| sklearn"
  done
done
for t in old new; do
  stamp "quickstart $t"
  rm -rf /tmp/spd/qs_$t
  (cd /tmp/spd/$t && PYTHONPATH=/tmp/spd/$t /usr/bin/time -f "time: %e s wall, %U user, %S sys" $PY -m fedrr.experiment.cli sweep configs/quickstart.toml --out /tmp/spd/qs_$t --no-progress 2>&1 | grep -E "cell g0|computed|time:")
done
stamp done
