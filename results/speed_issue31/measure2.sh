#!/bin/bash
PY=/work/main/.venv/bin/python
stamp() { echo "== $1 $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
for t in old new; do
  stamp "quickstart $t (2)"
  rm -rf /tmp/spd/qs2_$t
  (cd /tmp/spd/$t && PYTHONPATH=/tmp/spd/$t /usr/bin/time -f "time: %e s wall, %U user, %S sys" $PY -m fedrr.experiment.cli sweep configs/quickstart.toml --out /tmp/spd/qs2_$t --no-progress 2>&1 | grep -E "computed|time:")
done
stamp done
