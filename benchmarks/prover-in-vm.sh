#!/usr/bin/env bash
# The real prover as a daemon under `memmon bench`, in a guest of the VM lane: a Debian kernel,
# which keeps soft-dirty bits (this machine's does not), so memory the prover's allocator hands
# out again in runs 2 and 3 is credited to the code that wrote it again. heaptrack's side runs on
# the host afterwards (its numbers are the allocator's, the same on any kernel):
#
#   target/bellperson-prover/release/prover params target/prover-bench/params-15.bin 15
#   MEMMON_VM_KERNELS=6.12 scripts/vm --run benchmarks/prover-in-vm.sh 15 3 16
#   python3 benchmarks/prover_vs_heaptrack.py --bench --skip alone,memmon --log2 15 --proofs 3 \
#       --prover target/bellperson-prover/release/prover \
#       --params target/prover-bench/params-15.bin --work target/vm/out/6.12/work
#
# Run by scripts/vm as `bash prover-in-vm.sh OUT BIN [LOG2 [PROOFS [TOUCH_EVERY]]]`.
set -eu
out=$1 bin=$2 log2=${3:-15} proofs=${4:-3} every=${5:-16}
top=$(cd "$(dirname "$0")/.." && pwd)
# The daemon's socket cannot be bound on the shared directory (9p): the work is done in the
# guest's /tmp and copied out.
work=/tmp/prover-work
mkdir -p "$work" "$out/work"
status=0
python3 "$top/benchmarks/prover_vs_heaptrack.py" --bench --skip alone,heaptrack \
  --memmon "$bin/memmon" --prover "$top/target/bellperson-prover/release/prover" \
  --params "$top/target/prover-bench/params-$log2.bin" --log2 "$log2" --proofs "$proofs" \
  --touch-every "$every" --work "$work" || status=$?
rm -f "$work/d.sock"
cp -r "$work/." "$out/work/"
exit $status
