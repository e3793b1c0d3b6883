#!/usr/bin/env python3
"""Folds several runs of `bench/compare --markdown=FILE` into one claims
table: per claim its target, the minimum, median and maximum ratio over the
runs, and whether it is met. A claim is met when its worst run meets the
target (the minimum for `>=` targets, the maximum for `<=` ones): one good
run out of five is not a result. Each run's load average is listed under
the table, so a loaded run can be told from a quiet one.

    for i in 1 2 3 4 5; do bench/compare --quick --skip_build --markdown=/tmp/run$i.md; done
    bench/claims_over_runs.py /tmp/run[1-5].md > /tmp/table.md

Exits 2 with a message for a file that is not a compare table or when the
files disagree on a claim's target (runs of different versions)."""
import re
import statistics
import sys

ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")
LOAD = re.compile(r"^Load average \(1, 5, 15 min\) at start: (.*), at end: (.*)$")


def read_run(path):
    """Returns ({claim: (ratio or None, target text)}, load line)."""
    claims, load = {}, "?"
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            m = LOAD.match(line.rstrip(" "))
            if m:
                load = f"{m.group(1)} -> {m.group(2)}"
                continue
            m = ROW.match(line)
            if not m or m.group(1) == "claim":
                continue
            name, ratio, target = m.group(1), m.group(2).strip(), m.group(3).strip()
            claims[name] = (None if ratio.startswith("skipped") else float(ratio), target)
    if not claims:
        raise ValueError(f"{path}: no claim rows (expected bench/compare --markdown output)")
    return claims, load


def met(value, target):
    """Whether `value` meets a target written as `2` or `<= 1.5`."""
    if target.startswith("<="):
        return value <= float(target[2:])
    return value >= float(target)


def fold(runs):
    """Markdown for the runs: [(path, claims, load)]. Claims in first-seen
    order; a claim skipped in a run counts in none of its statistics."""
    order, targets = [], {}
    for path, claims, _ in runs:
        for name, (_, target) in claims.items():
            if name not in targets:
                order.append(name)
                targets[name] = target
            elif targets[name] != target:
                raise ValueError(f"{path}: claim {name} has target {target}, "
                                 f"another run has {targets[name]}")
    out = [f"| claim | target | min | median | max | runs | met (worst run) |",
           "|---|---:|---:|---:|---:|---:|:---:|"]
    for name in order:
        values = [c[name][0] for _, c, _ in runs if name in c and c[name][0] is not None]
        target = targets[name]
        if not values:
            out.append(f"| `{name}` | {target} | - | - | - | 0 | - |")
            continue
        worst = max(values) if target.startswith("<=") else min(values)
        out.append(f"| `{name}` | {target} | {min(values):.2f} | "
                   f"{statistics.median(values):.2f} | {max(values):.2f} | "
                   f"{len(values)} | {'yes' if met(worst, target) else 'no'} |")
    out.append("")
    out.append("Load average (1, 5, 15 min) at the start -> end of each run: " +
               "; ".join(f"{i + 1}: {load}" for i, (_, _, load) in enumerate(runs)))
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr if len(argv) < 2 else sys.stdout)
        return 2 if len(argv) < 2 else 0
    try:
        runs = [(p, *read_run(p)) for p in argv[1:]]
        sys.stdout.write(fold(runs))
    except (OSError, ValueError) as e:
        print(f"claims_over_runs.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
