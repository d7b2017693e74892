#!/bin/bash
cd /tmp/spd
for t in new19 old19 new19 old19; do
  echo "$t start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/spd/bench19.txt
  (cd /tmp/spd/$t && PYTHONPATH=/tmp/spd/$t /work/main/.venv/bin/python simulations/bench_spread_em.py --rounds 2 --out /tmp/spd/out_${t}_$(date +%H%M%S) > /tmp/spd/log_$t.txt 2>&1)
done
echo done >> /tmp/spd/bench19.txt
