#!/usr/bin/env python3
"""The flip race of issue 18, run many times: does memmon ever write into a private file whose
name another user flips with a device?

Run from the repository root after `cargo build` (or give the binary with --memmon):

    python3 benchmarks/flip_race.py [--runs 900] [--memmon target/debug/memmon]

In a temporary directory, two threads flip the names `out.svg` and `side.csv.meta.json`
between a 0600 "victim" file and a character device like /dev/null (`mknod c 1 3`; a FIFO
with a reader held open when not root), each time by a hard link renamed over the name: what a
user who can write the output directory (a 1777 /tmp) does to race a `stat` before an `open`.
Meanwhile memmon writes there, in turn: a recording (`record -o out.svg`), a recording's
sidecar (`record -o side.csv`), a plot, a report and a bench export, each without and with
`--force`. After every run the victim's content and modification time are compared with what
they were; any change counts as a run that touched it (the victim is then restored). A run
that does not end within 60 s counts as hung.

Prints the runs, the flips, how many runs touched the victim or hung, and each kind's exit
codes. memmon before issue 18 wrote into the victim in about 2% of the runs.
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

VICTIM_TEXT = b"root:$6$precious:19000:0:99999:7:::\n"


def flipper(directory, name, sources, stop, counter):
    target = os.path.join(directory, name)
    while not stop.is_set():
        for i, src in enumerate(sources):
            tmp = os.path.join(directory, f".flip-{name}-{i}")
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            try:
                os.link(src, tmp)
                os.rename(tmp, target)
                counter[0] += 1
            except OSError:
                pass


def drain(path, stop):
    """Holds a reader on the FIFO and throws away what comes (the FIFO is the "device")."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    while not stop.is_set():
        try:
            if not os.read(fd, 65536):
                time.sleep(0.005)
        except BlockingIOError:
            time.sleep(0.005)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=900)
    ap.add_argument("--memmon", default="target/debug/memmon")
    args = ap.parse_args()
    memmon = os.path.abspath(args.memmon)
    if not os.access(memmon, os.X_OK):
        sys.exit(f"no memmon at {memmon}: build it first (cargo build)")

    work = tempfile.mkdtemp(prefix="memmon-flip-")
    stop = threading.Event()
    threads = []
    target = None
    try:
        victim = os.path.join(work, "victim")

        def restore():
            with open(victim, "wb") as f:
                f.write(VICTIM_TEXT)
            os.chmod(victim, 0o600)
            return os.stat(victim).st_mtime_ns

        mtime = restore()
        node = os.path.join(work, "null")
        if os.geteuid() == 0:
            os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
            kind = "a character device (1:3, /dev/null)"
        else:
            os.mkfifo(node, 0o600)
            threads.append(threading.Thread(target=drain, args=(node, stop), daemon=True))
            kind = "a FIFO with a reader (not root: no mknod)"
        rec = os.path.join(work, "rec.csv")
        target = subprocess.Popen(["sleep", "3600"])
        subprocess.run(
            [memmon, "record", "-q", "-i", "20ms", "--duration", "200ms", "--pid", str(target.pid), "-o", rec],
            check=True,
        )
        flips = [[0], [0]]
        for i, name in enumerate(["out.svg", "side.csv.meta.json"]):
            threads.append(
                threading.Thread(target=flipper, args=(work, name, [victim, node], stop, flips[i]), daemon=True)
            )
        for t in threads:
            t.start()

        out = os.path.join(work, "out.svg")
        side_rec = os.path.join(work, "side.csv")
        record = [memmon, "record", "-q", "-i", "20ms", "--duration", "100ms", "--format", "csv",
                  "--pid", str(target.pid), "-o"]
        kinds = [
            ("record", record + [out]),
            ("record --force", record + [out, "--force"]),
            ("sidecar", record + [side_rec]),
            ("sidecar --force", record + [side_rec, "--force"]),
            ("plot", [memmon, "plot", rec, "-o", out]),
            ("plot --force", [memmon, "plot", rec, "-o", out, "--force"]),
            ("report", [memmon, "report", rec, "-o", out]),
            ("report --force", [memmon, "report", rec, "-o", out, "--force"]),
            ("bench export", [memmon, "bench", "-q", "-n", "1", "--export-json", out, "--", "true"]),
            ("bench export --force", [memmon, "bench", "-q", "-n", "1", "--force", "--export-json", out, "--", "true"]),
        ]
        codes = collections.defaultdict(collections.Counter)
        touched = collections.Counter()
        hung = 0
        started = time.time()
        for run in range(args.runs):
            what, cmd = kinds[run % len(kinds)]
            try:
                os.unlink(side_rec)
            except FileNotFoundError:
                pass
            try:
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
                codes[what][p.returncode] += 1
            except subprocess.TimeoutExpired:
                hung += 1
                codes[what]["hung"] += 1
            with open(victim, "rb") as f:
                text = f.read()
            if text != VICTIM_TEXT or os.stat(victim).st_mtime_ns != mtime:
                touched[what] += 1
                mtime = restore()
        elapsed = time.time() - started
    finally:
        stop.set()
        if target is not None:
            target.kill()
            target.wait()
        for t in threads:
            t.join(timeout=5)
        shutil.rmtree(work, ignore_errors=True)

    print(f"memmon: {memmon}")
    print(f"device: {kind}")
    print(f"runs: {args.runs} in {elapsed:.0f} s; flips: {flips[0][0]} of out.svg, {flips[1][0]} of the sidecar")
    print(f"runs that touched the victim: {sum(touched.values())}" + (f" ({dict(touched)})" if touched else ""))
    print(f"runs that hung (60 s): {hung}")
    for what, _ in kinds:
        c = codes[what]
        print(f"  {what:22} exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items(), key=str)))
    return 1 if touched or hung else 0


if __name__ == "__main__":
    sys.exit(main())
