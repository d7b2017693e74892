#!/bin/bash
# make demo from fresh clones: old (bd1aa59) and new (HEAD + the working Makefile), alternating
one() {  # name rev
  d=/tmp/dm/clone_$1_$3
  rm -rf $d; git clone -q /work/main $d; cd $d; git checkout -q $2
  [ "$1" = new ] && cp /tmp/dm/Makefile.new Makefile
  echo "$1 round $3 start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/dm/times.txt
  ( time make demo ) > /tmp/dm/$1_$3.log 2>&1
  echo "$1 round $3: $(grep real /tmp/dm/$1_$3.log)" >> /tmp/dm/times.txt
  grep "cell(s) computed" /tmp/dm/$1_$3.log >> /tmp/dm/times.txt
}
NEW=$(git -C /work/main rev-parse HEAD)  # was 1dfcdd6; the new clone gets the working Makefile (parallel bytecode compile)
one old bd1aa59 1
one new $NEW 1
one new $NEW 2
one old bd1aa59 2
echo done >> /tmp/dm/times.txt
