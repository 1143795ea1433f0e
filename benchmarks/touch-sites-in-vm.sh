#!/usr/bin/env bash
# tests/touch-sites.c (64 MiB written by fill_heap, 48 MiB by fill_arena on a thread of its own)
# with glibc, jemalloc and mimalloc, transparent huge pages as the guest's kernel has them (Debian:
# `always`), recorded by memmon with one write fault in 64 sampled; prints each run's credit at the
# highest anatomy by touch. In a guest of the VM lane:
#
#   MEMMON_VM_KERNELS="7 5.10" scripts/vm --run benchmarks/touch-sites-in-vm.sh
#
# Run by scripts/vm as `bash touch-sites-in-vm.sh OUT BIN`.
set -eu
out=$1 bin=$2
top=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/touch-work
mkdir -p "$work"
gcc -O2 -fomit-frame-pointer -pthread -o "$work/touch-sites" "$top/tests/touch-sites.c"
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
for lib in none /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/libmimalloc.so.2; do
  tag=$(basename "$lib")
  rm -f "$work/go.0" "$work/$tag.csv"*
  (sleep 20; touch "$work/go.0") &
  pre=()
  [ "$lib" = none ] || pre=(env "LD_PRELOAD=$lib")
  "$bin/memmon" record -q -i 100ms --anatomy --touch-every 64 -o "$work/$tag.csv" \
    -- "${pre[@]}" "$work/touch-sites" "$work/go" 64 48 500 >/dev/null
  wait
  echo "== $tag"
  "$bin/memmon" summary "$work/$tag.csv" | grep -A4 "by touch" | head -5
  "$bin/memmon" summary "$work/$tag.csv" | grep "  ledger "
  cp "$work/$tag.csv"* "$out/"
done
