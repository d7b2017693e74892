#!/bin/bash
cd /work/wt-speed
PY=/work/main/.venv/bin/python
stamp() { echo "== $1 $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
for t in new old new old; do
  stamp "bench $t"
  PYTHONPATH=/tmp/spd/$t $PY /tmp/spd/new/simulations/bench_spread_em.py --no-serial --rounds 2 --out /tmp/spd/bench3_${t}_$(date +%H%M%S) 2>&1 | grep -E "^round|^\| spread|^\| sklearn"
done
stamp done
