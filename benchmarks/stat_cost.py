#!/usr/bin/env python3
"""What each read of a memmon tick costs for a target of many threads, priced with the C floor.

    python3 benchmarks/stat_cost.py [--threads 1,256] [--seconds 40] [--interval-ms 1000]

For each thread count it starts a Python process of that many sleeping threads, then runs five
variants of benchmarks/floor.c side by side on it (built here with cc): the issue's floor
(status and children, a write per tick: `-f`), the floor of memmon's reads (`-m -f`: status,
stat, PSI, a write), and that one without stat (`-S`), without PSI (`-P`) and without both.
CPU is each floor's schedstat over the window, per tick. The kernel sums /proc/PID/stat's fault
counts and CPU times over every thread, so stat is the read that grows with the threads.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = [
    ("issue's floor (status, children; -f)", ["-f"]),
    ("memmon's reads (status, stat, PSI; -m -f)", ["-m", "-f"]),
    ("memmon's reads without stat (-S)", ["-m", "-f", "-S"]),
    ("memmon's reads without PSI (-P)", ["-m", "-f", "-P"]),
    ("memmon's reads without both", ["-m", "-f", "-S", "-P"]),
]


def cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def threads_target(n):
    code = (
        "import threading, time\n"
        f"for _ in range({n - 1}): threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()\n"
        "print('ready', flush=True)\ntime.sleep(1e6)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    p.stdout.readline()
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,256")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--interval-ms", type=int, default=1000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stat-cost-")
    floor = os.path.join(tmp, "floor")
    subprocess.run(["cc", "-O2", "-o", floor, os.path.join(HERE, "floor.c")], check=True)
    interval_ns = str(a.interval_ms * 1_000_000)
    print(f"# CPU per tick at {a.interval_ms} ms, {a.seconds:.0f} s side by side, "
          f"load average {os.getloadavg()[0]:.2f} at the start")
    for n in [int(x) for x in a.threads.split(",")]:
        target = threads_target(n)
        floors = []
        for i, (_, args) in enumerate(VARIANTS):
            out = os.path.join(tmp, f"{n}-{i}.csv")
            floors.append(subprocess.Popen([floor, *args, interval_ns, out, str(target.pid)]))
            time.sleep(0.2)
        time.sleep(3)
        before = [cpu_ns(p.pid) for p in floors]
        t0 = time.time()
        time.sleep(a.seconds)
        after = [cpu_ns(p.pid) for p in floors]
        ticks = (time.time() - t0) * 1000 / a.interval_ms
        print(f"\n{n} thread(s):\n")
        print("| floor | CPU per tick |\n|---|---|")
        for (name, _), b, e in zip(VARIANTS, before, after):
            print(f"| {name} | {(e - b) / 1e3 / ticks:.1f} µs |")
        for p in floors:
            p.terminate()
            p.wait()
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
