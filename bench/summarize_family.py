#!/usr/bin/env python3
"""Medians over the rounds of bench/run_family.sh, as the markdown rows of BENCHMARKS.md.

    python3 bench/summarize_family.py /tmp/dlock-family-<time>
"""
import json
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1])


def rows(name):
    p = out / f"{name}.jsonl"
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def med(name, field):
    vals = [r[field] for r in rows(name) if field in r]
    return statistics.median(vals) if vals else float("nan")


def span(name, field):
    vals = [r[field] for r in rows(name) if field in r]
    return f"{min(vals):.0f}-{max(vals):.0f}" if vals else "-"


kinds = ["lock", "fair", "read", "write"]
print("| kind | A pair p50 us | B ops/s | C ops/s (shared client) | C min/max per worker | "
      "C ops/s (client per worker) | C own: min/max, self-reacq | D hand-off p50 us | "
      "D own clients p50 us |")
print("|---|---|---|---|---|---|---|---|---|")
for k in kinds:
    c = rows(f"C_{k}")
    co = rows(f"C_{k}_own_clients")
    exclusive = k != "read"
    cmin = f"{min(r['per_worker_min'] for r in c)}/{max(r['per_worker_max'] for r in c)}" if c else "-"
    comin = (f"{min(r['per_worker_min'] for r in co)}/{max(r['per_worker_max'] for r in co)}, "
             f"{statistics.median(r['self_reacquire_share'] for r in co):.0%}") if co else "-"
    exact = all(r.get("counter_exact") for r in c + co)
    print(f"| {k} | {med(f'A_{k}', 'pair_p50_us'):.0f} | {med(f'B_{k}', 'ops_per_s'):.0f} | "
          + (f"{med(f'C_{k}', 'ops_per_s'):.0f} ({span(f'C_{k}', 'ops_per_s')}){'' if exact else ' not exact'} | {cmin} | "
             f"{med(f'C_{k}_own_clients', 'ops_per_s'):.0f} | {comin} | "
             f"{med(f'D_{k}', 'handoff_p50_us'):.0f} | {med(f'D_{k}_own_clients', 'handoff_p50_us'):.0f} |"
             if exclusive else "readers share: C and D do not apply (see R) | | | | | |"))
so = rows("C_simple_own_clients")
if so:
    print(f"\nC simple, client per worker: {med('C_simple_own_clients', 'ops_per_s'):.0f} ops/s, "
          f"min/max per worker {min(r['per_worker_min'] for r in so)}/{max(r['per_worker_max'] for r in so)}, "
          f"self-reacquisition {statistics.median(r['self_reacquire_share'] for r in so):.0%}")
rs, rx = rows("R_shared"), rows("R_exclusive")
if rs and rx:
    ratios = [a["ops_per_s"] / b["ops_per_s"] for a, b in zip(rs, rx)]
    print(f"\nR read-mostly (9 readers : 1 writer, 200 us of work inside): read-write lock "
          f"{med('R_shared', 'ops_per_s'):.0f} ops/s ({med('R_shared', 'writes_per_s'):.0f} writes/s, "
          f"up to {max(r['max_readers_inside'] for r in rs)} readers inside), exclusive lock "
          f"{med('R_exclusive', 'ops_per_s'):.0f} ops/s; ratio per round "
          + ", ".join(f"{x:.2f}" for x in ratios)
          + f"; violations {sum(r['violations'] for r in rs + rx)}")
print("\n| masters | dlock::redlock pair p50 / p99 us | pairs/s | node-redlock p50 / p99 us | pairs/s |")
print("|---|---|---|---|---|")
for m in (1, 3, 5):
    print(f"| {m} | {med(f'redlock_{m}', 'pair_p50_us'):.0f} / {med(f'redlock_{m}', 'pair_p99_us'):.0f} | "
          f"{med(f'redlock_{m}', 'pairs_per_s'):.0f} | {med(f'node_redlock_{m}', 'pair_p50_us'):.0f} / "
          f"{med(f'node_redlock_{m}', 'pair_p99_us'):.0f} | {med(f'node_redlock_{m}', 'pairs_per_s'):.0f} |")
