#!/usr/bin/env python3
"""The tables of bench/backend_bench.sh from its results directory (Markdown on stdout).

    python3 bench/summarize_backends.py OUT

Every figure is the median over the rounds of the run; the ratios are the median of the
per-round ratios (each round runs the two compared rows back to back, so noise hits both)."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(out):
    rows = defaultdict(dict)  # row -> round -> result
    order = []
    for line in (out / "results.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        j = json.loads(line)
        if j["row"] not in rows:
            order.append(j["row"])
        rows[j["row"]][j["round"]] = j["result"]
    return rows, order


LOADS = {}  # row -> the 1-minute load averages logged before its runs (commands.txt)


def read_loads(out):
    import re
    path = out / "commands.txt"
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        m = re.match(r"^\[(.+?)\] \(load ([0-9.]+)\)", line)
        if m:
            LOADS.setdefault(m.group(1), []).append(float(m.group(2)))


def load_of(row):
    v = LOADS.get(row)
    return f"{min(v):.2f}-{max(v):.2f}" if v else "-"


def med(rows, row, key):
    vals = [r[key] for r in rows.get(row, {}).values() if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def ratio(rows, num, den, key, invert=False):
    """Median over rounds of num[key] / den[key] (den/num when invert)."""
    out = []
    for rnd, a in rows.get(num, {}).items():
        b = rows.get(den, {}).get(rnd)
        if b and a.get(key) and b.get(key):
            out.append(b[key] / a[key] if invert else a[key] / b[key])
    return statistics.median(out) if out else None


def f(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def latency(rows, row, sc):
    """(p50, p99) of what the scenario measures: the pair in A and B, the hand-off in C and D."""
    k = "pair" if sc in "AB" else "handoff"
    return med(rows, row, f"{k}_p50_us"), med(rows, row, f"{k}_p99_us")


def exact(rows, row):
    vals = [r.get("counter_exact") for r in rows.get(row, {}).values()]
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    return "yes" if all(vals) else f"NO ({vals.count(False)} of {len(vals)})"


def scenario_table(rows, names, title, server=False):
    """One row per name; `server` adds Redis's own cost per operation (INFO deltas)."""
    print(f"### {title}\n")
    extra = " server cmds/op | server CPU us/op |" if server else ""
    print("| row | rounds | ops/s | p50 us | p99 us | self-reacq | exact | client CPU us/op "
          f"| peak RSS MiB | private MiB |{extra} load before |")
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if server else "") + "---|")
    for row in names:
        sc = row.split()[1]
        p50, p99 = latency(rows, row, sc)
        rss = med(rows, row, "vmhwm_kib")
        anon = med(rows, row, "rss_anon_kib")
        sr = med(rows, row, "self_reacquire_share") if sc == "C" else None
        srv = (f" {f(med(rows, row, 'server_cmds_per_op'), 1)} "
               f"| {f(med(rows, row, 'server_cpu_us_per_op'), 1)} |") if server else ""
        print(f"| {row} | {len(rows[row])} | {f(med(rows, row, 'ops_per_s'))} | {f(p50)} | {f(p99)} "
              f"| {f(sr, 2)} | {exact(rows, row)} | {f(med(rows, row, 'client_cpu_us_per_op'))} "
              f"| {f(rss / 1024 if rss else None, 1)} | {f(anon / 1024 if anon else None, 1)} |{srv}"
              f" {load_of(row)} |")
    print()


def handoff_units(rows, names):
    """D's hand-off p50 in units of the backend's own round trip after the same idle pause
    (idle_rtt: a PING on Redis, an is_locked() read elsewhere; lock_bench only)."""
    out = []
    for row in names:
        if row.split()[1] != "D":
            continue
        h, u = med(rows, row, "handoff_p50_us"), med(rows, row, "idle_rtt_p50_us")
        if h and u:
            out.append(f"{row}: {f(h)} us = {h / u:.2f} x its read round trip ({f(u)} us)")
    if out:
        print("D's hand-off p50 in round trips after the same idle pause: " + "; ".join(out) + ".\n")


def peer_ratios(rows, prefix, peer_row, peer, where):
    """dlock / the peer per scenario (rows "PREFIX SC dlock" and "PREFIX SC PEER_ROW")."""
    print(f"dlock / {peer}, {where} (median of per-round ratios; > 1 favours dlock in every column):\n")
    print(f"| scenario | throughput | p50 latency ({peer} / dlock) | client CPU per op ({peer} / dlock) "
          f"| peak RSS ({peer} / dlock) | private memory ({peer} / dlock) |")
    print("|---|---|---|---|---|---|")
    for sc in "ABCD":
        d, c = f"{prefix} {sc} dlock", f"{prefix} {sc} {peer_row}"
        if d not in rows or c not in rows:
            continue
        k = "pair_p50_us" if sc in "AB" else "handoff_p50_us"
        print(f"| {sc} | {f(ratio(rows, d, c, 'ops_per_s'), 2)} | {f(ratio(rows, d, c, k, invert=True), 2)} "
              f"| {f(ratio(rows, d, c, 'client_cpu_us_per_op', invert=True), 2)} "
              f"| {f(ratio(rows, d, c, 'vmhwm_kib', invert=True), 1)} "
              f"| {f(ratio(rows, d, c, 'rss_anon_kib', invert=True), 1)} |")
    print()


def zk_floor(rows, t):
    """The server's floor for A and B (lock_bench W on zk://) beside dlock's and Curator's rows."""
    parts = []
    for sc in "AB":
        floor = med(rows, f"zk-{t}-floor W {sc}", "ops_per_s")
        if not floor:
            continue
        d, c = med(rows, f"zk-{t} {sc} dlock", "ops_per_s"), med(rows, f"zk-{t} {sc} curator", "ops_per_s")
        parts.append(f"{sc}: {f(floor)} pairs/s; dlock is {f(d / floor if d else None, 2)} of it, Curator "
                     f"{f(c / floor if c else None, 2)}, so 1.2 x Curator is {f(1.2 * c / floor if c else None, 2)} "
                     f"of the floor")
    if parts:
        print(f"The server's floor (lock_bench W: each worker's chain of a pair's three requests one "
              f"after another, as Curator sends them: create a protected EPHEMERAL_SEQUENTIAL node, read "
              f"the directory's children, delete the node; on one raw C-client handle, no lock logic; 1 "
              f"worker for A, 50 on 50 directories for B. dlock sends the listing with the create, so its "
              f"A can pass this floor; B is bound by the server's work, the same three requests): "
              + "; ".join(parts) + ".\n")


def targets(rows):
    """The standing targets of the brief and issue 25 for these backends, one line each."""
    lines = []

    def add(target, row, measured, ok):
        lines.append(f"| {target} | {row} | {measured} | {'-' if ok is None else ('met' if ok else '**not met**')} |")

    for prefix, peer, name in (("zk-standalone", "curator", "Curator"), ("zk-ensemble", "curator", "Curator"),
                               ("etcd", "python3-etcd3", "python3-etcd3")):
        for sc in "ABCD":
            d, c = f"{prefix} {sc} dlock", f"{prefix} {sc} {peer}"
            if d not in rows or c not in rows:
                continue
            r = ratio(rows, d, c, "ops_per_s")
            add(f">= 1.2 x {name}", f"{prefix} {sc}", f"{f(r, 2)} x", r is not None and r >= 1.2)
            if prefix.startswith("zk"):
                cpu = ratio(rows, d, c, "client_cpu_us_per_op", invert=True)
                add(f"{name}'s CPU per op >= 4 x dlock's", f"{prefix} {sc}", f"{f(cpu, 2)} x",
                    cpu is not None and cpu >= 4)
    for row, ops, p99 in (("pg B advisory", 8000, 20), ("pg B lease", 2000, 50)):
        if row in rows:
            o, q = med(rows, row, "ops_per_s"), latency(rows, row, "B")[1]
            add(f">= {ops:,} pairs/s, p99 <= {p99} ms, defaults", row,
                f"{f(o)} pairs/s, p99 {f(q / 1000 if q else None, 1)} ms",
                o is not None and q is not None and o >= ops and q <= p99 * 1000)
    for row in ("keepalive pg advisory 100 locks", "keepalive pg advisory 1000 locks"):
        if row in rows:
            cpu, rss = med(rows, row, "client_cpu_us_per_lock_per_s"), med(rows, row, "client_rss_bytes_per_lock")
            lost = med(rows, row, "lost")
            add("<= 10 us CPU and <= 8 KiB per held lock", row,
                f"{f(cpu, 1)} us per lock per s, {f(rss)} B per lock, lost {f(lost)}",
                cpu is not None and rss is not None and cpu <= 10 and rss <= 8192 and not lost)
    for row in ("keepalive etcd 100 locks", "keepalive etcd 1000 locks"):
        if row in rows:
            cpu = med(rows, row, "client_cpu_us_per_lock_per_s")
            add("<= 5 us CPU per held lock per s (issue 22)", row,
                f"{f(cpu, 1)} us per lock per s, {f(med(rows, row, 'client_wakeups_per_s'), 1)} "
                f"wake-ups per s", cpu is not None and cpu <= 5)
    if lines:
        print("### Against the targets (median over the rounds)\n")
        print("| target | row | measured | verdict |")
        print("|---|---|---|---|")
        print("\n".join(lines) + "\n")


def main():
    out = Path(sys.argv[1])
    rows, order = load(out)
    read_loads(out)
    targets(rows)
    print("Medians over the rounds; p50/p99: the acquire+release pair in A and B, the hand-off "
          "(release -> next holder) in C and D; load before: the lowest and highest 1-minute load "
          "average logged before the row's runs. Peak RSS: the client process's VmHWM, which also "
          "counts the pages of shared libraries it touched; private: its RssAnon at the end "
          "(heap, stacks; for a JVM also the JIT's code).\n")
    for t in ("standalone", "ensemble"):
        names = [r for r in order if r.startswith(f"zk-{t} ")]
        if not names:
            continue
        scenario_table(rows, names, f"ZooKeeper {t}")
        zk_floor(rows, t)
        peer_ratios(rows, f"zk-{t}", "curator", "Curator", t)
    names = [r for r in order if r.startswith("etcd ")]
    if names:
        scenario_table(rows, names, "etcd (one member)")
        handoff_units(rows, names)
        for sc, row, how, note in (
                ("A", "etcd-floor W put+delete", "lock_bench W: put + delete of one key, the two "
                 "writes of a Mutex pair", " python3-etcd3's pair is three writes: a lease grant, "
                 "the put, the delete."),
                ("B", "etcd-floor W B put+delete", "lock_bench W --workers 50: 50 workers over one "
                 "client, each with put + delete pairs of its own key", "")):
            floor = med(rows, row, "ops_per_s")
            if not floor:
                continue
            d, p = med(rows, f"etcd {sc} dlock", "ops_per_s"), med(rows, f"etcd {sc} python3-etcd3", "ops_per_s")
            print(f"The server's floor for {sc} ({how}, through dlock's gRPC stubs, no lock logic): "
                  f"{f(floor)} pairs/s; dlock's {sc} is {f(d / floor if d else None, 2)} of it, "
                  f"python3-etcd3's {f(p / floor if p else None, 2)}, so 2 x python3-etcd3 would be "
                  f"{f(2 * p / floor if p else None, 2)} of it.{note}\n")
        h, u = med(rows, "etcd-floor WD handoff", "handoff_p50_us"), med(rows, "etcd-floor WD handoff", "idle_rtt_p50_us")
        d = med(rows, "etcd D dlock", "handoff_p50_us")
        if h and u:
            print(f"The server's floor for D (lock_bench WD: a key deleted by one client, the watch "
                  f"event at another and one read of its answer, no lock logic; issue 22's \"one watch "
                  f"event + one answer\"): hand-off p50 {f(h)} us = {h / u:.2f} x its read round trip "
                  f"({f(u)} us); dlock's D hand-off is {f(d / h if d else None, 2)} x this floor. The "
                  f"deletion is a write (a Raft entry written to the member's log on disk) before its "
                  f"event goes out.\n")
        m, a = med(rows, "etcd-floor memory", "vmhwm_kib"), med(rows, "etcd-floor memory", "rss_anon_kib")
        d = med(rows, "etcd A dlock", "vmhwm_kib")
        if m:
            print(f"The memory floor (bench/etcd_memory_floor: a bare C++ gRPC client with dlock's "
                  f"stubs, a lease, one key put under it and one keep-alive, no dlock code): peak RSS "
                  f"{m / 1024:.1f} MiB, private {a / 1024 if a else 0:.1f} MiB; dlock's A client peaks "
                  f"at {f(d / m if d else None, 2)} x it (issue 22's 16 MiB is "
                  f"{16 * 1024 / m:.2f} x it).\n")
        peer_ratios(rows, "etcd", "python3-etcd3", "python3-etcd3", "etcd")
    names = [r for r in order if r.startswith("pg ") or r.startswith("redis ")]
    if names:
        scenario_table(rows, sorted(names, key=lambda r: (r.split()[1], order.index(r))),
                       "PostgreSQL next to Redis")
    for prefix, title in (("sem-redis", "Redis: Redisson's RPermitExpirableSemaphore layout"),
                          ("sem-zk", "ZooKeeper standalone: Curator's InterProcessSemaphoreV2 layout"),
                          ("sem-pg", "PostgreSQL: dlock_semaphore rows"),
                          ("sem-etcd", "etcd (one member): dlock's layout")):
        names = [r for r in order if r.startswith(prefix + " ")]
        if names:
            scenario_table(rows, names, f"Semaphores, {title}", server=prefix == "sem-redis")
    if any(r.startswith("sem-redis ") for r in order):
        peer_ratios(rows, "sem-redis", "redisson-scripts", "Redisson's scripts", "Redis semaphore")
    if any(r.startswith("sem-zk ") for r in order):
        peer_ratios(rows, "sem-zk", "curator", "Curator", "ZooKeeper semaphore")
    names = [r for r in order if r.startswith("keepalive")]
    if names:
        print("### The keepalive: 100 locks held by one client\n")
        print("| row | rounds | client CPU us per lock per s | client wake-ups per s | a bare wake-up's CPU us | client RSS bytes per lock | lost | load before |")
        print("|---|---|---|---|---|---|---|---|")
        for row in names:
            print(f"| {row} | {len(rows[row])} | {f(med(rows, row, 'client_cpu_us_per_lock_per_s'), 1)} "
                  f"| {f(med(rows, row, 'client_wakeups_per_s'), 1)} | {f(med(rows, row, 'idle_wakeup_cpu_us'))} "
                  f"| {f(med(rows, row, 'client_rss_bytes_per_lock'))} | {f(med(rows, row, 'lost'))} "
                  f"| {load_of(row)} |")
        print("\nWake-ups: the client process's voluntary context switches per second while it holds (each "
              "one a sleep and a wake-up of one of its threads); a bare wake-up's CPU: what one costs a "
              "thread that does nothing else on this machine, measured by lock_bench right before "
              "(8 sleeps of 500 ms).\n")
    hf = out / "oneshot.json"
    if hf.exists():
        print("### One-shot process (hyperfine, 40 runs, pinned to CPU 0)\n")
        print("| command | mean ms | stddev ms | median ms | user ms | system ms |")
        print("|---|---|---|---|---|---|")
        for r in json.loads(hf.read_text())["results"]:
            cmd = r["command"].replace("|", "\\|")
            print(f"| `{cmd}` | {r['mean'] * 1e3:.1f} | {r['stddev'] * 1e3:.1f} | {r['median'] * 1e3:.1f} "
                  f"| {r['user'] * 1e3:.1f} | {r['system'] * 1e3:.1f} |")
        print()


if __name__ == "__main__":
    main()
