#!/usr/bin/env python3
"""Peak accuracy and CPU per sample of memmon and its peers, side by side in one run.

Run from the repository root after `cargo build --release --features test-support`
(memmon-test, the workload of known memory, needs the feature):

    python3 benchmarks/accuracy.py [--rounds 2] [--cpu-seconds 10]

Peers are found on PATH and left out (named in the output) when missing: psrecord and mprof
(`pip install psrecord memory_profiler psutil`), GNU time (`apt-get install time`, run as
/usr/bin/time), peak-mem (`cargo install peak-mem`). Each tool's version is printed in the
table header. Prints Markdown (copied into BENCHMARKS.md).

Accuracy: each tool launches each workload (`memmon-test workload STEPS`, whose peak is known)
at its interval; the table gives the tool's reported peak divided by the true peak. The true
peak is the kernel's: `ru_maxrss` (the VmHWM at exit) of the same workload run alone under
`wait4`, checked against the size the steps allocate.

CPU per sample: each tool launches `sleep S` at its interval; its CPU is `wait4`'s
user+sys of the tool (start-up included) less that of `sleep S` alone, divided by the samples
it took.
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
WORKLOAD = os.path.abspath("target/release/memmon-test")
MiB = 1 << 20

# (name, steps, bytes the steps hold at their peak)
WORKLOADS = [
    ("20 ms spike of 300 MiB at 0.3 s", ["alloc:50MiB", "hold:300ms", "spike:300MiB:20ms", "hold:2700ms"],
     350 * MiB),
    ("20 ms spike of 300 MiB at 1.5 s", ["alloc:50MiB", "hold:1500ms", "spike:300MiB:20ms", "hold:1500ms"],
     350 * MiB),
    ("20 ms spike of 300 MiB just before exit", ["alloc:50MiB", "hold:2500ms", "spike:300MiB:20ms"],
     350 * MiB),
    ("ramp to 400 MiB in 2 s, then freed", ["ramp:400MiB:2s", "hold:300ms", "free", "hold:700ms"],
     400 * MiB),
]


def wait_measured(argv, **kw):
    """Runs argv to completion; returns (exit code, CPU seconds, ru_maxrss bytes, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, time.monotonic() - t0


def quiet():
    return dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def first_line(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    return (out.stdout + out.stderr).strip().splitlines()[0]


def python_package_version(script, package):
    """The version of `package` in the interpreter that runs `script` (its #! line)."""
    with open(script) as f:
        interp = f.readline()[2:].strip().split()
    return subprocess.run(interp + ["-c", f"import importlib.metadata as m; print(m.version('{package}'))"],
                          capture_output=True, text=True, check=True).stdout.strip()


class Tool:
    """One monitor: how to launch a command under it at an interval, and read back its
    reported peak and sample count. `run` returns (peak bytes, samples, CPU seconds)."""

    def __init__(self, name, version, intervals):
        self.name, self.version, self.intervals = name, version, intervals


class Memmon(Tool):
    def __init__(self, tmp):
        super().__init__("memmon", first_line([MEMMON, "--version"]).split()[-1], [1.0, 0.1])
        self.tmp = tmp

    def run(self, argv, interval):
        self.runs = getattr(self, "runs", 0) + 1
        out = os.path.join(self.tmp, f"memmon-{self.runs}.csv")  # a fresh file (and sidecar) each run
        rc, cpu, _, _ = wait_measured([MEMMON, "record", "-q", "-i", f"{int(interval * 1000)}ms", "-o", out,
                                       "--"] + argv, stdout=subprocess.DEVNULL)
        if rc != 0:
            sys.exit(f"memmon record exited {rc}")
        s = json.loads(subprocess.run([MEMMON, "summary", "--json", out], check=True,
                                      capture_output=True).stdout)
        self.last_sampled = s["peak_rss_bytes"]
        return s["recording_peak"]["bytes"], s["samples"], cpu


class Psrecord(Tool):
    def __init__(self, tmp, path):
        super().__init__("psrecord", python_package_version(path, "psrecord"), [1.0, 0.1])
        self.tmp, self.path = tmp, path

    def run(self, argv, interval):
        log = os.path.join(self.tmp, "psrecord.txt")
        # psrecord runs a command with `sh -c` and watches that shell: without the `exec` it
        # reports the shell's 1.7 MiB (measured: 0.00 of every peak below).
        _, cpu, _, _ = wait_measured([self.path, "exec " + " ".join(argv), "--interval", str(interval),
                                      "--log", log],
                                     **quiet())
        rss = []
        with open(log) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    rss.append(float(line.split()[2]))  # elapsed, CPU %, real MB (MiB), virtual MB
        return max(rss) * MiB if rss else 0, len(rss), cpu


class Mprof(Tool):
    def __init__(self, tmp, path):
        super().__init__("mprof (memory_profiler)", python_package_version(path, "memory_profiler"), [1.0, 0.1])
        self.tmp, self.path = tmp, path

    def run(self, argv, interval):
        dat = os.path.join(self.tmp, "mprof.dat")
        _, cpu, _, _ = wait_measured([self.path, "run", "--nopython", "-T", str(interval), "-o", dat] + argv,
                                     **quiet())
        mem = []
        with open(dat) as f:
            for line in f:
                if line.startswith("MEM "):
                    mem.append(float(line.split()[1]))  # MiB
        os.remove(dat)
        return max(mem) * MiB if mem else 0, len(mem), cpu


class GnuTime(Tool):
    """No sampling: one wait4 at exit (`%M`, ru_maxrss in KiB)."""

    def __init__(self, tmp):
        # `time --version` says UNKNOWN on Debian; the package's version is the one to give.
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "time"], capture_output=True,
                                 text=True).stdout.strip() or first_line(["/usr/bin/time", "--version"]).split()[-1]
        super().__init__("GNU time", version, [None])
        self.tmp = tmp

    def run(self, argv, interval):
        out = os.path.join(self.tmp, "time.txt")
        _, cpu, _, _ = wait_measured(["/usr/bin/time", "-f", "%M", "-o", out] + argv, **quiet())
        with open(out) as f:
            return int(f.read().split()[-1]) * 1024, 1, cpu


class PeakMem(Tool):
    def __init__(self, tmp, path):
        super().__init__("peak-mem", first_line([path, "--version"]).split()[-1], [1.0, 0.1])
        self.tmp, self.path = tmp, path

    def run(self, argv, interval):
        out = subprocess.Popen([self.path, "--json", "--verbose", "--interval", str(int(interval * 1000)), "--"]
                               + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(out.pid, 0)
        report = json.loads(out.stdout.read())
        samples = report["sample_count"]  # given with --verbose
        return report["peak_rss_bytes"], samples, ru.ru_utime + ru.ru_stime


def label(tool, interval):
    if interval is None:
        return f"{tool.name} {tool.version}, one wait4 at exit"
    return f"{tool.name} {tool.version}, {interval:g} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each workload under each tool")
    ap.add_argument("--cpu-seconds", type=int, default=10, help="length of the CPU runs on sleep")
    a = ap.parse_args()
    for p in (MEMMON, WORKLOAD):
        if not os.path.exists(p):
            sys.exit(f"{p} missing: build first: cargo build --release --features test-support")
    with tempfile.TemporaryDirectory() as tmp:
        tools, missing = [Memmon(tmp)], []
        for name, make in (("psrecord", lambda p: Psrecord(tmp, p)), ("mprof", lambda p: Mprof(tmp, p))):
            p = shutil.which(name)
            tools.append(make(p)) if p else missing.append(name)
        tools.append(GnuTime(tmp)) if os.path.exists("/usr/bin/time") else missing.append("GNU time")
        p = shutil.which("peak-mem")
        tools.append(PeakMem(tmp, p)) if p else missing.append("peak-mem")
        configs = [(t, i) for t in tools for i in t.intervals]

        # The true peaks: the kernel's, of each workload alone.
        truth = []
        for name, steps, size in WORKLOADS:
            hwms = [wait_measured([WORKLOAD, "workload"] + steps)[2] for _ in range(a.rounds)]
            truth.append(max(hwms))
            base = max(hwms) - size
            if not 0 <= base < 8 * MiB:
                sys.exit(f"workload {name!r}: kernel peak {max(hwms) / MiB:.1f} MiB, expected "
                         f"{size / MiB:.0f} MiB plus the binary's own few MiB")

        print(f"\n### Reported peak / true peak (kernel's VmHWM), {a.rounds} rounds each (lowest–highest)\n")
        print("| tool, interval | " + " | ".join(f"{n} (true {t / MiB:.0f} MiB)"
                                               for (n, _, _), t in zip(WORKLOADS, truth)) + " |")
        print("|---" * (len(WORKLOADS) + 1) + "|")
        memmon_sampled = {}
        for tool, interval in configs:
            cells = []
            for (name, steps, _), true_peak in zip(WORKLOADS, truth):
                ratios = []
                for _ in range(a.rounds):
                    peak, _, _ = tool.run([WORKLOAD, "workload"] + steps, interval)
                    ratios.append(peak / true_peak)
                    if isinstance(tool, Memmon):
                        memmon_sampled.setdefault((interval, name), []).append(tool.last_sampled / true_peak)
                lo, hi = min(ratios), max(ratios)
                cells.append(f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}")
            print(f"| {label(tool, interval)} | " + " | ".join(cells) + " |", flush=True)
        for interval in tools[0].intervals:  # memmon's
            cells = []
            for name, _, _ in WORKLOADS:
                r = memmon_sampled[(interval, name)]
                cells.append(f"{min(r):.2f}" if f"{min(r):.2f}" == f"{max(r):.2f}" else f"{min(r):.2f}–{max(r):.2f}")
            print(f"| (memmon's sampled peak alone, {interval:g} s) | " + " | ".join(cells) + " |")

        # CPU per sample on an idle launched process.
        secs = a.cpu_seconds
        sleep_cpu = wait_measured(["sleep", str(secs)])[1]
        print(f"\n### CPU per sample, launching `sleep {secs}` (start-up included, `sleep`'s own "
              f"{sleep_cpu * 1e3:.1f} ms taken off)\n")
        print("| tool, interval | samples | CPU total | CPU per sample | ratio to memmon at that interval |")
        print("|---|---|---|---|---|")
        memmon_per = {}
        for tool, interval in configs:
            _, n, cpu = tool.run(["sleep", str(secs)], interval)
            cpu = max(cpu - sleep_cpu, 0.0)
            per = cpu / max(n, 1)
            if isinstance(tool, Memmon):
                memmon_per[interval] = per
            ratio = f"{per / memmon_per[interval]:.1f}x" if memmon_per.get(interval) else "—"
            print(f"| {label(tool, interval)} | {n} | {cpu * 1e3:.1f} ms | {per * 1e6:.0f} µs | {ratio} |",
                  flush=True)
        if missing:
            print(f"\nNot installed, left out: {', '.join(missing)}.")


if __name__ == "__main__":
    main()
