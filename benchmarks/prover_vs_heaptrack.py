#!/usr/bin/env python3
"""Who holds a real prover's peak, memmon beside heaptrack: Filecoin's bellperson Groth16 prover
(CPU, benchmarks/bellperson-prover) reads its parameters from a file and makes N proofs in one
process; memmon records it with `--anatomy` and sampled page faults (`--touch-every`), and
Debian's heaptrack records the same command. Side by side:

- each allocation site heaptrack lists among its peak memory consumers, and what memmon credits
  to the same function at its highest anatomy (the resident memory by the code that first
  touched it);
- for each proof (a phase from one `proof K done` line to the next), how much of its resident
  growth memmon credits to named code;
- what each costs the prover: its CPU time (user + system) alone, under memmon and under
  heaptrack, and the CPU of memmon's ledger thread.

With --bench the prover is a daemon (`prover serve`: parameters read once, a proof for each
request) and memmon attaches to it as `memmon bench --anatomy` does, for --proofs runs of the
client (`prover request`); heaptrack launches the same daemon for the same requests. Printed
then: each run's resident growth and how much of it memmon credits to named code, heaptrack's
peak consumers beside memmon's credit at the highest run, and the daemon's CPU for the runs
alone, under memmon and under heaptrack.

Run from the repository root as root (the ledger needs CAP_PERFMON) after
`cargo build --release`:

    python3 benchmarks/prover_vs_heaptrack.py [--memmon target/release/memmon] [--log2 18]
        [--proofs 3] [--touch-every 64] [--work target/prover-bench]

It builds the prover (CARGO_TARGET_DIR=target/bellperson-prover, a few minutes the first time)
and its parameters (2^18 constraints: about 2 minutes and a 151 MB file, kept in --work), then
runs the prover alone, under memmon and under heaptrack, one after another. Prints Markdown.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Frames that are the allocator, the standard library or the copy that faulted, not the code
# that wanted the memory: skipped to find a stack's site.
SKIP = re.compile(
    r"^(_R|alloc::|core::|std::|<alloc::|<core::|<std::|hashbrown::|__|\[|malloc|realloc|calloc|"
    r"memcpy|memset|memmove|operator new|<u8 as alloc|<T as alloc)"
)


def normalize(name):
    """A function's name as both tools print it: legacy-mangled escapes decoded, the hash gone."""
    for a, b in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$u7b$", "{"), ("$u7d$", "}"),
                 ("$RF$", "&"), ("$C$", ","), ("..", "::")):
        name = name.replace(a, b)
    name = re.sub(r"::h[0-9a-f]{16}$", "", name.strip())
    # heaptrack's demangler leaves `_<T as Trait>`, `::_{{closure}}` where a legacy-mangled
    # segment began `_$LT$` or `_$u7b$`.
    name = name.replace("::_<", "::<").replace("::_{", "::{")
    return name[1:] if name.startswith("_<") else name


def site(frames):
    """The first frame of a stack (innermost first) that is not the allocator's or std's."""
    for f in frames:
        n = normalize(f)
        if n and not SKIP.match(n):
            return n
    return "(allocator or std only)"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def times(tfile):
    """/usr/bin/time's `%e %U %S %M` in `tfile`: wall s, CPU s, max RSS KiB."""
    e, u, s, m = open(tfile).read().split()[-4:]
    return float(e), float(u) + float(s), int(m)


def timed(cmd, out_path, again=True):
    """Runs `cmd` (stdout to `out_path`) under /usr/bin/time (unless not `again`: the last
    run's figures): wall s, CPU s, max RSS KiB."""
    tfile = out_path + ".time"
    if again:
        with open(out_path, "w") as out:
            run(["/usr/bin/time", "-o", tfile, "-f", "%e %U %S %M"] + cmd, stdout=out)
    return times(tfile)


def heaptrack_sites(data):
    """heaptrack's peak memory consumers, each full stack apart (-m 0), by site: bytes."""
    text = subprocess.run(
        ["heaptrack_print", "-m", "0", "--print-peaks", "1", "--print-allocators", "0",
         "--print-temporary", "0", "-n", "60", data],
        check=True, capture_output=True, text=True).stdout
    text = text.split("PEAK MEMORY CONSUMERS", 1)[1]
    sites = {}
    for block in re.split(r"\n(?=\S+ peak memory consumed)", text):
        m = re.match(r"\s*([\d.]+)([KMGT]?) peak memory consumed", block)
        if not m:
            continue
        scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]
        frames = [l.strip() for l in block.splitlines()[1:]
                  if l.startswith("  ") and not l.startswith("    ")]
        s = site(frames)
        sites[s] = sites.get(s, 0) + float(m.group(1)) * scale
    return sites


def memmon_sites(anatomies):
    """memmon's credit at the highest anatomy, by site: bytes; and the anatomy."""
    best = max((a for a in anatomies if (a.get("ledger") or {}).get("touch")),
               key=lambda a: a["rss_bytes"])
    sites = {}
    for g in best["ledger"]["touch"]["stacks"]:
        s = site([f["function"] for f in g["frames"]])
        sites[s] = sites.get(s, 0) + g["resident_bytes"]
    return sites, best


def daemon_cpu_s(pid):
    """utime + stime of `pid` (and its reaped children), seconds."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")


def serve(cmd, sock, log):
    """Starts the daemon `cmd` (stdout to `log`) and waits for its socket: the Popen."""
    if os.path.exists(sock):
        os.remove(sock)
    p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    for _ in range(1200):
        if os.path.exists(sock):
            return p
        if p.poll() is not None:
            raise SystemExit(f"the daemon exited ({p.returncode}) before its socket: see {log}")
        time.sleep(0.1)
    raise SystemExit(f"no socket {sock} after 120 s")


def prover_pid(p):
    """The prover's PID under `p` (itself, or the child of heaptrack's shell)."""
    for _ in range(100):
        out = subprocess.run(["pgrep", "-f", "-P", str(p.pid), "prover serve"],
                             capture_output=True, text=True).stdout.split()
        if p.args[0].endswith("prover"):
            return p.pid
        if out:
            return int(out[0])
        time.sleep(0.1)
    return p.pid


def bench(a, prover, params, w):
    """The prover as a daemon, memmon bench attached to it, and heaptrack beside (--bench)."""
    sock = w("d.sock")
    request = [prover, "request", sock]
    mib = lambda b: f"{b / 2**20:.2f} MiB"

    skip = set(filter(None, a.skip.split(",")))
    alone_cpu = memmon_cpu = ht_cpu = None

    # Alone: the same requests, nothing watching.
    if "alone" not in skip:
        d = serve([prover, "serve", params, str(a.log2), sock], sock, w("alone-daemon.log"))
        c0 = daemon_cpu_s(d.pid)
        for _ in range(a.proofs):
            run(request, stdout=subprocess.DEVNULL)
        alone_cpu = daemon_cpu_s(d.pid) - c0
        d.terminate()
        d.wait()

    # Under memmon bench, attached after the parameters are read, as a daemon is benched.
    out = w("bench.csv")
    if "memmon" not in skip:
        d = serve([prover, "serve", params, str(a.log2), sock], sock, w("memmon-daemon.log"))
        c0 = daemon_cpu_s(d.pid)
        for f in os.listdir(a.work):
            if f.startswith("bench.csv") or f == "bench.json":
                os.remove(w(f))
        run([a.memmon, "bench", "--pid", str(d.pid), "--anatomy", "--touch-every",
             str(a.touch_every), "-n", str(a.proofs), "-i", "200ms", "-q", "-o", out,
             "--export-json", w("bench.json"), "--"] + request, stdout=subprocess.DEVNULL)
        memmon_cpu = daemon_cpu_s(d.pid) - c0
        d.terminate()
        d.wait()
    report = json.load(open(w("bench.json")))
    summary = json.loads(subprocess.run([a.memmon, "summary", "--json", out], check=True,
                                        capture_output=True, text=True).stdout)
    ledger_cpu_s = summary["ledger"]["cpu_us"] / 1e6

    # Under heaptrack: it launches the daemon, which exits after the requests.
    if "heaptrack" not in skip:
        for f in os.listdir(a.work):
            if f.startswith("htb."):
                os.remove(w(f))
        d = serve(["heaptrack", "-o", w("htb"), prover, "serve", params, str(a.log2), sock,
                   str(a.proofs)], sock, w("heaptrack-daemon.log"))
        pid = prover_pid(d)
        c0 = daemon_cpu_s(pid)
        c1 = c0
        for _ in range(a.proofs):
            run(request, stdout=subprocess.DEVNULL)
            c1 = daemon_cpu_s(pid)
        d.wait()
        ht_cpu = c1 - c0
    ht_file = next((w(f) for f in os.listdir(a.work) if f.startswith("htb.")), None)
    if ht_file is None:
        print(f"(no heaptrack run in {a.work}: its side left out)\n")
    ht = heaptrack_sites(ht_file) if ht_file else {}

    code = ("binary", "library")
    print(f"## bellperson {a.log2} as a daemon: memmon bench, {a.proofs} runs, "
          f"--touch-every {a.touch_every}\n")
    print("| run | resident growth | of it in data mappings | credited to named code | share |")
    print("|---|---|---|---|---|")
    runs = report.get("anatomy", [])
    for g in runs:
        data = sum(c["delta_bytes"] for c in g.get("changes", []) if c["kind"] not in code)
        named = sum(t["delta_bytes"] for t in g.get("touches", [])
                    if site([f["function"] for f in t["frames"]]) != "(allocator or std only)")
        share = f"{named / data:.1%}" if data > 0 else "-"
        print(f"| {g['label']} | {mib(g['delta_bytes'])} | {mib(data)} | {mib(named)} | {share} |")
    # Each run's credit at its highest anatomy, by site: all of it, and what of it was written
    # in the run (`before_bytes` apart: where the kernel keeps soft-dirty bits, memory not
    # written since the run began keeps its earlier writer, and is counted so).
    side = [json.loads(l) for l in open(out + ".anatomy.jsonl")]
    by_run, fresh_by_run, rearmed = [], [], False
    for g in runs:
        spans = [x for x in side if x.get("span") == g["label"]
                 and ((x.get("ledger") or {}).get("touch"))]
        if not spans:
            by_run.append({})
            fresh_by_run.append({})
            continue
        top = max(spans, key=lambda x: x["rss_bytes"])
        t = top["ledger"]["touch"]
        rearmed = rearmed or t.get("rearms", 0) > 0
        mm, fresh = {}, {}
        for s in t["stacks"]:
            n = site([f["function"] for f in s["frames"]])
            mm[n] = mm.get(n, 0) + s["resident_bytes"]
            fresh[n] = fresh.get(n, 0) + s["resident_bytes"] - s.get("before_bytes", 0)
        by_run.append(mm)
        fresh_by_run.append(fresh)
    print("\nheaptrack's peak consumers beside memmon's credit to the same function at each run's "
          "highest anatomy (heaptrack saw the parameters read; memmon, attached after it, "
          "counts that memory as resident before the ledger began):\n")
    print("| site | heaptrack | " + " | ".join(f"memmon, {g['label']}" for g in runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    for name, b in sorted(ht.items(), key=lambda kv: -kv[1])[:8]:
        cells = " | ".join(f"{mib(mm.get(name, 0))} ({mm.get(name, 0) / b:.2f})" for mm in by_run)
        print(f"| `{name}` | {mib(b)} | {cells} |")
    if rearmed:
        print("\nThe same, what of it was written in the run (the tree's soft-dirty bits cleared "
              "at each run's start; the rest, not written since, is its earlier writer's):\n")
        print("| site | heaptrack | " + " | ".join(f"memmon, {g['label']}" for g in runs) + " |")
        print("|---|---|" + "---|" * len(runs))
        for name, b in sorted(ht.items(), key=lambda kv: -kv[1])[:8]:
            cells = " | ".join(f"{mib(mm.get(name, 0))} ({mm.get(name, 0) / b:.2f})"
                               for mm in fresh_by_run)
            print(f"| `{name}` | {mib(b)} | {cells} |")
    print("\n| sites memmon credits, each run | " + " | ".join(g["label"] for g in runs) + " |")
    print("|---|" + "---|" * len(runs))
    names = sorted({n for mm in by_run for n in mm}, key=lambda n: -max(mm.get(n, 0) for mm in by_run))
    for name in names[:8]:
        print(f"| `{name}` | " + " | ".join(mib(mm.get(name, 0)) for mm in by_run) + " |")
    lost = report.get("notes", [])
    print("\n| the daemon, for the runs | CPU (user + system) | ratio |\n|---|---|---|")
    for name, c in (("alone", alone_cpu), ("under memmon bench", memmon_cpu),
                    ("under heaptrack", ht_cpu)):
        if c is None:
            print(f"| {name} | (not run) | - |")
        else:
            ratio = f"{c / alone_cpu:.3f}" if alone_cpu else "-"
            print(f"| {name} | {c:.1f} s | {ratio} |")
    share = f" ({ledger_cpu_s / memmon_cpu:.2%} of the daemon's for the runs)" if memmon_cpu else ""
    print(f"\nmemmon's ledger thread: {ledger_cpu_s:.2f} s of CPU{share}")
    print(f"memmon's clearings of the soft-dirty bits: {summary['ledger'].get('rearms', 0)}, "
          f"{summary['ledger'].get('rearm_us', 0) / 1e3:.1f} ms in all")
    for n in lost:
        print(f"\nbench's note: {n}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memmon", default=os.path.join(ROOT, "target/release/memmon"))
    ap.add_argument("--log2", type=int, default=18)
    ap.add_argument("--proofs", type=int, default=3)
    ap.add_argument("--touch-every", type=int, default=64)
    ap.add_argument("--work", default=os.path.join(ROOT, "target/prover-bench"))
    ap.add_argument("--analyze", action="store_true",
                    help="compare the last runs' files in --work again, without running")
    ap.add_argument("--bench", action="store_true",
                    help="the prover as a daemon under memmon bench (attached), heaptrack beside")
    ap.add_argument("--skip", default="",
                    help="with --bench: runs to leave out, comma-separated (alone, memmon, "
                    "heaptrack); a skipped memmon or heaptrack run's files in --work are read")
    ap.add_argument("--prover", help="the prover built already (no cargo build)")
    ap.add_argument("--params", help="its parameters made already")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.prover:
        prover = a.prover
    else:
        env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target/bellperson-prover"))
        run(["cargo", "build", "--release", "--manifest-path",
             os.path.join(ROOT, "benchmarks/bellperson-prover/Cargo.toml")], env=env)
        prover = os.path.join(env["CARGO_TARGET_DIR"], "release/prover")
    params = a.params or os.path.join(a.work, f"params-{a.log2}.bin")
    if not os.path.exists(params):
        run([prover, "params", params + ".new", str(a.log2)])
        os.rename(params + ".new", params)
    prove = [prover, "prove", params, str(a.log2), str(a.proofs)]
    w = lambda name: os.path.join(a.work, name)
    if a.bench:
        return bench(a, prover, params, w)

    again = not a.analyze
    alone = timed(prove, w("alone.log"), again)

    rec = w("run.csv")
    for f in os.listdir(a.work):
        if f.startswith("run.csv") and again:
            os.remove(w(f))
    log = w("memmon.log")
    t0 = time.time()
    if again:
        open(log, "w").close()
        run([a.memmon, "record", "-q", "--anatomy", "-i", "200ms",
             "--touch-every", str(a.touch_every), "-o", rec, "--mark-log", log,
             "--mark-regex", r"(?P<label>params read|proof \d+ done)", "--",
             "sh", "-c",
             't=$1 l=$2; shift 2; exec /usr/bin/time -o "$t" -f "%e %U %S %M" "$@" > "$l"',
             "sh", w("memmon.time"), log] + prove)
    wall_memmon = time.time() - t0
    under_memmon = times(w("memmon.time"))

    for f in os.listdir(a.work):
        if f.startswith("ht.") and again:
            os.remove(w(f))
    under_ht = timed(["heaptrack", "-o", w("ht")] + prove, w("heaptrack.log"), again)
    ht_data = next(w(f) for f in os.listdir(a.work) if f.startswith("ht."))

    summary = json.loads(subprocess.run([a.memmon, "summary", "--json", rec], check=True,
                                        capture_output=True, text=True).stdout)
    anatomies = [json.loads(l) for l in open(rec + ".anatomy.jsonl")]
    mm, best = memmon_sites(anatomies)
    ht = heaptrack_sites(ht_data)
    ledger_cpu_s = summary["ledger"]["cpu_us"] / 1e6

    mib = lambda b: f"{b / 2**20:.2f} MiB"
    print(f"## bellperson {a.log2}: {a.proofs} proofs, memmon --touch-every {a.touch_every}\n")
    print(f"memmon's highest anatomy at +{best['elapsed_s']:.1f} s, RSS {mib(best['rss_bytes'])}; "
          f"{best['ledger']['touch']['samples']} samples\n")
    print("| site (heaptrack's peak consumers, largest first) | heaptrack | memmon | memmon / heaptrack |")
    print("|---|---|---|---|")
    for name, b in sorted(ht.items(), key=lambda kv: -kv[1])[:10]:
        got = mm.get(name, 0)
        print(f"| `{name}` | {mib(b)} | {mib(got)} | {got / b:.2f} |")
    print("\n| sites memmon credits at its highest anatomy | memmon |\n|---|---|")
    for name, b in sorted(mm.items(), key=lambda kv: -kv[1])[:8]:
        print(f"| `{name}` | {mib(b)} |")

    # A phase's growth in data mappings: not the program's and libraries' code paged in.
    code = ("binary", "library")
    print("\n| phase (from its marker to the next) | resident growth | of it in data mappings "
          "| credited to named code | share of the data growth |\n|---|---|---|---|---|")
    for g in summary.get("phase_anatomy", []):
        grew = g["delta_bytes"]
        data = sum(c["delta_bytes"] for c in g.get("changes", []) if c["kind"] not in code)
        named = sum(c["delta_bytes"] for c in g.get("touches", [])
                    if site([f["function"] for f in c["frames"]]) != "(allocator or std only)")
        if data > 0:
            print(f"| {g['label']} | {mib(grew)} | {mib(data)} | {mib(named)} | {named / data:.1%} |")

    print("\n| the prover | wall | CPU (user + system) | max RSS |\n|---|---|---|---|")
    for name, (e, c, m) in (("alone", alone), ("under memmon", under_memmon),
                            ("under heaptrack", under_ht)):
        print(f"| {name} | {e:.1f} s | {c:.1f} s ({c / alone[1]:.3f}x) | {m / 1024:.1f} MiB |")
    print(f"\nmemmon's ledger thread: {ledger_cpu_s:.2f} s of CPU "
          f"({ledger_cpu_s / under_memmon[1]:.2%} of the prover's)")


if __name__ == "__main__":
    sys.exit(main())
