#!/usr/bin/env bash
# memmon's own memory, and where it lies: each memmon given records an idle `sleep` at 10 Hz for
# 5 s, RUNS times in turn, and its VmHWM (max RSS), RssAnon (its private memory) and RssFile are
# read at the end, with the part of RssFile that is memmon's own executable (from smaps).
#
#     benchmarks/own_rss.sh [RUNS] BINARY...        e.g. benchmarks/own_rss.sh 3 target/release/memmon
#
# File pages move from run to run: the kernel maps a 64 KiB block around each page a program
# touches (fault-around), but only the pages of it that the page cache holds then.
set -euo pipefail
runs=3
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  runs=$1
  shift
fi
[ $# -gt 0 ] || { echo "usage: $0 [RUNS] BINARY..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| binary | run | max RSS (KiB) | anonymous (KiB) | file (KiB) | of it the binary (KiB) |"
echo "|---|---|---|---|---|---|"
for ((r = 1; r <= runs; r++)); do
  for bin in "$@"; do
    sleep 1000 &
    target=$!
    "$bin" record --pid "$target" -i 100ms -o "$tmp/r.csv" --force -q &
    m=$!
    sleep 5
    status=/proc/$m/status
    hwm=$(awk '/^VmHWM/{print $2}' "$status")
    anon=$(awk '/^RssAnon/{print $2}' "$status")
    file=$(awk '/^RssFile/{print $2}' "$status")
    exe=$(readlink -f "/proc/$m/exe")
    own=$(awk -v b="$exe" '/^[0-9a-f]+-/{name=$6} /^Rss:/{if (name == b) s += $2} END{print s + 0}' "/proc/$m/smaps")
    kill "$m" "$target"
    wait "$m" 2>/dev/null || true
    echo "| $bin | $r | $hwm | $anon | $file | $own |"
  done
done
# How many of the functions build.rs lays out together (link/hot-symbols.txt) each binary has:
# a list behind the code (after `cargo update` or a new Rust) lays out fewer, and maps more.
list=$(dirname "$0")/../link/hot-symbols.txt
if [ -f "$list" ]; then
  grep -v '^#' "$list" | sort -u >"$tmp/hot"
  for bin in "$@"; do
    nm --defined-only "$bin" 2>/dev/null | awk '{print $NF}' | sort -u >"$tmp/defined"
    echo "$bin: $(comm -12 "$tmp/hot" "$tmp/defined" | wc -l) of the $(wc -l <"$tmp/hot") functions of link/hot-symbols.txt"
  done
fi
