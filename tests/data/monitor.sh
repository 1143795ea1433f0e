#!/bin/bash
# A hand-rolled monitor of the kind people write: ms since epoch, VmRSS in kB, RSS in GiB.
python3 alloc.py & pid=$!
while kill -0 $pid 2>/dev/null; do
  kb=$(awk '/^VmRSS/{print $2}' /proc/$pid/status 2>/dev/null) || break
  [ -n "$kb" ] || break
  echo "$(date +%s%3N),$kb,$(awk -v k=$kb 'BEGIN{printf "%.2f", k/1048576}')"
  sleep 0.1
done > monitor.csv
wait $pid
