#!/usr/bin/env bash
# memmon's GPU check, for a machine with an NVIDIA GPU, its driver, CUDA and PyTorch:
#
#   benchmarks/gpu-check.sh ./target/release/memmon [OUTDIR]
#
# Runs `memmon record --gpu` on a PyTorch process that pins 4 GiB of host memory
# (torch.empty(pin_memory=True): cudaHostAlloc) and then allocates 20 GiB on GPU 0 in five 4 GiB
# steps, holding each for 3 s. At each step the process writes down torch.cuda.memory_reserved()
# and nvidia-smi's used memory for its PID, and its own /proc status (VmLck, VmPin, RssAnon,
# RssShmem) and the Rss of its /dev/nvidia* mappings. Then it checks memmon's gpu_bytes column
# against both, and prints a PASS/FAIL table (and the pinned-memory findings, as INFO rows).
# About a minute; every command is under a timeout, the whole under 5 minutes.
# Exit 0 when every check passed, 1 when one failed, 2 when the machine cannot run it.

set -uo pipefail
MEMMON=${1:?usage: benchmarks/gpu-check.sh MEMMON_BINARY [OUTDIR]}
OUT=${2:-$(mktemp -d /tmp/memmon-gpu-check.XXXXXX)}
mkdir -p "$OUT"
MEMMON=$(readlink -f "$MEMMON")
[ -x "$MEMMON" ] || { echo "gpu-check: $MEMMON is not an executable"; exit 2; }
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found: no NVIDIA driver"; exit 2; }
timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || { echo "gpu-check: python3 with torch and a CUDA device is needed"; exit 2; }

echo "gpu-check: output in $OUT"
date -u +"gpu-check: %Y-%m-%d %H:%M:%S UTC"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader
"$MEMMON" --version

cat > "$OUT/workload.py" <<'EOF'
import json, os, re, subprocess, sys, time
import torch

GIB = 1 << 30
log = open(sys.argv[1], "w")

def proc_status():
    st = open("/proc/self/status").read()
    v = {k: int(re.search(k + r":\s+(\d+) kB", st).group(1)) * 1024
         for k in ["VmRSS", "RssAnon", "RssFile", "RssShmem", "VmLck", "VmPin"]}
    # The Rss of the process's mappings of /dev/nvidia* (cudaHostAlloc's buffers).
    nv, cur = 0, None
    for line in open("/proc/self/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            cur = line.split()[5] if len(line.split()) > 5 else ""
        elif line.startswith("Rss:") and cur and cur.startswith("/dev/nvidia"):
            nv += int(line.split()[1]) * 1024
    v["nvidia_maps_rss"] = nv
    return v

def smi_used():
    # nvidia-smi's used memory of this PID, in bytes (it prints MiB); None if not listed.
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=20).stdout
    total = None
    for line in out.splitlines():
        pid, used = [x.strip() for x in line.split(",")]
        if int(pid) == os.getpid():
            total = (total or 0) + int(used) * (1 << 20)
    return total

def note(step, **kw):
    torch.cuda.synchronize()
    rec = dict(step=step, t=time.time(), reserved=torch.cuda.memory_reserved(),
               allocated=torch.cuda.memory_allocated(), smi=smi_used(), pid=os.getpid(),
               status=proc_status(), **kw)
    log.write(json.dumps(rec) + "\n")
    log.flush()

torch.cuda.init()
torch.empty(1, device="cuda")  # the CUDA context
note("context")
before = proc_status()
pinned = torch.empty(4 * GIB, dtype=torch.uint8, pin_memory=True)
pinned.fill_(1)  # touch every page
note("pinned", pinned_bytes=4 * GIB, before=before)
time.sleep(2)
blocks = []
for i in range(1, 6):
    blocks.append(torch.empty(4 * GIB, dtype=torch.uint8, device="cuda"))
    blocks[-1].fill_(i)
    time.sleep(0.5)  # let the numbers settle before noting them
    note(f"gpu-{4 * i}GiB")
    time.sleep(3)
del blocks
torch.cuda.empty_cache()
time.sleep(2)
note("released")
time.sleep(1)
EOF

# memmon reads NVML every 250 ms on its own thread; /proc every 250 ms.
timeout 240 "$MEMMON" record --gpu --gpu-every 250ms -i 250ms -q --force \
  -o "$OUT/recording.jsonl" -- python3 "$OUT/workload.py" "$OUT/steps.jsonl"
rc=$?
[ $rc -eq 0 ] || echo "gpu-check: memmon record exited $rc"
timeout 30 "$MEMMON" summary "$OUT/recording.jsonl" > "$OUT/summary.txt" 2>&1
timeout 30 "$MEMMON" summary --json "$OUT/recording.jsonl" > "$OUT/summary.json" 2>/dev/null
timeout 30 "$MEMMON" summary --max-gpu 10GiB "$OUT/recording.jsonl" > /dev/null 2> "$OUT/budget.txt"
echo $? > "$OUT/budget.rc"
timeout 60 "$MEMMON" plot --force "$OUT/recording.jsonl" -o "$OUT/recording.svg" 2>/dev/null

timeout 60 python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
GIB, MIB = 1 << 30, 1 << 20
rows, failed = [], False
def check(name, ok, detail):
    global failed
    rows.append(("PASS" if ok else "FAIL", name, detail))
    failed |= not ok
def info(name, detail):
    rows.append(("INFO", name, detail))
fmt = lambda b: "-" if b is None else f"{b / GIB:.3f} GiB"

try:
    rec = [json.loads(l) for l in open(f"{out}/recording.jsonl")]
    steps = [json.loads(l) for l in open(f"{out}/steps.jsonl")]
except Exception as e:
    print(f"gpu-check: cannot read the results: {e}"); sys.exit(1)
meta = next(r for r in rec if r["type"] == "meta")
end = next((r for r in rec if r["type"] == "end"), {})
samples = [r for r in rec if r["type"] == "sample"]
gpu = meta.get("gpu")
check("memmon reads NVML", gpu is not None and gpu.get("source") == "nvml",
      ", ".join(d["name"] for d in gpu["devices"]) if gpu else "no gpu metadata")

def gpu_at(t0, t1):
    v = [s["gpu_bytes"] for s in samples if "gpu_bytes" in s and t0 <= s["unix_ms"] / 1e3 <= t1]
    return sorted(v)[len(v) // 2] if v else None

by = {s["step"]: s for s in steps}
context = None
for s in steps:
    if not s["step"].startswith("gpu-") and s["step"] != "context":
        continue
    # memmon's value while the step held: from 0.6 s after the note to 2.6 s after it.
    m = gpu_at(s["t"] + 0.6, s["t"] + 2.6) if s["step"] != "context" else gpu_at(s["t"], s["t"] + 1.0)
    smi, res = s["smi"], s["reserved"]
    if m is None:
        check(f"{s['step']}: gpu_bytes", False, "no memmon sample with a GPU value in the step"); continue
    if smi is None:
        check(f"{s['step']}: vs nvidia-smi", False, f"PID {s['pid']} not in nvidia-smi (another PID namespace?)")
    else:
        check(f"{s['step']}: gpu_bytes = nvidia-smi used (±4 MiB)", abs(m - smi) <= 4 * MIB,
              f"memmon {fmt(m)}, nvidia-smi {fmt(smi)}")
    overhead = m - res
    if s["step"] == "context":
        context = overhead
        info("CUDA context (gpu_bytes - memory_reserved)", fmt(overhead))
    else:
        check(f"{s['step']}: gpu_bytes - memory_reserved = the context (±64 MiB)",
              context is not None and abs(overhead - context) <= 64 * MIB,
              f"memmon {fmt(m)}, torch reserved {fmt(res)}, difference {fmt(overhead)}")
summary = json.load(open(f"{out}/summary.json"))
peak = (summary.get("gpu") or {}).get("peak_gpu_bytes")
check("summary GPU peak >= 20 GiB reserved", peak is not None and peak >= 20 * GIB, fmt(peak))
check("summary --max-gpu 10GiB exits 1", open(f"{out}/budget.rc").read().strip() == "1",
      open(f"{out}/budget.txt").read().strip()[:110])
check("no missed /proc ticks", end.get("missed_ticks", 1) == 0, f"missed_ticks {end.get('missed_ticks')}")
g = end.get("gpu", {})
info("NVML reading cost (devices + processes)",
     f"mean {g.get('mean_reading_ms', 0):.2f} ms, max {g.get('max_reading_ms', 0):.2f} ms over {g.get('readings')} readings")
p = by.get("pinned")
if p:
    b, a = p["before"], p["status"]
    for k in ["VmRSS", "RssAnon", "RssShmem", "VmLck", "VmPin", "nvidia_maps_rss"]:
        info(f"4 GiB pinned (cudaHostAlloc): {k} rose by", fmt(a[k] - b[k]))
    locked = max((s["locked_bytes"] for s in samples), default=0)
    pinned = max((s["pinned_bytes"] for s in samples), default=0)
    info("memmon locked_bytes / pinned_bytes, largest", f"{fmt(locked)} / {fmt(pinned)}")
w = max(len(r[1]) for r in rows)
print(f"\n{'result':<6}  {'check':<{w}}  detail")
for r in rows:
    print(f"{r[0]:<6}  {r[1]:<{w}}  {r[2]}")
print("\ngpu-check:", "FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
EOF
