#!/usr/bin/env bash
# Runs inside a VM of the lane (scripts/vm): makes the host users run (cgroup v2 with memory,
# pids and cpu handed down from the root, a swap device, PSI), then memmon's tests on it.
#   guest.sh OUT KERNEL BIN MODULE... -- [FILTER... | --run SCRIPT ARG...]
# OUT: a directory shared with the machine that started the VM (the log, `result`, `status`);
# KERNEL: the series booted (5.10, 6.1, 6.12), which says what its memory controller offers;
# BIN: the stripped test binary and memmon's binaries (BIN/deps/tests, BIN/memmon).
set -u
out=$1 series=$2 bin=$3
shift 3
modules=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do modules+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
filter=("$@")
exec >"$out/log" 2>&1
echo "kernel $(uname -r), series $series"
fail() {
  echo "guest: $*"
  echo "setup failed: $*" >"$out/result"
  echo 1 >"$out/status"
  exit 1
}

# The swap device: the lane's disk (virtio-blk, a module in these kernels; no udev loads it).
modprobe virtio_blk 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.2; done
[ -b /dev/vda ] || fail "no swap disk (/dev/vda)"
mkswap -q /dev/vda && swapon /dev/vda || fail "swapon /dev/vda"

# cgroup v2, as systemd leaves the root: memory, pids, cpu and cpuset for the cgroups below.
grep -q "cgroup2 /sys/fs/cgroup" /proc/mounts || fail "cgroup2 is not mounted at /sys/fs/cgroup"
echo "+memory +pids +cpu +cpuset" >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable memory, pids, cpu, cpuset"
[ -r /proc/pressure/memory ] || fail "no /proc/pressure/memory (psi=1 did not take)"
nodes=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)
[ "$nodes" = 2 ] || fail "$nodes NUMA nodes, not 2"

# What this host offers, for the tests to insist on (tests/util.rs `host_promises`): a test
# that would skip for want of one of these fails instead.
promise="cgroup2 psi numa swap"
case "$series" in
  5.10) ;;
  6.1) promise="$promise memory.peak" ;;
  *) promise="$promise memory.peak memory.peak-reset" ;;
esac
export MEMMON_TEST_HOST="$promise"
# And strict, as CI runs the host's tests: a test that skips where this guest has what it needs
# (root, perf, a memory cgroup) fails.
export MEMMON_TEST_STRICT=1
echo "promised: $promise; $(grep -c . /proc/swaps) swap lines; $nodes NUMA nodes"

# The binaries in memory: read over 9p as they run, they would be paged in again and again under
# the memory pressure some tests make.
lane=/tmp/lane
mkdir -p "$lane/deps"
cp "$bin/deps/tests" "$lane/deps/tests" && cp "$bin/memmon" "$bin/memmon-test" "$lane/" ||
  fail "cannot copy the test binaries into the guest"

# scripts/vm --run: a script in place of the tests (a benchmark on a kernel with what this
# machine's lacks), given the shared directory and the binaries.
if [ "${filter[0]:-}" = --run ]; then
  echo -1000 >/proc/$$/oom_score_adj
  bash "${filter[1]}" "$out" "$lane" "${filter[@]:2}"
  rc=$?
  echo "ran ${filter[1]}: exit status $rc" >"$out/result"
  echo "$rc" >"$out/status"
  exit 0
fi

cd /tmp
args=()
for m in "${modules[@]}"; do args+=("$m"); done
[ ${#filter[@]} -gt 0 ] && args=("${filter[@]}")
start=$(date +%s)
# Each test's time in the log (libtest's --report-time, which it gives only where told that
# unstable options are allowed).
# This script is kept from the kernel's OOM killer (a test's pressure must not end the guest
# without its result); the tests run as any process does.
echo -1000 >/proc/$$/oom_score_adj
RUSTC_BOOTSTRAP=1 sh -c 'echo 0 >/proc/self/oom_score_adj && exec "$@"' sh \
  "$lane/deps/tests" --test-threads=2 -Zunstable-options --report-time "${args[@]}"
rc=$?
took=$(($(date +%s) - start))
line=$(grep -E '^test result:' "$out/log" | tail -1)
line=${line#test result: }
echo "${line%; finished in*}; the tests ${took} s" >"$out/result"
echo "$rc" >"$out/status"
