#!/usr/bin/env python3
"""Compares two Prometheus scrapes: every metric family of the first (Apache RocketMQ's), with
its type and each of its label keys, must be in the second (Petrel's). Reads the text format
0.0.4 and OpenMetrics alike (a counter's family is named without `_total` in both views).

    scripts/metrics-diff.py ROCKETMQ.prom PETREL.prom [--prefix rocketmq_]

Prints one line per family compared; exits 1 when any family, type or label key is missing."""
import re
import sys

SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+\S+')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


def family_name(name, kind):
    return name[: -len("_total")] if kind == "counter" and name.endswith("_total") else name


def parse(path, prefix):
    """family -> (type, set of label keys seen on its samples, sample count)."""
    types = {}
    labels = {}
    counts = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[family_name(name, kind)] = kind
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        name = m.group(1)
        family = name if name in types else None
        if family is None:
            for suffix in SUFFIXES:
                if name.endswith(suffix) and name[: -len(suffix)] in types:
                    family = name[: -len(suffix)]
                    break
        if family is None or not family.startswith(prefix):
            continue
        keys = set(LABEL.findall(m.group(3) or "")) - {"le"}
        labels.setdefault(family, set()).update(keys)
        counts[family] = counts.get(family, 0) + 1
    return {f: (types[f], labels.get(f, set()), counts.get(f, 0)) for f in types if f.startswith(prefix) and f in counts}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    prefix = "rocketmq_"
    if "--prefix" in sys.argv:
        prefix = sys.argv[sys.argv.index("--prefix") + 1]
        args.remove(prefix)
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    theirs, ours = parse(args[0], prefix), parse(args[1], prefix)
    if not theirs:
        print(f"no {prefix}* family in {args[0]}: nothing to compare", file=sys.stderr)
        return 1
    missing = 0
    for family in sorted(theirs):
        kind, keys, _ = theirs[family]
        if family not in ours:
            print(f"MISSING {family} ({kind}; labels {', '.join(sorted(keys))})")
            missing += 1
            continue
        our_kind, our_keys, n = ours[family]
        problems = []
        if our_kind != kind:
            problems.append(f"type {our_kind}, not {kind}")
        if keys - our_keys:
            problems.append("without label " + ", ".join(sorted(keys - our_keys)))
        if problems:
            print(f"DIFFERENT {family}: " + "; ".join(problems))
            missing += 1
        else:
            print(f"same {family} ({kind}, {len(keys)} label keys, {n} samples here)")
    extra = sorted(set(ours) - set(theirs))
    if extra:
        print("also here, not in the first scrape (this workload did not make them there): " + ", ".join(extra))
    print(f"{len(theirs) - missing} of {len(theirs)} families match")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
