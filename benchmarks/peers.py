#!/usr/bin/env python3
"""End-to-end benchmarks of memmon, with peers side by side in the same run.

Run from the repository root after `cargo build --release`:

    python3 benchmarks/peers.py [--seconds 10] [--summary-gib 1] [--only accuracy]

Needs psrecord (`pip install psrecord`) for the peer comparison; `--only accuracy` runs
benchmarks/accuracy.py (peak accuracy and CPU per sample beside psrecord, mprof, GNU time and
peak-mem; it needs `cargo build --release --features test-support`). Prints Markdown tables
(copied into BENCHMARKS.md). CPU time comes from wait4's rusage of each tool's own process.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

MEMMON = os.path.abspath("target/release/memmon")


def run_measured(argv, **kw):
    """Runs argv to completion; returns (exit status, CPU seconds, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_utime + ru.ru_stime, time.monotonic() - t0


def summary(path):
    out = subprocess.run([MEMMON, "summary", "--json", path], check=True, capture_output=True)
    return json.loads(out.stdout)


def idle_target():
    return subprocess.Popen(["sleep", "100000"])


def bench_one_process(tmp, seconds, rate_hz):
    """memmon and psrecord on the same idle process at the same rate."""
    target = idle_target()
    rows = []
    try:
        out = os.path.join(tmp, "one.csv")
        interval = f"{1000 // rate_hz}ms"
        _, cpu, _ = run_measured([MEMMON, "record", "-q", "--pid", str(target.pid), "-i", interval,
                                  "--duration", f"{seconds}s", "-o", out])
        s = summary(out)
        memmon_per = cpu / s["samples"]
        rows.append(("memmon record", s["samples"], cpu, memmon_per))
        if shutil.which("psrecord"):
            log = os.path.join(tmp, "psrecord.txt")
            _, cpu, _ = run_measured(["psrecord", str(target.pid), "--interval", str(1 / rate_hz),
                                      "--duration", str(seconds), "--log", log],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(log) as f:
                n = sum(1 for line in f if line.strip() and not line.startswith("#"))
            rows.append(("psrecord 1.4", n, cpu, cpu / max(n, 1)))
    finally:
        target.kill()
        target.wait()
    print(f"\n### One idle process, {rate_hz} samples/s for {seconds} s\n")
    print("| tool | samples | CPU total | CPU per sample | ratio to memmon |")
    print("|---|---|---|---|---|")
    for name, n, cpu, per in rows:
        print(f"| {name} | {n} | {cpu * 1e3:.0f} ms | {per * 1e6:.1f} µs | {per / memmon_per:.1f}x |")


def bench_tree(tmp, seconds, count=1000):
    """A tree of `count` sleeping processes sampled at 10 Hz."""
    parent = subprocess.Popen(["bash", "-c", f"for i in $(seq {count}); do sleep 100000 & done; wait"])
    try:
        deadline = time.monotonic() + 60
        kids = 0
        while time.monotonic() < deadline:
            with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as f:
                kids = len(f.read().split())
            if kids >= count:
                break
            time.sleep(0.2)
        out = os.path.join(tmp, "tree.csv")
        _, cpu, wall = run_measured([MEMMON, "record", "-q", "--pid", str(parent.pid), "-i", "100ms",
                                     "--duration", f"{seconds}s", "-o", out])
        s = summary(out)
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)])
        parent.kill()
        parent.wait()
    print(f"\n### A tree of {count + 1} processes at 10 Hz for {seconds} s\n")
    print("| samples | processes per sample | CPU total | share of one core | CPU per sample |")
    print("|---|---|---|---|---|")
    print(f"| {s['samples']} | {kids + 1} | {cpu * 1e3:.0f} ms | {100 * cpu / wall:.2f}% | "
          f"{cpu / s['samples'] * 1e3:.2f} ms |")


def bench_10khz(tmp, seconds):
    target = idle_target()
    try:
        out = os.path.join(tmp, "fast.csv")
        _, cpu, wall = run_measured([MEMMON, "record", "-q", "--pid", str(target.pid), "-i", "100us",
                                     "--duration", f"{seconds}s", "-o", out])
        s = summary(out)
    finally:
        target.kill()
        target.wait()
    taken, missed = s["samples"], s["missed_ticks"]
    print(f"\n### One process at 10,000 samples/s for {seconds} s\n")
    print("| ticks scheduled | taken | missed | on time | CPU share of one core |")
    print("|---|---|---|---|---|")
    print(f"| {taken + missed} | {taken} | {missed} | {100 * taken / (taken + missed):.2f}% | "
          f"{100 * cpu / wall:.0f}% |")


def bench_summary(tmp, gib):
    """`memmon summary` on a generated recording, against sort | tail on the RSS column. The
    recording has this memmon's own header (cost.py's make_recording): a header of another
    version takes the reader's general path, not the one memmon's own files take."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cost import make_recording
    path = os.path.join(tmp, "big.csv")
    i, _ = make_recording(tmp, MEMMON, path, gib)
    size = os.path.getsize(path)
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL)  # warm the page cache
    _, _, memmon_wall = run_measured([MEMMON, "summary", path], stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    subprocess.run(f"sort -t, -k3 -n {path} | tail -1", shell=True, stdout=subprocess.DEVNULL, check=True)
    sort_wall = time.monotonic() - t0
    os.remove(path)
    print(f"\n### summary of a {size / (1 << 30):.2f} GiB recording ({i} samples), page cache warm\n")
    print("| command | wall | throughput |")
    print("|---|---|---|")
    print(f"| memmon summary | {memmon_wall:.2f} s | {size / memmon_wall / 1e9:.2f} GB/s |")
    print(f"| sort -t, -k3 -n FILE \\| tail -1 | {sort_wall:.2f} s | {size / sort_wall / 1e9:.2f} GB/s "
          f"({sort_wall / memmon_wall:.0f}x slower) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--summary-gib", type=float, default=1.0)
    ap.add_argument("--only", choices=["one", "tree", "10khz", "summary", "accuracy"])
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the accuracy table (accuracy.py)")
    a = ap.parse_args()
    if not os.path.exists(MEMMON):
        sys.exit("build first: cargo build --release --features test-support")
    with tempfile.TemporaryDirectory() as tmp:
        if a.only in (None, "one"):
            bench_one_process(tmp, a.seconds, 100)
        if a.only in (None, "tree"):
            bench_tree(tmp, a.seconds)
        if a.only in (None, "10khz"):
            bench_10khz(tmp, a.seconds)
        if a.only in (None, "summary"):
            bench_summary(tmp, a.summary_gib)
    if a.only in (None, "accuracy"):
        # Peak accuracy and CPU per sample beside psrecord, mprof, GNU time and peak-mem.
        sys.stdout.flush()
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "accuracy.py"),
                        "--rounds", str(a.rounds), "--cpu-seconds", str(a.seconds)], check=True)


if __name__ == "__main__":
    main()
