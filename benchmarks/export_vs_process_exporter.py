#!/usr/bin/env python3
"""memmon export beside Debian's prometheus-process-exporter, on the same targets.

Run from the repository root after `cargo build --release` and `cargo build --features
test-support --bin memmon-test` (the test daemon), with `prometheus-process-exporter` installed:

    python3 benchmarks/export_vs_process_exporter.py [--seconds 20] [--only daemon|below-peak|tree]

Two targets: one test daemon (`memmon-test test-daemon`), and a tree of 1,000 sleeping
processes under one parent. Each exporter watches the target while this script scrapes it
(every 15 s: Prometheus's default, or every 100 ms: process-exporter reads /proc only when
scraped, so that is its 100 ms sampling). Measured: the exporter's CPU per second of wall time
(the scheduler's nanoseconds of its threads, /proc/PID/task/TID/schedstat), the median /metrics latency, and whether the exporter showed a
50 ms 300 MiB spike of the daemon: memmon in its window peak, process-exporter in any scrape's
resident memory. A third table spikes a daemon that peaked higher before (its VmHWM does not
rise): there only a sample during the spike, or a mark reset after each sample
(`--reset-peaks`), sees it. Prints Markdown tables (copied into BENCHMARKS.md).
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

MEMMON = os.path.abspath("target/release/memmon")
TEST = os.path.abspath("target/debug/memmon-test")
PE = shutil.which("prometheus-process-exporter") or "/usr/bin/prometheus-process-exporter"
MIB = 1 << 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid):
    """CPU seconds of every thread of `pid`: the scheduler's nanoseconds (schedstat), not
    /proc/PID/stat's 10 ms ticks (±0.5 ms per s over 20 s: as much as what is measured)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def scrape(port):
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        body = r.read().decode()
    return time.monotonic() - t0, body


def wait_up(port):
    for _ in range(300):
        try:
            scrape(port)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"no exporter on port {port}")


def value(body, pattern):
    vals = [float(m.group(1)) for m in re.finditer(pattern + r"\S* (\S+)\n", body)]
    return max(vals) if vals else None


class Daemon:
    def __init__(self, tmp):
        self.sock = os.path.join(tmp, "d.sock")
        self.pidfile = os.path.join(tmp, "d.pid")
        self.p = subprocess.Popen([TEST, "test-daemon", "--socket", self.sock, "--pidfile", self.pidfile])
        while not os.path.exists(self.pidfile):
            time.sleep(0.05)

    def spike(self, size="300MiB"):
        subprocess.run([TEST, "test-client", "--socket", self.sock, "--size", size, "--hold", "50ms"], check=True)


def tree(tmp, count=1000):
    """A parent (a copy of bash named benchtree-sh) with `count` sleeping children."""
    sh = os.path.join(tmp, "benchtree-sh")
    shutil.copy("/bin/bash", sh)
    p = subprocess.Popen([sh, "-c", f"for i in $(seq {count}); do sleep 100000 & done; wait"])
    for _ in range(600):
        kids = sum(1 for _ in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split())
        if kids >= count:
            break
        time.sleep(0.1)
    return p


def start_memmon(target, port, flags=()):
    return subprocess.Popen([MEMMON, "export", "-q", *flags, "--listen", f"127.0.0.1:{port}", "--target", target])


def start_pe(procname, port):
    return subprocess.Popen([PE, "-procnames", procname, "-web.listen-address", f"127.0.0.1:{port}",
                             "-threads=false", "-gather-smaps=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(proc, port, seconds, every, spike=None, rss_pattern=None):
    """Scrapes every `every` s for `seconds`; spikes the daemon once a third of the way in.
    Returns (CPU ms per s, median scrape ms, max value of rss_pattern over scrapes after the spike)."""
    wait_up(port)
    time.sleep(1)
    c0, t0 = cpu_s(proc.pid), time.monotonic()
    lat, seen, spiked = [], None, False
    next_scrape = t0
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        if spike and not spiked and now - t0 > seconds / 3:
            spike()
            spiked = True
        if now >= next_scrape:
            dt, body = scrape(port)
            lat.append(dt)
            if spiked and rss_pattern:
                v = value(body, rss_pattern)
                seen = v if seen is None else max(seen, v or 0)
            next_scrape += every
        time.sleep(min(0.02, max(0.0, next_scrape - time.monotonic())))
    cpu = cpu_s(proc.pid) - c0
    wall = time.monotonic() - t0
    return cpu / wall * 1000, statistics.median(lat) * 1000, seen


def run(label, start, port, seconds, every, daemon=None, pattern=None, ceiling=None):
    """One exporter's row. The spike is seen when a scrape after it shows more than 250 MiB (and
    less than `ceiling`: above it is an older, larger peak, not the spike)."""
    p = start()
    try:
        cpu, lat, seen = measure(p, port, seconds, every, daemon.spike if daemon else None, pattern)
    finally:
        p.kill()
        p.wait()
    if daemon is None:
        saw = ""
    elif seen and seen > 250 * MIB and (ceiling is None or seen < ceiling):
        saw = "yes"
    else:
        saw = f"no (max {seen / MIB:.0f} MiB)" if seen else "no"
    print(f"| {label} | {cpu:.2f} | {lat:.1f} | {saw} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--only", choices=["daemon", "below-peak", "tree"], action="append",
                    help="run only these tables (repeatable; default: all three)")
    a = ap.parse_args()
    only = set(a.only or ["daemon", "below-peak", "tree"])
    with tempfile.TemporaryDirectory() as tmp:
        if "daemon" in only:
            one_daemon(tmp, a.seconds)
        if "below-peak" in only:
            below_peak(tmp, a.seconds)
        if "tree" in only:
            a_tree(tmp, a.seconds)


def below_peak(tmp, seconds):
    """The daemon peaked at 400 MiB before the exporters start, then spikes to 300 MiB for 50 ms:
    below its old VmHWM, so only a sample during the spike, or a reset mark, shows it."""
    here = os.path.join(tmp, "below-peak")
    os.makedirs(here)
    d = Daemon(here)
    try:
        d.spike("400MiB")
        print(f"\n### One daemon that peaked at 400 MiB before, {seconds:.0f} s, one 50 ms 300 MiB spike\n")
        print("| exporter, sampling, scrape interval | CPU ms per s | median scrape ms | saw the spike |")
        print("|---|---|---|---|")
        memmon_peak = r'memmon_window_peak_rss_bytes\{target="d"'
        pe_rss = r'namedprocess_namegroup_memory_bytes\{groupname="memmon-test",memtype="resident"'
        for label, flags in (("100 ms", ()), ("100 ms, --reset-peaks", ("--reset-peaks",)),
                             ("1 s (-i 1s), --reset-peaks", ("-i", "1s", "--reset-peaks"))):
            port = free_port()
            run(f"memmon export, {label}, scraped every 15 s",
                lambda: start_memmon(f"d=pidfile:{d.pidfile}", port, flags), port, seconds, 15, d, memmon_peak,
                350 * MIB)
        port = free_port()
        run("process-exporter, at each scrape, every 15 s", lambda: start_pe("memmon-test", port), port, seconds, 15, d, pe_rss,
            350 * MIB)
    finally:
        d.p.kill()
        d.p.wait()


def one_daemon(tmp, seconds):
    d = Daemon(tmp)
    try:
        print(f"\n### One daemon, {seconds:.0f} s, one 50 ms 300 MiB spike\n")
        print("| exporter, sampling, scrape interval | CPU ms per s | median scrape ms | saw the spike |")
        print("|---|---|---|---|")
        memmon_peak = r'memmon_window_peak_rss_bytes\{target="d"'
        pe_rss = r'namedprocess_namegroup_memory_bytes\{groupname="memmon-test",memtype="resident"'
        for every in (15, 1):
            port = free_port()
            run(f"memmon export, 100 ms, scraped every {every} s", lambda: start_memmon(f"d=pidfile:{d.pidfile}", port), port, seconds, every, d, memmon_peak)
        for every in (15, 1, 0.1):
            port = free_port()
            run(f"process-exporter, at each scrape, every {every} s", lambda: start_pe("memmon-test", port), port, seconds, every, d, pe_rss)
    finally:
        d.p.kill()
        d.p.wait()


def a_tree(tmp, seconds):
    t = tree(tmp)
    try:
        print(f"\n### A tree of 1,001 processes, {seconds:.0f} s\n")
        print("| exporter, sampling, scrape interval | CPU ms per s | median scrape ms | |")
        print("|---|---|---|---|")
        for every in (15,):
            port = free_port()
            run(f"memmon export, 100 ms, scraped every {every} s", lambda: start_memmon(f"t=pid:{t.pid}", port), port, seconds, every)
            port = free_port()
            run(f"memmon export, 1 s (-i 1s), scraped every {every} s", lambda: subprocess.Popen([MEMMON, "export", "-q", "-i", "1s", "--listen", f"127.0.0.1:{port}", "--target", f"t=pid:{t.pid}"]), port, seconds, every)
        for every in (15, 1, 0.1):
            port = free_port()
            run(f"process-exporter, at each scrape, every {every} s", lambda: start_pe("benchtree-sh", port), port, seconds, every)
    finally:
        subprocess.run(["pkill", "-P", str(t.pid)])
        t.kill()


if __name__ == "__main__":
    main()
