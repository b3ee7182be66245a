#!/usr/bin/env python3
"""The comparison table of docs/benchmarks.md from a finished lock micro-benchmark.

Reads criterion's median per acquisition (target/criterion/lock_<size>B_work<work>B/<strategy>/
<threads>/new/estimates.json) and the CPU table the bench writes (target/lock-cpu.md), and prints
one row per (critical section, outside work, threads): each strategy's median, ABS over the best,
and ABS's CPU per acquisition over the mutex's.

    LOCK_BENCH_THREADS=1,2,4,8,16 LOCK_BENCH_SIZES=2,1024,65536 LOCK_BENCH_WORK=0,1024 \\
      cargo bench -p petrel-lock --bench contention
    python3 scripts/lock-bench-table.py
"""
import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
STRATEGIES = ["mutex", "spin", "backoff", "abs"]


def medians():
    out = {}
    base = os.path.join(ROOT, "criterion")
    for group in os.listdir(base):
        m = re.fullmatch(r"lock_(\d+)B_work(\d+)B", group)
        if not m:
            continue
        size, work = int(m.group(1)), int(m.group(2))
        for strategy in STRATEGIES:
            sdir = os.path.join(base, group, strategy)
            if not os.path.isdir(sdir):
                continue
            for threads in os.listdir(sdir):
                est = os.path.join(sdir, threads, "new", "estimates.json")
                if threads.isdigit() and os.path.exists(est):
                    out[(size, work, int(threads), strategy)] = json.load(open(est))["median"]["point_estimate"]
    return out


def cpu():
    out = {}
    with open(os.path.join(ROOT, "lock-cpu.md")) as f:
        for m in re.finditer(r"^\| (\d+) \| (\d+) \| (\d+) \| (\w+) \| (\d+) \|$", f.read(), re.M):
            size, work, threads, strategy, ns = m.groups()
            out[(int(size), int(work), int(threads), strategy)] = float(ns)
    return out


def fmt(ns):
    return f"{ns / 1000:.1f} µs" if ns >= 10_000 else f"{ns:.0f} ns"


def main():
    wall, cpu_ns = medians(), cpu()
    if not wall:
        sys.exit("no lock_* results under target/criterion: run the bench first")
    print("| critical section | outside work | threads | mutex | spin | backoff | abs | abs / best | abs CPU / mutex CPU |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, work, threads in sorted({k[:3] for k in wall}):
        row = {s: wall.get((size, work, threads, s)) for s in STRATEGIES}
        if None in row.values():
            continue
        best = min(row, key=row.get)
        cells = [fmt(row[s]) + (" **best**" if s == best else "") for s in STRATEGIES]
        mutex_cpu = cpu_ns.get((size, work, threads, "mutex"))
        abs_cpu = cpu_ns.get((size, work, threads, "abs"))
        cpu_ratio = f"{abs_cpu / mutex_cpu:.2f}" if abs_cpu and mutex_cpu else "–"
        print(f"| {size} B | {work} B | {threads} | " + " | ".join(cells) + f" | {row['abs'] / row[best]:.2f} | {cpu_ratio} |")


if __name__ == "__main__":
    main()
