#!/usr/bin/env bash
# memmon's GPU check, for a machine with an NVIDIA GPU, its driver, CUDA and PyTorch, run as root:
#
#   sudo benchmarks/gpu-check.sh ./target/release/memmon [OUTDIR]
#
# Everything runs on GPU 0 (nvidia-smi's index). NVML accounting mode is turned on there for the
# check (nvidia-smi -am 1) and put back as it was at the end. Five parts, each under a timeout
# (the whole under 10 minutes; about 4 expected, not yet timed on a GPU):
#
#   A. two PyTorch processes share the GPU (3 and 5 GiB): memmon's gpu_bytes of each (two
#      `record --pid` at once) against `nvidia-smi --query-compute-apps=pid,used_memory`, and
#      which NVML call and element size memmon read them with (the driver-struct question).
#   B. a launched process holds 2 GiB, then allocates 8 GiB for 50 ms (cudaMalloc, freed with
#      empty_cache), read every 1 s: the sampled GPU peak misses the spike, the GPU kernel peak
#      (NVML accounting maxMemoryUsage) holds it and equals nvidia-smi's accounted
#      max_memory_usage; per phase (markers on the process's stdout) the spike's phase has it and
#      the phase after says "set before".
#   C. cudaHostAlloc (torch pin_memory) of 4 GiB, then cudaHostRegister of 4 GiB of pageable
#      memory: which of memmon's columns move (rss, anon, shmem, locked, pinned,
#      nvidia_mapped, nvidia_mapped_rss), beside the process's own VmLck and VmPin.
#   D. a PyTorch workload: five 4 GiB steps; gpu_bytes against nvidia-smi and against
#      torch.cuda.memory_reserved() plus the CUDA context, the summary, --max-gpu, the cost of
#      one NVML reading.
#   E. memmon and a CUDA process in a PID namespace of their own (a container): does the driver
#      give host PIDs there, and does --gpu-host-proc (the host's /proc bound into it) map them.
#
# It prints a Markdown table (result, check, detail) that BENCHMARKS.md can take as it is, and
# keeps every recording and log in OUTDIR. Exit 0 when every check passed, 1 when one failed, 2
# when the machine cannot run it.

set -uo pipefail
# The whole check under one limit (each part has its own too).
if [ -z "${GPU_CHECK_LIMITED:-}" ]; then
  GPU_CHECK_LIMITED=1 exec timeout 580 bash "$0" "$@"
fi
MEMMON=${1:?usage: sudo benchmarks/gpu-check.sh MEMMON_BINARY [OUTDIR]}
OUT=${2:-$(mktemp -d /tmp/memmon-gpu-check.XXXXXX)}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
MEMMON=$(readlink -f "$MEMMON")
[ -x "$MEMMON" ] || { echo "gpu-check: $MEMMON is not an executable"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "gpu-check: run it as root (accounting mode, PID and mount namespaces)"; exit 2; }
for p in nvidia-smi python3 unshare timeout; do
  command -v $p >/dev/null || { echo "gpu-check: $p not found"; exit 2; }
done
export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0
timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || { echo "gpu-check: python3 with torch and a CUDA device is needed"; exit 2; }

started=$(date +%s)
echo "gpu-check: output in $OUT"
{
  date -u +"date: %Y-%m-%d %H:%M:%S UTC"
  echo "gpu: $(nvidia-smi -i 0 --query-gpu=name,driver_version,memory.total,persistence_mode --format=csv,noheader)"
  echo "memmon: $("$MEMMON" --version)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  echo "kernel: $(uname -r)"
} | tee "$OUT/machine.txt"

# Accounting mode on for the check, put back at the end.
ACC_BEFORE=$(nvidia-smi -i 0 --query-gpu=accounting.mode --format=csv,noheader | tr -d ' ')
restore() {
  if [ "$ACC_BEFORE" = "Disabled" ]; then nvidia-smi -i 0 -am 0 >/dev/null 2>&1; fi
}
trap restore EXIT
trap 'exit 1' INT TERM
nvidia-smi -i 0 -am 1 >"$OUT/accounting.txt" 2>&1 || echo "gpu-check: could not turn accounting on: $(cat "$OUT/accounting.txt")"
echo "accounting before: $ACC_BEFORE; now: $(nvidia-smi -i 0 --query-gpu=accounting.mode --format=csv,noheader)" | tee -a "$OUT/machine.txt"

cat > "$OUT/work.py" <<'EOF'
# The check's CUDA workloads: python3 work.py MODE LOG [ARGS]; each writes JSON lines to LOG.
import json, os, re, subprocess, sys, time
import torch

GIB = 1 << 30
mode, log_path = sys.argv[1], sys.argv[2]
log = open(log_path, "w")

def status():
    st = open("/proc/self/status").read()
    v = {k: int(re.search(k + r":\s+(\d+) kB", st).group(1)) * 1024
         for k in ["VmRSS", "RssAnon", "RssFile", "RssShmem", "VmLck", "VmPin"]}
    nv_size, nv_rss, cur = 0, 0, None
    for line in open("/proc/self/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            f = line.split()
            cur = f[5] if len(f) > 5 else ""
            if cur.startswith("/dev/nvidia"):
                a, b = f[0].split("-")
                nv_size += int(b, 16) - int(a, 16)
        elif line.startswith("Rss:") and cur and cur.startswith("/dev/nvidia"):
            nv_rss += int(line.split()[1]) * 1024
    v["nvidia_maps_size"], v["nvidia_maps_rss"] = nv_size, nv_rss
    return v

def smi_used():
    out = subprocess.run(
        ["nvidia-smi", "-i", "0", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=30).stdout
    total = None
    for line in out.splitlines():
        pid, used = [x.strip() for x in line.split(",")]
        if pid.isdigit() and int(pid) == os.getpid():
            total = (total or 0) + int(used) * (1 << 20)
    return total

def note(step, **kw):
    torch.cuda.synchronize()
    rec = dict(step=step, t=time.time(), pid=os.getpid(), reserved=torch.cuda.memory_reserved(),
               allocated=torch.cuda.memory_allocated(), status=status(), **kw)
    log.write(json.dumps(rec) + "\n")
    log.flush()

def mark(label):
    print(f"mark:{label}", flush=True)

torch.cuda.init()
torch.empty(1, device="cuda")  # the CUDA context

if mode == "hold":  # hold SIZE_GIB SECONDS
    x = torch.empty(int(sys.argv[3]) * GIB, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    note("ready")
    time.sleep(float(sys.argv[4]))

elif mode == "spike":
    base = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
    base.fill_(1)
    mark("baseline")
    note("baseline")
    time.sleep(3.0)
    mark("spike")
    t0 = time.time()
    s = torch.empty(8 * GIB, dtype=torch.uint8, device="cuda")
    s.fill_(2)
    torch.cuda.synchronize()
    time.sleep(0.05)
    del s
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    note("spike", spike_start=t0, spike_end=time.time())
    # Held past two GPU readings, so the readings that see the mark rise fall in this phase.
    time.sleep(2.5)
    mark("after")
    note("after")
    time.sleep(3.0)

elif mode == "pinned":
    note("context")
    time.sleep(3.0)
    pinned = torch.empty(4 * GIB, dtype=torch.uint8, pin_memory=True)  # cudaHostAlloc
    pinned.fill_(1)
    note("hostalloc")
    time.sleep(3.0)
    cpu = torch.empty(4 * GIB, dtype=torch.uint8)
    cpu.fill_(1)
    note("pageable")
    time.sleep(3.0)
    rc = None
    try:
        rc = int(torch.cuda.cudart().cudaHostRegister(cpu.data_ptr(), cpu.numel(), 0))
    except Exception as e:
        rc = f"unavailable: {e}"
    note("hostregister", rc=rc)
    time.sleep(3.0)
    try:
        torch.cuda.cudart().cudaHostUnregister(cpu.data_ptr())
    except Exception:
        pass
    note("unregistered")
    time.sleep(1.0)

elif mode == "steps":
    note("context", smi=smi_used())
    time.sleep(2)  # rows of the context alone
    blocks = []
    for i in range(1, 6):
        blocks.append(torch.empty(4 * GIB, dtype=torch.uint8, device="cuda"))
        blocks[-1].fill_(i)
        time.sleep(0.5)  # let the numbers settle before noting them
        note(f"gpu-{4 * i}GiB", smi=smi_used())
        time.sleep(3)
    del blocks
    torch.cuda.empty_cache()
    time.sleep(2)
    note("released", smi=smi_used())
    time.sleep(1)
EOF

elapsed() { echo $(( $(date +%s) - started )); }
ready() { # ready LOG SECONDS: waits for the workload's first note
  local i=0
  while ! grep -q '"step"' "$1" 2>/dev/null; do
    sleep 0.5; i=$((i + 1)); if [ $i -gt $(( $2 * 2 )) ]; then return 1; fi
  done
  return 0
}

# --- A. two processes sharing GPU 0 ------------------------------------------------------------
echo "gpu-check: A. two processes sharing the GPU (+$(elapsed) s)"
timeout 90 python3 "$OUT/work.py" hold "$OUT/share-a.log" 3 60 & PA=$!
timeout 90 python3 "$OUT/work.py" hold "$OUT/share-b.log" 5 60 & PB=$!
if ready "$OUT/share-a.log" 60 && ready "$OUT/share-b.log" 60; then
  timeout 60 "$MEMMON" record --gpu --pid $PA -i 250ms --gpu-every 250ms --duration 4s -q --force \
    -o "$OUT/share-a.jsonl" 2>"$OUT/share-a.err" & MA=$!
  timeout 60 "$MEMMON" record --gpu --pid $PB -i 250ms --gpu-every 250ms --duration 4s -q --force \
    -o "$OUT/share-b.jsonl" 2>"$OUT/share-b.err" & MB=$!
  sleep 2
  nvidia-smi -i 0 --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$OUT/share-smi.csv"
  wait $MA $MB
fi
kill $PA $PB 2>/dev/null; wait $PA $PB 2>/dev/null

# --- B. a 50 ms spike, sampled every second, accounting on -------------------------------------
echo "gpu-check: B. a 50 ms cudaMalloc spike (+$(elapsed) s)"
timeout 80 "$MEMMON" record --gpu --gpu-every 1s -i 100ms -q --force \
  --mark-stdout '^mark:(?P<label>\S+)' -o "$OUT/spike.jsonl" \
  -- python3 -u "$OUT/work.py" spike "$OUT/spike.log" >"$OUT/spike.out" 2>"$OUT/spike.err"
SPID=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["pid"])' "$OUT/spike.log" 2>/dev/null)
nvidia-smi -i 0 --query-accounted-apps=pid,max_memory_usage --format=csv,noheader,nounits \
  >"$OUT/spike-accounted.csv" 2>&1
echo "${SPID:-}" >"$OUT/spike.pid"
timeout 30 "$MEMMON" summary --json "$OUT/spike.jsonl" >"$OUT/spike-summary.json" 2>/dev/null
timeout 30 "$MEMMON" summary "$OUT/spike.jsonl" >"$OUT/spike-summary.txt" 2>&1

# --- C. pinned host memory ---------------------------------------------------------------------
echo "gpu-check: C. cudaHostAlloc and cudaHostRegister of 4 GiB (+$(elapsed) s)"
timeout 100 "$MEMMON" record --gpu --gpu-every 250ms -i 250ms --pss --pss-force --pss-every 1s \
  -q --force -o "$OUT/pinned.jsonl" \
  -- python3 -u "$OUT/work.py" pinned "$OUT/pinned.log" >"$OUT/pinned.out" 2>"$OUT/pinned.err"
timeout 30 "$MEMMON" summary "$OUT/pinned.jsonl" >"$OUT/pinned-summary.txt" 2>&1

# --- D. a PyTorch workload -------------------------------------------------------------------
echo "gpu-check: D. a PyTorch workload of five 4 GiB steps (+$(elapsed) s)"
timeout 120 "$MEMMON" record --gpu --gpu-every 250ms -i 250ms -q --force \
  -o "$OUT/steps.jsonl" -- python3 "$OUT/work.py" steps "$OUT/steps.log" >"$OUT/steps.err" 2>&1
timeout 30 "$MEMMON" summary "$OUT/steps.jsonl" >"$OUT/steps-summary.txt" 2>&1
timeout 30 "$MEMMON" summary --json "$OUT/steps.jsonl" >"$OUT/steps-summary.json" 2>/dev/null
timeout 30 "$MEMMON" summary --max-gpu 10GiB "$OUT/steps.jsonl" >/dev/null 2>"$OUT/budget.txt"
echo $? >"$OUT/budget.rc"
timeout 60 "$MEMMON" plot --force "$OUT/steps.jsonl" -o "$OUT/steps.svg" 2>/dev/null

# --- E. a PID namespace (a container) ------------------------------------------------------------
echo "gpu-check: E. memmon in a PID namespace (+$(elapsed) s)"
mkdir -p "$OUT/hostproc"
timeout 100 unshare --pid --fork --mount --propagation private sh -c "
  mount --bind /proc '$OUT/hostproc' && mount -t proc proc /proc || exit 3
  python3 '$OUT/work.py' hold '$OUT/ns.log' 2 40 & P=\$!
  i=0; while ! grep -q step '$OUT/ns.log' 2>/dev/null; do sleep 0.5; i=\$((i+1)); [ \$i -gt 120 ] && exit 4; done
  me=\$(readlink /proc/self/ns/pid)
  for s in '$OUT'/hostproc/[0-9]*/status; do
    d=\${s%/status}
    [ \"\$(readlink \$d/ns/pid 2>/dev/null)\" = \"\$me\" ] || continue
    grep -Eq \"^NSpid:.*[[:space:]]\$P\$\" \$s && basename \$d > '$OUT/ns.hostpid'
  done
  nvidia-smi -i 0 --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > '$OUT/ns-smi.csv'
  '$MEMMON' record --gpu --pid \$P -i 250ms --gpu-every 250ms --duration 3s --force \
    -o '$OUT/ns-plain.jsonl' 2> '$OUT/ns-plain.err'
  '$MEMMON' record --gpu --pid \$P --gpu-host-proc '$OUT/hostproc' -i 250ms --gpu-every 250ms \
    --duration 3s --force -o '$OUT/ns-mapped.jsonl' 2> '$OUT/ns-mapped.err'
  kill \$P; wait
" >"$OUT/ns.out" 2>&1
echo $? >"$OUT/ns.rc"

echo "gpu-check: analysis (+$(elapsed) s)"
timeout 60 python3 - "$OUT" <<'EOF'
import json, os, re, sys
out = sys.argv[1]
GIB, MIB = 1 << 30, 1 << 20
rows, failed = [], False

def check(name, ok, detail):
    global failed
    rows.append(("PASS" if ok else "FAIL", name, detail))
    failed |= not ok

def info(name, detail):
    rows.append(("INFO", name, detail))

def fmt(b):
    return "-" if b is None else f"{b / GIB:.3f} GiB"

def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip()]

def recording(name):
    rec = jsonl(f"{out}/{name}")
    meta = next(r for r in rec if r["type"] == "meta")
    end = next((r for r in rec if r["type"] == "end"), {})
    return meta, end, [r for r in rec if r["type"] == "sample"]

def median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None

def col(samples, key, t0, t1):
    return median([s.get(key) for s in samples if t0 <= s["unix_ms"] / 1e3 <= t1])

def smi(path):
    d = {}
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) == 2 and f[0].isdigit() and f[1].isdigit():
            d[int(f[0])] = d.get(int(f[0]), 0) + int(f[1]) * MIB
    return d

def part(name, f):
    try:
        f()
    except Exception as e:
        check(f"{name}: the part ran", False, f"{type(e).__name__}: {e}"[:160])

# A. Two processes sharing the GPU.
def a():
    used = smi(f"{out}/share-smi.csv")
    for side in "ab":
        meta, end, s = recording(f"share-{side}.jsonl")
        pid = jsonl(f"{out}/share-{side}.log")[0]["pid"]
        if side == "a":
            g = meta.get("gpu") or {}
            check("A: memmon reads NVML", g.get("source") == "nvml",
                  f"driver {g.get('driver_version')}; {', '.join(d['name'] for d in g.get('devices', []))}")
            info("A: per-process call (driver struct)", (end.get("gpu") or {}).get("process_call") or g.get("process_call"))
        m = median([x.get("gpu_bytes") for x in s[1:]])
        want = used.get(pid)
        check(f"A: PID {pid} ({'3' if side == 'a' else '5'} GiB) gpu_bytes = nvidia-smi used (±4 MiB)",
              m is not None and want is not None and abs(m - want) <= 4 * MIB,
              f"memmon {fmt(m)}, nvidia-smi {fmt(want)}")
        h = max((x.get("gpu_hwm_bytes") or 0 for x in s), default=0)
        check(f"A: PID {pid} gpu_hwm_bytes >= gpu_bytes (accounting on)", m is not None and h >= m,
              f"gpu_hwm_bytes {fmt(h)}")
part("A", a)

# B. The spike.
def b():
    j = json.load(open(f"{out}/spike-summary.json"))
    g = j["gpu"]
    log = {r["step"]: r for r in jsonl(f"{out}/spike.log")}
    base = log["baseline"]["reserved"]
    sampled, kernel = g["peak_gpu_bytes"], g.get("gpu_kernel_peak_bytes")
    spike = 8 * GIB
    if sampled < base + spike // 2:
        check("B: sampled GPU peak (every 1 s) misses the 50 ms 8 GiB spike", True, f"sampled {fmt(sampled)}")
    else:
        info("B: sampled GPU peak caught the spike (a reading fell in its 50 ms: about 1 in 20)", fmt(sampled))
    check("B: GPU kernel peak holds the spike (>= baseline + 8 GiB)",
          kernel is not None and kernel >= base + spike,
          f"kernel {fmt(kernel)} ({g.get('gpu_kernel_peak_window')}, {g.get('gpu_kernel_peak_scope')}); baseline reserved {fmt(base)}")
    pid = int(open(f"{out}/spike.pid").read().strip())
    # The accounting buffer may hold an older process with this PID too: the largest is ours
    # (a new process's record is the one that ran the spike).
    acct = max((int(f[1]) * MIB for f in (l.split(",") for l in open(f"{out}/spike-accounted.csv"))
                if len(f) == 2 and f[0].strip() == str(pid) and f[1].strip().isdigit()), default=None)
    check("B: GPU kernel peak = nvidia-smi accounted max_memory_usage (±4 MiB)",
          kernel is not None and acct is not None and abs(kernel - acct) <= 4 * MIB,
          f"memmon {fmt(kernel)}, nvidia-smi {fmt(acct)}")
    phases = {p["label"]: p for p in j.get("phases", [])}
    sp, af = phases.get("spike", {}), phases.get("after", {})
    check("B: phase 'spike' has the spike as its GPU kernel peak",
          (sp.get("gpu_kernel_peak_bytes") or 0) >= base + spike,
          f"{fmt(sp.get('gpu_kernel_peak_bytes'))} ({sp.get('gpu_kernel_peak_window')}); sampled {fmt(sp.get('peak_gpu_bytes'))}")
    check("B: phase 'after' says its GPU mark was set before it",
          af.get("gpu_kernel_peak_window") == "set-before",
          f"{af.get('gpu_kernel_peak_window')}; sampled {fmt(af.get('peak_gpu_bytes'))}")
part("B", b)

# C. Pinned host memory.
def c():
    meta, end, s = recording("pinned.jsonl")
    log = {r["step"]: r for r in jsonl(f"{out}/pinned.log")}
    keys = ["rss_bytes", "anon_bytes", "shmem_bytes", "locked_bytes", "pinned_bytes", "nvidia_mapped_bytes"]
    def at(step):
        t = log[step]["t"]
        v = {k: col(s, k, t + 0.5, t + 2.8) for k in keys}
        pss_rows = [x.get("nvidia_mapped_rss_bytes") for x in s
                    if t + 0.3 <= x["unix_ms"] / 1e3 <= t + 3.0 and "nvidia_mapped_rss_bytes" in x]
        v["nvidia_mapped_rss_bytes"] = max(pss_rows) if pss_rows else None
        return v
    for step, before, what in [("hostalloc", "context", "cudaHostAlloc 4 GiB (torch pin_memory)"),
                               ("hostregister", "pageable", "cudaHostRegister 4 GiB of pageable memory")]:
        if step == "hostregister" and log[step].get("rc") not in (0, None):
            check(f"C: {what}: the call succeeded", False, f"rc {log[step].get('rc')}")
            continue
        x, y = at(before), at(step)
        d = {k: (y[k] - x[k]) if y[k] is not None and x[k] is not None else None for k in y}
        info(f"C: {what}: memmon columns rose by",
             ", ".join(f"{k.replace('_bytes', '')} {fmt(v)}" for k, v in d.items()))
        st0, st1 = log[before]["status"], log[step]["status"]
        info(f"C: {what}: its /proc rose by",
             ", ".join(f"{k} {fmt(st1[k] - st0[k])}" for k in ["VmRSS", "RssAnon", "RssShmem", "VmLck", "VmPin", "nvidia_maps_size", "nvidia_maps_rss"]))
        moved = [k for k, v in d.items() if v is not None and v >= 4 * GIB - 64 * MIB]
        check(f"C: {what} shows in a memmon column", bool(moved), ", ".join(moved) or "in none")
part("C", c)

# D. The PyTorch workload.
def d():
    meta, end, s = recording("steps.jsonl")
    context = None
    for st in jsonl(f"{out}/steps.log"):
        if not (st["step"].startswith("gpu-") or st["step"] == "context"):
            continue
        t = st["t"]
        m = col(s, "gpu_bytes", t + 0.6, t + 2.6) if st["step"] != "context" else col(s, "gpu_bytes", t + 0.3, t + 1.6)
        if m is None:
            check(f"D: {st['step']}: gpu_bytes", False, "no memmon sample with a GPU value in the step")
            continue
        smi_v = st.get("smi")
        check(f"D: {st['step']}: gpu_bytes = nvidia-smi used (±4 MiB)",
              smi_v is not None and abs(m - smi_v) <= 4 * MIB, f"memmon {fmt(m)}, nvidia-smi {fmt(smi_v)}")
        over = m - st["reserved"]
        if st["step"] == "context":
            context = over
            info("D: CUDA context (gpu_bytes - memory_reserved)", fmt(over))
        else:
            check(f"D: {st['step']}: gpu_bytes - memory_reserved = the context (±64 MiB)",
                  context is not None and abs(over - context) <= 64 * MIB,
                  f"memmon {fmt(m)}, torch reserved {fmt(st['reserved'])}, difference {fmt(over)}")
    g = json.load(open(f"{out}/steps-summary.json")).get("gpu") or {}
    check("D: summary GPU peak >= 20 GiB", (g.get("peak_gpu_bytes") or 0) >= 20 * GIB, fmt(g.get("peak_gpu_bytes")))
    k = g.get("gpu_kernel_peak_bytes")
    check("D: GPU kernel peak >= the sampled peak", k is not None and k >= g.get("peak_gpu_bytes", 0),
          f"{fmt(k)} ({g.get('gpu_kernel_peak_window')})")
    check("D: summary --max-gpu 10GiB exits 1", open(f"{out}/budget.rc").read().strip() == "1",
          open(f"{out}/budget.txt").read().strip()[:110])
    check("D: no missed /proc ticks", end.get("missed_ticks", 1) == 0, f"missed_ticks {end.get('missed_ticks')}")
    e = end.get("gpu", {})
    info("D: NVML reading cost (devices, processes, accounting)",
         f"mean {e.get('mean_reading_ms', 0):.2f} ms, max {e.get('max_reading_ms', 0):.2f} ms over {e.get('readings')} readings")
part("D", d)

# E. A PID namespace.
def e():
    rc = open(f"{out}/ns.rc").read().strip()
    host_pid = int(open(f"{out}/ns.hostpid").read().strip())
    ns_pid = jsonl(f"{out}/ns.log")[0]["pid"]
    # nvidia-smi inside lists the host PID, or the namespace's where the driver translates.
    listed = smi(f"{out}/ns-smi.csv")
    used = listed.get(host_pid, listed.get(ns_pid))
    info("E: the CUDA process's PIDs", f"{ns_pid} in the namespace, {host_pid} on the host; nvidia-smi (run inside) lists {sorted(smi(out + '/ns-smi.csv'))}")
    _, _, plain = recording("ns-plain.jsonl")
    p = median([x.get("gpu_bytes") for x in plain[1:]])
    err = open(f"{out}/ns-plain.err").read()
    if p is not None and used is not None and abs(p - used) <= 4 * MIB:
        check("E: without --gpu-host-proc: the driver translates PIDs, memmon matches them", True, f"memmon {fmt(p)}")
    else:
        said = next((l for l in err.splitlines() if "--gpu-host-proc" in l), "")
        check("E: without --gpu-host-proc: the driver gives host PIDs; memmon leaves gpu_bytes empty and says so",
              p is None and bool(said), f"memmon {fmt(p)}; {said.strip()[:150]}")
    _, _, mapped = recording("ns-mapped.jsonl")
    m = median([x.get("gpu_bytes") for x in mapped[1:]])
    check("E: with --gpu-host-proc: gpu_bytes = nvidia-smi used of its host PID (±4 MiB)",
          m is not None and used is not None and abs(m - used) <= 4 * MIB,
          f"memmon {fmt(m)}, nvidia-smi {fmt(used)} (namespace script exit {rc})")
part("E", e)

print()
print(open(f"{out}/machine.txt").read().strip().replace("\n", "; "))
print()
print("| result | check | detail |")
print("|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {str(r[2]).replace('|', '/')} |")
print()
print("gpu-check:", "FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
EOF
rc=$?
echo "gpu-check: $(elapsed) s in all"
exit $rc
