#!/usr/bin/env python3
"""What the ledger of mappings costs a daemon, and memmon: `record --anatomy` attached to a
prover-shaped daemon (benchmarks/prover.c) with the ledger, without it (`--no-ledger`), and no
recorder at all, side by side in each round (the order rotated).

Run from the repository root as root (the ledger needs CAP_PERFMON) after
`cargo build --release`:

    python3 benchmarks/ledger_cost.py [--memmon target/release/memmon] [--rounds 3]
        [--seconds 12] [--partitions 10] [--mib 16] [--threads 10]

The daemon (built here with cc -O2) loops over proofs, each mapping PARTITIONS partitions of MIB
MiB from THREADS threads, writing every page and unmapping them: a proof is 2 x PARTITIONS
calls the ledger follows (mmap and munmap of MIB MiB) and MIB x 256 x PARTITIONS page faults.
Each second it prints the proofs done and the mean time of a page's first write (its fault).
The recorder samples every 100 ms. Over the window from the 3rd second to the last but one:

- the daemon's proofs per second and page-fault latency (ns), and its CPU per proof (its
  threads' user and system time, /proc/PID/stat): the ledger's kernel work (a sample with 8 KiB
  of stack at each large mmap, a small one at each munmap) is done in the daemon's system calls;
- memmon's CPU (a share of one core), and of it the ledger thread's (`memmon-ledger`).

Prints a Markdown table per round and the medians. Then, since a busy machine's noise in a
daemon's throughput is larger than the ledger's cost, the calls alone: `prover calls` makes
`--pairs` mmap/munmap pairs of MIB MiB and prints the CPU time of a pair in its own user and
system time, with the ledger attached (a recorder of it running) and without, `--rounds` times
each, alternating: the difference is what each traced call costs the daemon.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HZ = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid, tid=None):
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_named(pid, name):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return tid
        except OSError:
            pass
    return None


def run(mode, args, prover, tmp):
    p = subprocess.Popen(
        [prover, str(args.partitions), str(args.mib), str(args.threads), str(args.seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    rec = None
    if mode != "none":
        flags = ["--no-ledger"] if mode == "anatomy" else []
        out = os.path.join(tmp, f"{mode}.csv")
        rec = subprocess.Popen(
            [args.memmon, "record", "-q", "--pid", str(p.pid), "-i", "100ms", "--anatomy",
             *flags, "--force", "-o", out],
            stderr=subprocess.DEVNULL,
        )
    time.sleep(2.0)
    t0 = time.monotonic()
    d0 = cpu_ticks(p.pid)
    m0 = cpu_ticks(rec.pid) if rec else 0
    ledger_tid = thread_named(rec.pid, "memmon-ledger") if rec else None
    l0 = cpu_ticks(rec.pid, ledger_tid) if ledger_tid else 0
    first = len(lines)
    time.sleep(args.seconds - 3.0)
    window = time.monotonic() - t0
    d1 = cpu_ticks(p.pid)
    m1 = cpu_ticks(rec.pid) if rec else 0
    l1 = cpu_ticks(rec.pid, ledger_tid) if ledger_tid else 0
    last = len(lines)
    if rec:
        rec.send_signal(signal.SIGINT)
        rec.wait()
    p.wait()
    reader.join()
    seconds = [json.loads(x) for x in lines[first:last]]
    proofs = sum(s["proofs"] for s in seconds)
    calls = sum(s["calls"] for s in seconds)
    fault = statistics.mean(s["fault_ns"] for s in seconds)
    return {
        "mode": mode,
        "proofs_per_s": proofs / len(seconds),
        "calls_per_s": calls / len(seconds),
        "fault_ns": fault,
        "daemon_ms_per_proof": (d1 - d0) / HZ * 1000 / max(proofs * window / len(seconds), 1),
        "memmon_pct": (m1 - m0) / HZ / window * 100,
        "ledger_pct": (l1 - l0) / HZ / window * 100 if ledger_tid else None,
    }


def table(rows):
    out = ["| recorder | proofs/s | traced calls/s | page-fault ns | daemon CPU ms/proof | memmon CPU % of a core | of it, the ledger thread |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        led = "-" if r["ledger_pct"] is None else f"{r['ledger_pct']:.2f}%"
        mm = "-" if r["mode"] == "none" else f"{r['memmon_pct']:.2f}%"
        out.append(f"| {r['mode']} | {r['proofs_per_s']:.2f} | {r['calls_per_s']:.0f} | {r['fault_ns']:.0f} | {r['daemon_ms_per_proof']:.2f} | {mm} | {led} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memmon", default="target/release/memmon")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=20000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ledger-cost-")
    prover = os.path.join(tmp, "prover")
    subprocess.run(["cc", "-O2", "-pthread", "-o", prover, "benchmarks/prover.c"], check=True)
    modes = ["none", "anatomy", "ledger"]
    by_mode = {m: [] for m in modes}
    for r in range(args.rounds):
        order = modes[r % 3:] + modes[:r % 3]
        rows = [run(m, args, prover, tmp) for m in order]
        for row in rows:
            by_mode[row["mode"]].append(row)
        print(f"round {r + 1}:\n{table(sorted(rows, key=lambda x: modes.index(x['mode'])))}\n")
    med = []
    for m in modes:
        rs = by_mode[m]
        row = {"mode": m}
        for k in ["proofs_per_s", "calls_per_s", "fault_ns", "daemon_ms_per_proof", "memmon_pct"]:
            row[k] = statistics.median(x[k] for x in rs)
        led = [x["ledger_pct"] for x in rs if x["ledger_pct"] is not None]
        row["ledger_pct"] = statistics.median(led) if led else None
        med.append(row)
    print(f"medians of {args.rounds} rounds:\n{table(med)}")
    none, ledger = med[0], med[2]
    extra = ledger["daemon_ms_per_proof"] - med[1]["daemon_ms_per_proof"]
    per_call_us = extra * 1000 / (2 * args.partitions)
    print(f"\nthe ledger's cost in the daemon: {extra:+.3f} ms of CPU per proof against --no-ledger, "
          f"{per_call_us:+.1f} us per traced call; throughput {ledger['proofs_per_s'] / none['proofs_per_s'] * 100 - 100:+.1f}% "
          f"against no recorder")
    pairs = {"without": [], "ledger": []}
    for r in range(args.rounds * 2):
        mode = "ledger" if r % 2 else "without"
        rec = None
        if mode == "ledger":
            idle = subprocess.Popen(["sleep", "600"])
            out = os.path.join(tmp, "calls.csv")
            rec = subprocess.Popen(
                [args.memmon, "record", "-q", "--pid", str(idle.pid), "-i", "1s", "--anatomy",
                 "--force", "-o", out],
                stderr=subprocess.DEVNULL,
            )
            time.sleep(2.0)
        # The timed process is not in the recorded tree: its calls reach the ledger's rings and
        # are dropped in user space, as any process's are; one in the tree costs the same in
        # the kernel (the sample is written before the tree is looked at).
        done = subprocess.run([prover, "calls", str(args.pairs), str(args.mib)],
                              capture_output=True, text=True, check=True)
        pairs[mode].append(json.loads(done.stdout)["pair_ns"])
        if rec:
            rec.send_signal(signal.SIGINT)
            rec.wait()
            idle.kill()
            idle.wait()
    w, l = statistics.median(pairs["without"]), statistics.median(pairs["ledger"])
    print(f"\nthe calls alone ({args.pairs} mmap/munmap pairs of {args.mib} MiB, CPU ns a pair, "
          f"medians of {args.rounds}): without {w:.0f} ({', '.join(f'{x:.0f}' for x in pairs['without'])}), "
          f"with the ledger {l:.0f} ({', '.join(f'{x:.0f}' for x in pairs['ledger'])}): "
          f"{(l - w) / 1000:+.2f} us a pair")


if __name__ == "__main__":
    sys.exit(main())
