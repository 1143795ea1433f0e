#!/usr/bin/env python3
"""memmon's own cost beside a C floor and its peers, measured side by side in one run.

Run from the repository root as root (exit records, and the process events connector, need
it) after `cargo build --release --features test-support`:

    python3 benchmarks/cost.py [--rounds 3] [--quick] [--only idle,threads,tree,export,read]
                               [--memmon after=target/release/memmon --memmon before=/tmp/memmon-old]

It builds the floor (benchmarks/floor.c, with cc): a paced C loop that, at each tick of an
absolute schedule, preads the same /proc/PID/status and /proc/PID/task/PID/children files as a
sampler must and writes a buffered CSV line; a second writes a line per tick; a third (floor.c's
-m) reads what a memmon row holds, as memmon reads it (status with stat for major faults, PSI,
statm for a tree's descendants between status reads, no children files) and writes per tick. Then, in each of `--rounds` rounds, every sampler
runs in turn (the order rotated from round to round) against the same target, and the ratios are
taken within the round:

- idle: one idle process (`sleep`) at 1 Hz, 10 Hz, 1 kHz and 10 kHz: the floor, each memmon
  (`record -i`), psrecord and peak-mem where installed (`pip install psrecord`, `cargo install
  peak-mem`; prmon is in neither registry); memmon's and the peers' own max RSS (VmHWM) at 10 Hz;
- threads: a daemon of 256 threads at 1 s, memmon against the floor and against memmon's own
  cost for the one-thread process in the same round;
- tree: a parent with 100 idle children (101 processes) at 1, 10 and 100 Hz, against a floor
  that reads the 101 processes' status and children files;
- export: `memmon export` (100 ms) of one idle daemon and of a 1,001-process tree, scraped every
  15 s, against prometheus-process-exporter at its 15 s scrape (`apt-get install
  prometheus-process-exporter`): CPU milliseconds per second; for the daemon, the C floor at
  100 ms too, and floor.c's -w (the 100 ms wake-ups alone, no read): what any sampler at that
  rate pays on this machine;
- read: `memmon summary` of a generated 1 GiB recording with this memmon's own header, page
  cache warm: GB/s; and, where valgrind is installed, the instructions a row of its first
  200,000 rows, which the machine's load does not change (to tell a 2% change from noise).

CPU is the scheduler's own count of each sampler's threads (the first field of
/proc/PID/task/TID/schedstat, nanoseconds) over a window after a warm-up, divided by the samples
the sampler wrote in that window (memmon and the floor stamp each row with the wall-clock ms; a
peer's samples are its rate times the window). Prints Markdown tables (copied into BENCHMARKS.md)
and the spread of each ratio over the rounds.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.abspath("target/release/memmon-test")
PE = shutil.which("prometheus-process-exporter")
PSRECORD = shutil.which("psrecord")
PEAK_MEM = shutil.which("peak-mem")
MIB = 1 << 20

RATES = [(1, "1s"), (10, "100ms"), (1000, "1ms"), (10000, "100us")]


# ---------------------------------------------------------------- measuring a process


def cpu_ns(pid):
    """CPU time of every thread of `pid`, nanoseconds (schedstat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def hwm_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def rows_between(path, t0_ms, t1_ms):
    """Rows of a CSV whose first field (wall-clock ms) falls in [t0_ms, t1_ms)."""
    n = 0
    with open(path, "rb") as f:
        for line in f:
            head = line.split(b",", 1)[0]
            if head.isdigit() and t0_ms <= int(head) < t1_ms:
                n += 1
    return n


class Result:
    def __init__(self, cpu_ns, samples, seconds, hwm=None, exact=True):
        self.cpu_ns, self.samples, self.seconds, self.hwm, self.exact = cpu_ns, samples, seconds, hwm, exact

    @property
    def per_sample_us(self):
        return self.cpu_ns / 1e3 / max(self.samples, 1)

    @property
    def ms_per_s(self):
        return self.cpu_ns / 1e6 / self.seconds


def window(p, warm, seconds):
    """Waits `warm`, then measures `p`'s CPU over `seconds`; returns (cpu ns, t0 ms, t1 ms, hwm)."""
    time.sleep(warm)
    if p.poll() is not None:
        raise SystemExit(f"{p.args[0]} exited early ({p.returncode})")
    c0, t0 = cpu_ns(p.pid), time.time()
    time.sleep(seconds)
    c1, t1 = cpu_ns(p.pid), time.time()
    return c1 - c0, int(t0 * 1000), int(t1 * 1000), hwm_bytes(p.pid)


# ---------------------------------------------------------------- samplers


class Sampler:
    """One sampler: `start(pids, interval, out)` returns the process; `samples(...)` the rows it
    wrote in the window."""

    exact = True

    def supports(self, rate_hz):
        return True

    def samples(self, out, t0_ms, t1_ms, rate_hz):
        return rows_between(out, t0_ms, t1_ms)

    def run(self, tmp, pids, rate_hz, interval, warm, seconds):
        out = os.path.join(tmp, f"{self.key}-{time.monotonic_ns()}.csv")
        p = self.start(pids, interval, out)
        try:
            c, t0, t1, hwm = window(p, warm, seconds)
        finally:
            stop(p)
        n = self.samples(out, t0, t1, rate_hz)
        return Result(c, n, (t1 - t0) / 1000, hwm, self.exact)


class Floor(Sampler):
    """The C floor; `flush`: a write per tick; `tree`: statm for the PIDs after the first;
    `mine`: memmon's reads (status with stat, PSI; no children files: floor.c's -m)."""

    def __init__(self, binary, flush=False, tree=False, mine=False):
        self.binary = binary
        self.flags = (["-f"] if flush else []) + (["-t"] if tree else []) + (["-m"] if mine else [])
        self.key = "floor-m" if mine else "floor-f" if flush else "floor"
        self.name = ("C floor of memmon's reads, a write per tick" if mine
                     else "C floor, a write per tick" if flush else "C floor")

    def start(self, pids, interval, out):
        ns = interval_ns(interval)
        return subprocess.Popen([self.binary] + self.flags + [str(ns), out] + [str(p) for p in pids])


class Memmon(Sampler):
    def __init__(self, label, binary):
        self.key, self.name, self.binary = f"memmon-{label}", f"memmon ({label})", binary

    def start(self, pids, interval, out):
        # The marker socket in a directory of its own: `memmon mark` clients of other users of
        # the machine probe the default one's sockets, and each probe wakes memmon.
        return subprocess.Popen([self.binary, "record", "-q", "--force", "-i", interval,
                                 "--socket", out + ".sock", "--pid", str(pids[0]), "-o", out],
                                stdout=subprocess.DEVNULL)


class Psrecord(Sampler):
    key, name, exact = "psrecord", "psrecord", False

    def start(self, pids, interval, out):
        return subprocess.Popen([PSRECORD, str(pids[0]), "--interval", str(interval_ns(interval) / 1e9),
                                 "--log", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def samples(self, out, t0_ms, t1_ms, rate_hz):
        # The log's first column is seconds since psrecord started: its own rate over the run.
        times = []
        with open(out) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    times.append(float(line.split()[0]))
        if len(times) < 2:
            return 0
        rate = (len(times) - 1) / (times[-1] - times[0])
        return round(rate * (t1_ms - t0_ms) / 1000)


class PeakMem(Sampler):
    """peak-mem launches its command (it does not attach): it runs its own `sleep`."""

    key, name, exact = "peak-mem", "peak-mem", False

    def start(self, pids, interval, out):
        ms = max(1, interval_ns(interval) // 1_000_000)
        return subprocess.Popen([PEAK_MEM, "--interval", str(ms), "--", "sleep", "100000"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def supports(self, rate_hz):
        return rate_hz <= 1000  # its interval is in whole milliseconds

    def samples(self, out, t0_ms, t1_ms, rate_hz):
        return round(rate_hz * (t1_ms - t0_ms) / 1000)


def interval_ns(text):
    m = re.fullmatch(r"(\d+)(us|ms|s)", text)
    return int(m.group(1)) * {"us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}[m.group(2)]


# ---------------------------------------------------------------- targets


def idle():
    return subprocess.Popen(["sleep", "100000"])


def threaded(n=256):
    code = ("import threading,time\n"
            f"for _ in range({n - 1}): threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()\n"
            "print('ready', flush=True)\ntime.sleep(1e6)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    p.stdout.readline()
    return p


def tree(tmp, count, name="benchtree-sh"):
    """A parent (a copy of bash named `name`) with `count` sleeping children."""
    sh = os.path.join(tmp, name)
    shutil.copy("/bin/bash", sh)
    p = subprocess.Popen([sh, "-c", f"for i in $(seq {count}); do sleep 100000 & done; wait"])
    for _ in range(1200):
        if len(children(p.pid)) >= count:
            break
        time.sleep(0.1)
    return p


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def end_tree(p):
    """Ends the parent first, then its children: a bash still waiting would print `Killed` for
    each child killed under it."""
    kids = children(p.pid)
    p.kill()
    p.wait()
    for c in kids:
        try:
            os.kill(c, signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------- reporting


class Table:
    """Per-sample CPU of each sampler in each round; ratios to a reference within the round."""

    def __init__(self, title, ref="floor"):
        self.title, self.ref, self.rows = title, ref, {}

    def add(self, case, key, name, r):
        self.rows.setdefault(case, {}).setdefault(key, (name, []))[1].append(r)

    def ratio(self, case, key, ref=None):
        ref = ref or self.ref
        rows = self.rows[case]
        if key not in rows or ref not in rows:
            return []
        return [a.per_sample_us / b.per_sample_us for a, b in zip(rows[key][1], rows[ref][1])]

    def print(self, extra=None):
        print(f"\n### {self.title}\n")
        print("| case | sampler | CPU per sample (median) | × the floor, median (range) | "
              "× the floor with a write per tick | × the floor of memmon's reads | "
              "samples in window (each round) |")
        print("|---|---|---|---|---|---|---|")
        for case, rows in self.rows.items():
            for key, (name, rs) in rows.items():
                per = statistics.median(r.per_sample_us for r in rs)
                approx = "" if all(r.exact for r in rs) else " (rate × window)"
                cells = []
                for ref, bold in ((self.ref, True), ("floor-f", False), ("floor-m", False)):
                    q = self.ratio(case, key, ref)
                    if key == ref:
                        cells.append("1")
                    elif q:
                        m = f"{statistics.median(q):.2f}×"
                        cells.append((f"**{m}**" if bold else m) + f" ({min(q):.2f}–{max(q):.2f})")
                    else:
                        cells.append("")
                n = "/".join(str(r.samples) for r in rs)
                print(f"| {case} | {name} | {per:.1f} µs | {cells[0]} | {cells[1]} | {cells[2]} "
                      f"| {n}{approx} |")
        if extra:
            extra()
        sys.stdout.flush()


def rotate(xs, r):
    r %= max(len(xs), 1)
    return xs[r:] + xs[:r]


# ---------------------------------------------------------------- the benchmarks


def bench_idle(tmp, floors, memmons, peers, rounds, quick):
    t = Table("One idle process (`sleep`), CPU per sample")
    hwm = {}
    windows = {1: 15, 10: 10, 1000: 5, 10000: 5}
    for r in range(rounds):
        for rate, interval in RATES:
            target = idle()
            try:
                for s in rotate(floors + memmons + [p for p in peers if p.supports(rate)], r):
                    secs = windows[rate] / (2 if quick else 1)
                    res = s.run(tmp, [target.pid], rate, interval, 2.0, secs)
                    t.add(f"{rate:,} Hz", s.key, s.name, res)
                    if rate == 10 and res.hwm:
                        hwm.setdefault(s.name, []).append(res.hwm)
            finally:
                target.kill()
                target.wait()
        print(f"(idle: round {r + 1} of {rounds} done)", file=sys.stderr, flush=True)

    def own_rss():
        print("\nOwn max RSS (VmHWM at the end of the 10 Hz window), median over the rounds:\n")
        print("| sampler | max RSS |")
        print("|---|---|")
        for name, v in hwm.items():
            print(f"| {name} | {statistics.median(v) / MIB:.2f} MiB |")

    t.print(own_rss)
    return t


def bench_threads(tmp, floors, memmons, rounds, quick):
    t = Table("A daemon of 256 threads, and one of 1 thread, at 1 Hz (`-i 1s`), CPU per sample")
    secs = 8 if quick else 15
    for r in range(rounds):
        for n in (256, 1):
            target = threaded(n)
            try:
                for s in rotate(floors + memmons, r):
                    t.add(f"{n} thread{'s' if n > 1 else ''}", s.key, s.name,
                          s.run(tmp, [target.pid], 1, "1s", 2.0, secs))
            finally:
                target.kill()
                target.wait()
        print(f"(threads: round {r + 1} of {rounds} done)", file=sys.stderr, flush=True)

    def per_thread_count():
        print("\nmemmon's cost for 256 threads over its cost for 1 thread, within each round:\n")
        for m in memmons:
            a = [x.per_sample_us for x in t.rows["256 threads"][m.key][1]]
            b = [x.per_sample_us for x in t.rows["1 thread"][m.key][1]]
            q = [x / y for x, y in zip(a, b)]
            print(f"- {m.name}: {statistics.median(q):.2f}× ({min(q):.2f}–{max(q):.2f})")

    t.print(per_thread_count)
    return t


def bench_tree(tmp, floors, memmons, rounds, quick):
    t = Table("A tree of 101 processes (a shell and 100 idle children), CPU per sample")
    windows = {1: 15, 10: 10, 100: 5}
    parent = tree(tmp, 100)
    try:
        pids = [parent.pid] + children(parent.pid)
        for r in range(rounds):
            for rate, interval in [(1, "1s"), (10, "100ms"), (100, "10ms")]:
                for s in rotate(floors + memmons, r):
                    secs = windows[rate] / (2 if quick else 1)
                    t.add(f"{rate} Hz", s.key, s.name, s.run(tmp, pids, rate, interval, 2.0, secs))
            print(f"(tree: round {r + 1} of {rounds} done)", file=sys.stderr, flush=True)
    finally:
        end_tree(parent)
    t.print()
    return t


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        return r.read()


def export_window(p, port, seconds, every):
    """Scrapes every `every` s for `seconds` (the first scrape at once); CPU ms per s."""
    for _ in range(300):
        try:
            scrape(port)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"no exporter on port {port}")
    time.sleep(2)
    c0, t0 = cpu_ns(p.pid), time.monotonic()
    next_scrape = t0
    while True:
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        if now >= next_scrape:
            scrape(port)
            next_scrape += every
        time.sleep(max(0.0, min(next_scrape, t0 + seconds) - time.monotonic()))
    return (cpu_ns(p.pid) - c0) / 1e6 / (time.monotonic() - t0)


def floor_window(p, seconds):
    """A floor's CPU ms per s over `seconds`, after the same 2 s of warm-up as an exporter's."""
    time.sleep(2)
    c0, t0 = cpu_ns(p.pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_ns(p.pid) - c0) / 1e6 / (time.monotonic() - t0)


def bench_export(tmp, memmons, rounds, quick, floor):
    if not PE:
        print("\n(export: prometheus-process-exporter is not installed; skipped)")
        return
    secs = 15 if quick else 30
    results = {}
    for r in range(rounds):
        for case in ("one daemon", "1,001 processes"):
            if case == "one daemon":
                sock, pidfile = os.path.join(tmp, "d.sock"), os.path.join(tmp, "d.pid")
                target = subprocess.Popen([TEST, "test-daemon", "--socket", sock, "--pidfile", pidfile])
                while not os.path.exists(pidfile):
                    time.sleep(0.05)
                spec, group = f"d=pid:{target.pid}", "memmon-test"
            else:
                target = tree(tmp, 1000)
                spec, group = f"t=pid:{target.pid}", "benchtree-sh"
            try:
                runs = [(m.name + ", 100 ms", lambda port, m=m: subprocess.Popen(
                    [m.binary, "export", "-q", "--listen", f"127.0.0.1:{port}", "--target", spec]))
                    for m in memmons]
                runs.append(("process-exporter, at each 15 s scrape", lambda port: subprocess.Popen(
                    [PE, "-procnames", group, "-web.listen-address", f"127.0.0.1:{port}",
                     "-threads=false", "-gather-smaps=false"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
                if case == "one daemon":
                    # What any sampler at 100 ms pays here: the wake-ups alone, and the C floor's
                    # reads (status and children, a buffered line).
                    out = os.path.join(tmp, "export-floor.csv")
                    for name, flags in (("C floor, wake-ups only, 100 ms", ["-w"]),
                                        ("C floor, 100 ms", [])):
                        runs.append((name, lambda port, flags=flags: subprocess.Popen(
                            [floor, *flags, "100000000", out, str(target.pid)])))
                for name, start in rotate(runs, r):
                    port = free_port()
                    p = start(port)
                    try:
                        if name.startswith("C floor"):
                            v = floor_window(p, secs)
                        else:
                            v = export_window(p, port, secs, 15)
                    finally:
                        stop(p)
                    results.setdefault(case, {}).setdefault(name, []).append(v)
            finally:
                if case == "one daemon":
                    target.kill()
                    target.wait()
                    os.remove(pidfile)
                else:
                    end_tree(target)
        print(f"(export: round {r + 1} of {rounds} done)", file=sys.stderr, flush=True)
    print(f"\n### export, scraped every 15 s, CPU over {secs} s windows\n")
    print("| target | exporter, sampling | CPU ms per s (median) | × process-exporter, median (range) |")
    print("|---|---|---|---|")
    for case, rows in results.items():
        pe = rows["process-exporter, at each 15 s scrape"]
        for name, v in rows.items():
            q = [a / b for a, b in zip(v, pe)]
            print(f"| {case} | {name} | {statistics.median(v):.3f} | "
                  f"{statistics.median(q):.2f}× ({min(q):.2f}–{max(q):.2f}) |")
    sys.stdout.flush()


def make_recording(tmp, binary, path, gib):
    """Writes a recording of about `gib` GiB at `path` whose header is `binary`'s own (taken
    from a short real recording): a 10 Hz daemon's rows. Returns (rows, columns)."""
    header_src = os.path.join(tmp, "header.csv")
    target = idle()
    try:
        subprocess.run([binary, "record", "-q", "--force", "-i", "10ms", "--duration", "100ms",
                        "--pid", str(target.pid), "-o", header_src], check=True)
    finally:
        target.kill()
        target.wait()
    with open(header_src) as f:
        header = f.readline().rstrip("\n")
    cols = header.split(",")
    empty_when_off = ("pss_bytes", "event_lag_us", "event")
    size_goal = int(gib * (1 << 30))
    with open(path, "w") as f:
        f.write(header + "\n")
        written, i, t0 = len(header) + 1, 0, 1771372328313
        while written < size_goal:
            out = []
            for _ in range(100_000):
                rss = 48_000_000_000 + ((i * 7919) % 100_000) * 1_048_576
                vals = {"unix_ms": t0 + i * 100, "elapsed_s": f"{i * 0.1:.6f}", "rss_bytes": rss,
                        "anon_bytes": rss - 600_000_000, "file_bytes": 600_000_000, "processes": 11,
                        "top_pid": 4242, "top_rss_bytes": rss - 1_000_000, "hwm_bytes": rss + 5_000_000,
                        "hwm_sum_bytes": rss + 9_000_000, "vm_size_bytes": rss * 2, "threads": 40}
                # Columns of sources that are off (GPU, cgroup) are empty, the others 0.
                out.append(",".join(str(vals.get(c, "" if c in empty_when_off or c.startswith(
                    ("gpu", "cgroup", "nvidia")) else 0)) for c in cols))
                i += 1
            chunk = "\n".join(out) + "\n"
            f.write(chunk)
            written += len(chunk)
    check = subprocess.run([binary, "summary", "--json", path], capture_output=True)
    if check.returncode != 0 or json.loads(check.stdout)["samples"] != i:
        raise SystemExit(f"the generated recording does not read back: {check.stderr.decode()[:500]}")
    return i, len(cols)


def bench_read(tmp, memmons, rounds, gib):
    """`memmon summary` of a generated recording whose header is this memmon's own."""
    path = os.path.join(tmp, "big.csv")
    i, ncols = make_recording(tmp, memmons[0].binary, path, gib)
    size = os.path.getsize(path)
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL)  # the page cache warm
    times = {}
    for r in range(rounds):
        for m in rotate(memmons, r):
            t = time.monotonic()
            subprocess.run([m.binary, "summary", path], stdout=subprocess.DEVNULL, check=True)
            times.setdefault(m.name, []).append(time.monotonic() - t)
    instructions = instructions_per_row(tmp, path, memmons)
    os.remove(path)
    print(f"\n### summary of a {size / (1 << 30):.2f} GiB recording ({i:,} rows, {ncols} columns), "
          f"page cache warm, {rounds} runs each\n")
    print("| memmon | wall, median (range) | throughput |")
    print("|---|---|---|")
    for name, v in times.items():
        print(f"| {name} | {statistics.median(v):.2f} s ({min(v):.2f}–{max(v):.2f}) | "
              f"**{size / statistics.median(v) / 1e9:.2f} GB/s** |")
    if instructions:
        rows = instructions.pop("rows")
        print(f"\nInstructions a row, counted by cachegrind (the same within 0.01% at any load) in `memmon "
              f"summary` of the first {rows:,} rows:\n")
        print("| memmon | instructions | a row | against the first |")
        print("|---|---|---|---|")
        first = next(iter(instructions.values()))
        for name, n in instructions.items():
            print(f"| {name} | {n:,} | {n / rows:,.0f} | {n / first:.4f}x |")
    sys.stdout.flush()


def instructions_per_row(tmp, path, memmons, rows=200_000):
    """Instructions each memmon runs for `summary` of the first `rows` rows of `path`, counted
    by valgrind's cachegrind: timings on a shared machine vary by 10% from run to run, this count
    by less than 0.01%. {} when valgrind is not installed."""
    if not shutil.which("valgrind"):
        print("(valgrind not installed: no instruction counts)", file=sys.stderr)
        return {}
    cut = os.path.join(tmp, "cut.csv")
    with open(path) as src, open(cut, "w") as dst:
        for n, line in enumerate(src):
            if n > rows:
                break
            dst.write(line)
    counts = {"rows": rows}
    for m in memmons:
        out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                              "--cachegrind-out-file=/dev/null", m.binary, "summary", cut],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
        refs = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        counts[m.name] = int(refs.group(1).replace(",", ""))
    os.remove(cut)
    return counts


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="half-length windows")
    ap.add_argument("--only", default="idle,threads,tree,export,read")
    ap.add_argument("--memmon", action="append", metavar="LABEL=PATH",
                    help="a memmon binary to measure (repeatable); default: target/release/memmon")
    ap.add_argument("--read-gib", type=float, default=1.0)
    a = ap.parse_args()
    only = set(a.only.split(","))
    memmons = [Memmon(*m.split("=", 1)) for m in (a.memmon or ["memmon=target/release/memmon"])]
    for m in memmons:
        m.binary = os.path.abspath(m.binary)
        if not os.access(m.binary, os.X_OK):
            sys.exit(f"{m.binary}: not found; build first: cargo build --release --features test-support")
    if os.geteuid() != 0:
        print("(not root: memmon reads no exit records and uses no process events connector)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        floor = os.path.join(tmp, "floor")
        subprocess.run(["cc", "-O2", "-o", floor, os.path.join(HERE, "floor.c")], check=True)
        peers = [s() for s, path in ((Psrecord, PSRECORD), (PeakMem, PEAK_MEM)) if path]
        missing = [n for n, path in (("psrecord", PSRECORD), ("peak-mem", PEAK_MEM)) if not path]
        print(f"# memmon's cost, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
              f"load average at the start {load()}; {a.rounds} rounds"
              + (f"; not installed: {', '.join(missing)}" if missing else ""))
        t0 = time.monotonic()
        floors = [Floor(floor), Floor(floor, flush=True), Floor(floor, flush=True, mine=True)]
        if "idle" in only:
            bench_idle(tmp, floors, memmons, peers, a.rounds, a.quick)
        if "threads" in only:
            bench_threads(tmp, floors, memmons, a.rounds, a.quick)
        if "tree" in only:
            bench_tree(tmp, [Floor(floor, tree=True), Floor(floor, flush=True, tree=True),
                             Floor(floor, flush=True, tree=True, mine=True)], memmons,
                       a.rounds, a.quick)
        if "export" in only:
            bench_export(tmp, memmons, a.rounds, a.quick, floor)
        if "read" in only:
            bench_read(tmp, memmons, a.rounds, a.read_gib)
        print(f"\n(load average at the end {load()}; {time.monotonic() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
