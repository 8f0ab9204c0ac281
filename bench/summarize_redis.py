#!/usr/bin/env python3
"""Redis's rows of a bench/run_side_by_side.sh run against the standing targets (Markdown).

    python3 bench/summarize_redis.py OUT

Reads what the run left in OUT (nothing is run): lock_bench's JSON line in A_<kind>.txt,
B_<kind>[_async].txt, C_<kind>[_own_clients].txt, D_<kind>_own_clients.txt and hold_10000.txt,
redis-benchmark's CSV in rb_ping_c1_p1_before_A_<kind>.txt, the peers' harness JSON in
peers/node.json and peers/python.json, and the load average before each row in commands.txt.

The targets (the brief; ../shared/bench/peers/README.md defines A-D):
  A  the pair's p50 <= 1.10 x two PING round trips (redis-benchmark -c 1 -P 1 p50, right before);
     against its floor, the kind's own pair on a plain blocking socket, on the median of the
     per-round ratios of the A rounds (A_rounds/)
  B  >= 2 x the best peer's B (50 async workers on 50 keys over one connection), every kind;
     where the bar lies above what the pair's requests alone allow the server (their
     commandstats time during the row), the row is met when the server runs >= 1 / 1.10 busy
  C  >= 2.5 x the best peer's C (8 workers, one key), exact, every worker >= 50 % of its fair
     share, with one shared client and with a client per worker; with one client also against
     its floor, a critical section's own requests on a plain blocking socket, on the median of
     the per-round ratios of the C rounds (C_rounds/): where the bar lies above that floor, the
     target is set against it, met at >= 1 / 1.10 of it (A's allowance over its floor)
  D  the hand-off p50 across clients (a client per worker) <= 1.2 x the BLPOP floor's; judged
     on the median of per-round ratios when the run has D rounds (D_rounds/)
  hold  10,000 held locks: one renewal script per 100 locks per period, <= 1 KiB per lock
"A peer" is a lock library of the harness; its no-library references (raw-*, floor-*) are
floors, not peers, except in B, where the issue sets raw ioredis (SET NX + EVALSHA) as the bar.
"""
import csv
import json
import os
import re
import sys

# The run's files are read as bench/charts.py reads them (it draws the charts of the same run).
from charts import KINDS, peers as peer_list, read_json_line

# C runs 8 workers (bench/run_side_by_side.sh, the peers' README): a worker's fair share.
C_WORKERS = 8


def rb_p50_us(path):
    """redis-benchmark --csv: the p50 latency column, in microseconds."""
    try:
        rows = list(csv.DictReader(open(path)))
    except OSError:
        return None
    for r in rows:
        for k, v in r.items():
            if k and "p50" in k:
                return float(v) * 1000.0
    return None


def rb_mean_us(path):
    """redis-benchmark --csv with -c 1 -P 1: the mean round trip, 1e6 / requests per second
    (not bucketed, unlike its percentiles: redis-benchmark's p50 comes in 8 us steps here)."""
    try:
        for r in csv.DictReader(open(path)):
            if r.get("rps"):
                return 1e6 / float(r["rps"])
    except (OSError, ValueError):
        pass
    return None


def loads(out):
    """row name -> the 1-minute load average logged before it."""
    res = {}
    try:
        for line in open(os.path.join(out, "commands.txt")):
            m = re.match(r"^(\S+): \(load ([0-9.]+)\)", line)
            if m:
                res[m.group(1)] = m.group(2)
    except OSError:
        pass
    return res


def commandstats(path):
    """INFO commandstats: command -> usec_per_call."""
    res = {}
    try:
        for line in open(path):
            m = re.match(r"^cmdstat_([^:]+):.*usec_per_call=([0-9.]+)", line)
            if m:
                res[m.group(1)] = float(m.group(2))
    except OSError:
        pass
    return res


# B's requests per pair, as commandstats names them: every kind's acquire and release are
# scripts, except the simple lock's acquire, a plain SET NX PX. A script's time includes the
# commands it calls.
B_REQUESTS = {"simple": {"set": 1, "evalsha": 1}, "lock": {"evalsha": 2},
              "fair": {"evalsha": 2}, "write": {"evalsha": 2}}


def rounds_text(n):
    return f"{n} round" + ("s" if n != 1 else "")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else None


def a_rounds(out, kind):
    """[(dlock A pair p50, the kind's own pair p50, PING+PING p50)] per round of $OUT/A_rounds
    (run_side_by_side.sh: blocking_pair and lock_bench A alternated)."""
    res = []
    for r in range(1, 100):
        ping = read_json_line(os.path.join(out, "A_rounds", f"bp_ping_{r}.txt"))
        if not ping:
            break
        own = read_json_line(os.path.join(out, "A_rounds", f"bp_{kind}_{r}.txt"))
        a = read_json_line(os.path.join(out, "A_rounds", f"A_{kind}_{r}.txt"))
        if own and a and own.get("pair_p50_us") and ping.get("pair_p50_us"):
            res.append((a["pair_p50_us"], own["pair_p50_us"], ping["pair_p50_us"]))
    return res


def worker_share(c):
    """C: the slowest worker's critical sections as a share of its fair share."""
    return c.get("per_worker_min", 0) / (c["ops"] / C_WORKERS) if c.get("ops") else None


def c_rounds(out, kind):
    """[(dlock C ops/s, the floor's sections/s, exact and fair)] per round of $OUT/C_rounds
    (run_side_by_side.sh: bp_section, two critical sections per pass, and lock_bench C
    alternated)."""
    res = []
    for r in range(1, 100):
        fl = read_json_line(os.path.join(out, "C_rounds", f"bp_section_{kind}_{r}.txt"))
        c = read_json_line(os.path.join(out, "C_rounds", f"C_{kind}_{r}.txt"))
        if not fl and not c:
            break
        if fl and c and fl.get("pairs_per_s") and not fl.get("error_replies") and c.get("ops"):
            res.append((c["ops_per_s"], 2 * fl["pairs_per_s"],
                        bool(c.get("counter_exact")) and worker_share(c) >= 0.5))
    return res


def d_rounds(out):
    """[(floor p50, {kind: dlock D p50})] per round of $OUT/D_rounds (run_side_by_side.sh)."""
    res = []
    for r in range(1, 100):
        path = os.path.join(out, "D_rounds", f"floor-blpop-{r}.json")
        if not os.path.exists(path):
            break
        try:
            libs = json.load(open(path)).get("libs", {})
            fl = libs["floor-blpop"]["D_blocking"]["p50_us"]
        except (OSError, ValueError, KeyError):
            continue
        kinds = {}
        for k in KINDS:
            d = read_json_line(os.path.join(out, "D_rounds", f"D_{k}_{r}.txt"))
            if d and d.get("handoff_p50_us"):
                kinds[k] = d["handoff_p50_us"]
        res.append((fl, kinds))
    return res


def peers(out):
    """library -> its tests, from the peers' harness results (charts.peers)."""
    return {lib: tests for lib, _floor, tests in peer_list(out)}


def best(libs, pick, allow_floor=False):
    """(label, value) of the highest value pick(lib, tests) yields among the libraries."""
    top = (None, None)
    for lib, tests in libs.items():
        if not allow_floor and (lib.startswith("raw") or lib.startswith("floor")):
            continue
        for label, v in pick(lib, tests):
            if v is not None and (top[1] is None or v > top[1]):
                top = (label, v)
    return top


def f(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "**not met**")


def main():
    out = sys.argv[1]
    libs, load = peers(out), loads(out)
    rows = []  # (target, row, measured, bar, ratio, verdict, load)

    def row(name):
        return read_json_line(os.path.join(out, name + ".txt"))

    def b_exec_us(kind):
        """The server's time inside B's requests per pair (commandstats of B_<kind>_async)."""
        st = commandstats(os.path.join(out, f"B_{kind}_async_commandstats.txt"))
        req = B_REQUESTS[kind]
        if not all(c in st for c in req):
            return None
        return sum(n * st[c] for c, n in req.items())

    # A: the pair against two PING round trips measured right before it.
    for k in KINDS:
        a, ping = row(f"A_{k}"), rb_p50_us(os.path.join(out, f"rb_ping_c1_p1_before_A_{k}.txt"))
        if not a or not ping:
            continue
        r = a["pair_p50_us"] / (2 * ping)
        rows.append(("A <= 1.10 x 2 PING", f"A {k}", f"pair p50 {f(a['pair_p50_us'])} us",
                     f"2 x {f(ping)} us", f"{r:.2f} x", verdict(r <= 1.10), load.get(f"A_{k}")))
        # The same two PINGs as a plain blocking client sees them (bench/blocking_pair).
        bp = row(f"bp_ping_before_A_{k}")
        if bp:
            r = a["pair_p50_us"] / bp["pair_p50_us"]
            rows.append(("A <= 1.10 x 2 PING, plain client", f"A {k}",
                         f"pair p50 {f(a['pair_p50_us'])} us",
                         f"PING+PING {f(bp['pair_p50_us'])} us", f"{r:.2f} x", verdict(r <= 1.10),
                         load.get(f"A_{k}")))

        # Against its floor: the kind's own pair on a plain blocking socket and dlock's A,
        # alternated (A_rounds/); the median of the per-round ratios of the p50s.
        per = [(x[0] / x[1], x[0] / x[2]) for x in a_rounds(out, k)]
        if per:
            own = sorted(x for x, _ in per)
            m = median(own)
            rows.append(("A <= 1.10 x the kind's own pair, plain client (floor)",
                         f"A {k}, {rounds_text(len(per))}", "median of per-round ratios",
                         f"to PING+PING: {median([y for _, y in per]):.2f} x",
                         f"{m:.2f} x (rounds {own[0]:.2f}-{own[-1]:.2f})", verdict(m <= 1.10),
                         load.get(f"A_rounds/A_{k}_1")))

    # A's floors, on means (not bucketed): A's mean pair (1 / pairs per second) against two
    # PING round trips and against the round trips of the kind's own two commands
    # (redis-benchmark -c 1 -P 1 of the same SET / scripts; rows for the lock and the simple lock).
    floors = []
    own = {"simple": ("rb_setnx_c1_p1", "rb_srelease_c1_p1"),
           "lock": ("rb_acquire_c1_p1", "rb_release_c1_p1")}
    for k in KINDS:
        a = row(f"A_{k}")
        ping = rb_mean_us(os.path.join(out, f"rb_ping_c1_p1_before_A_{k}.txt"))
        if not a or not ping:
            continue
        pair = 1e6 / a["ops_per_s"]
        cmds = [rb_mean_us(os.path.join(out, n + ".txt")) for n in own.get(k, ())]
        floor = sum(cmds) if cmds and all(cmds) else None
        bp_ping, bp_own = row(f"bp_ping_before_A_{k}"), row(f"bp_{k}")
        floors.append((k, pair, ping, floor, bp_ping and bp_ping["pair_mean_us"],
                       bp_own and bp_own["pair_mean_us"]))

    # B: against the best peer's B (raw ioredis counts here: the bar).
    pb_label, pb = best(libs, lambda lib, t: [(lib, t.get("B", {}).get("pairs_per_s"))],
                        allow_floor=True)
    for k in KINDS:
        for suffix, note in (("_async", "async"), ("", "threads")):
            b = row(f"B_{k}{suffix}")
            if not b or not pb:
                continue
            r = b["ops_per_s"] / pb
            # The target is set on the async row (one client, 50 workers on its I/O thread);
            # the thread-per-worker row is shown beside it.
            rows.append(("B >= 2 x best peer", f"B {k} ({note})", f"{f(b['ops_per_s'])} pairs/s",
                         f"{pb_label} {f(pb)}", f"{r:.2f} x",
                         verdict(r >= 2.0) if suffix else "(not the target's row)",
                         load.get(f"B_{k}{suffix}")))

    # B against the server: where 2 x the best peer lies above what the pair's requests alone
    # allow the server (their commandstats time, no I/O), no client reaches the bar with these
    # requests; the row is then met when it keeps the server >= 1 / 1.10 busy (its ceiling at
    # the measured CPU per pair).
    for k in KINDS:
        b, exec_us = row(f"B_{k}_async"), b_exec_us(k)
        if not b or not pb or not exec_us or not b.get("server_cpu_us_per_op"):
            continue
        bar, bound = 2 * pb, 1e6 / exec_us
        cap = 1e6 / b["server_cpu_us_per_op"]
        busy = b["ops_per_s"] / cap
        ok = b["ops_per_s"] >= bar or (bar > bound and busy >= 1 / 1.10)
        rows.append(("B >= 2 x best peer, or the server >= 1 / 1.10 busy when the bar is above "
                     "what its requests allow", f"B {k} (async)",
                     f"{f(b['ops_per_s'])} pairs/s, server {busy:.0%} busy",
                     f"bar {f(bar)}; the requests alone allow {f(bound)}",
                     f"{b['ops_per_s'] / pb:.2f} x", verdict(ok), load.get(f"B_{k}_async")))

    # C: against the best peer's C that kept its counter exact.
    pc_label, pc = best(libs, lambda lib, t: [
        (f"{lib}/{n[2:]}", v.get("ops_per_s")) for n, v in t.items()
        if n.startswith("C_") and v.get("counter_exact")])
    for k in KINDS:
        for suffix, note in (("", "one client"), ("_own_clients", "a client per worker")):
            c = row(f"C_{k}{suffix}")
            if not c or not pc:
                continue
            r = c["ops_per_s"] / pc
            share = worker_share(c)
            ok = r >= 2.5 and c.get("counter_exact") and share is not None and share >= 0.5
            rows.append(("C >= 2.5 x best peer, exact, fair", f"C {k} ({note})",
                         f"{f(c['ops_per_s'])} ops/s, exact {'yes' if c.get('counter_exact') else 'NO'}, "
                         f"min worker {share:.0%} of fair" if share is not None else "-",
                         f"{pc_label} {f(pc)}", f"{r:.2f} x", verdict(ok), load.get(f"C_{k}{suffix}")))

    # C with one client against its floor: the section's own requests on a plain socket and
    # dlock's C, alternated (C_rounds/). Where 2.5 x the best peer lies above the floor, no
    # client sending these requests reaches it; the row is then met at >= 1 / 1.10 of the floor.
    c_floors = {}
    for k in KINDS:
        per = c_rounds(out, k)
        if not per or not pc:
            continue
        ratios = sorted(c / fl for c, fl, _ in per)
        m, fl_m, c_m = median(ratios), median([fl for _, fl, _ in per]), median([c for c, _, _ in per])
        bar = 2.5 * pc
        c_floors[k] = fl_m
        exact = all(ok for _, _, ok in per)
        ok = exact and (c_m >= bar or (bar > fl_m and m >= 1 / 1.10))
        rows.append(("C >= 2.5 x best peer, or >= 1 / 1.10 x the floor when the bar is above it",
                     f"C {k} (one client), {rounds_text(len(per))}",
                     f"median {f(c_m)} ops/s, {m:.2f} x the floor (rounds {ratios[0]:.2f}-"
                     f"{ratios[-1]:.2f}), exact and fair {'yes' if exact else 'NO'}",
                     f"floor median {f(fl_m)}/s; bar {f(bar)}/s = {bar / fl_m:.2f} x it",
                     f"{c_m / pc:.2f} x the peer", verdict(ok), load.get(f"C_rounds/C_{k}_1")))

    # D: the hand-off across clients against the BLPOP floor. With D rounds (the floor and the
    # D rows alternated), the verdict is the median of the per-round ratios; the single rows
    # above them in the run are shown, not judged.
    rounds = d_rounds(out)
    floor = libs.get("floor-blpop", {})
    fd = next((v.get("p50_us") for n, v in floor.items() if n.startswith("D_")), None)
    for k in KINDS:
        d = row(f"D_{k}_own_clients")
        if d and fd:
            r = d["handoff_p50_us"] / fd
            rows.append(("D <= 1.2 x BLPOP floor", f"D {k} (a client per worker)",
                         f"hand-off p50 {f(d['handoff_p50_us'])} us", f"BLPOP {f(fd)} us",
                         f"{r:.2f} x", "(one row: judged on the rounds)" if rounds else
                         verdict(r <= 1.2), load.get(f"D_{k}_own_clients")))
        per = [(kinds[k], fl) for fl, kinds in rounds if k in kinds]
        if per:
            ratios = sorted(v / fl for v, fl in per)
            m = median(ratios)
            rows.append(("D <= 1.2 x BLPOP floor", f"D {k}, {rounds_text(len(per))}",
                         f"hand-off p50 median {f(median([v for v, _ in per]))} us",
                         f"BLPOP median {f(median([fl for _, fl in per]))} us",
                         f"{m:.2f} x (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})",
                         verdict(m <= 1.2), load.get(f"D_rounds/D_{k}_1")))

    # hold: renewal scripts per 100 locks per period, and memory per lock.
    h = row("hold_10000")
    if h and h.get("renewal_periods"):
        per = h["renewal_batches"] / h["renewal_periods"] / (h["locks"] / 100)
        rows.append(("hold: 1 script / 100 locks / period", "hold 10,000",
                     f"{h['renewal_batches']} scripts in {h['renewal_periods']} periods",
                     "100 per period", f"{per:.2f} per 100 locks", verdict(per <= 1.0),
                     load.get("hold_10000")))
        rows.append(("hold: <= 1 KiB per lock", "hold 10,000",
                     f"{f(h['client_rss_bytes_per_lock'])} B per lock", "1,024 B", "",
                     verdict(h["client_rss_bytes_per_lock"] <= 1024), load.get("hold_10000")))

    print("| target | row | measured | bar | ratio | verdict | load before |")
    print("|---|---|---|---|---|---|---|")
    for t in rows:
        print("| " + " | ".join(x if x is not None else "-" for x in t) + " |")
    print()
    if floors:
        print("A on means (1 / pairs per second; redis-benchmark's 1 / requests per second): the "
              "floor is the round trips of the kind's own two commands, one at a time on one "
              "connection (redis-benchmark -c 1 -P 1: for the lock and the simple lock; its "
              "release runs on a random key, so the lock's floor is its not-owner path, a little "
              "cheaper than a release).\n")
        print("The plain client's columns: bench/blocking_pair, the same two PINGs and the kind's "
              "own acquire and release (one key and token, the owner's path) on one blocking "
              "socket with no library.\n")
        print("| row | mean pair us | 2 x PING mean us | pair / 2 PING | floor us | pair / floor "
              "| plain PING+PING us | pair / it | plain own pair us | pair / it |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for k, pair, ping, floor, bp_ping, bp_own in floors:
            print(f"| A {k} | {f(pair, 1)} | {f(2 * ping, 1)} | {pair / (2 * ping):.2f} "
                  f"| {f(floor, 1)} | {f(pair / floor, 2) if floor else '-'} "
                  f"| {f(bp_ping, 1)} | {f(pair / bp_ping, 2) if bp_ping else '-'} "
                  f"| {f(bp_own, 1)} | {f(pair / bp_own, 2) if bp_own else '-'} |")
        churn = row("bp_ping_churn")
        if churn:
            print(f"\nThe plain client's PING+PING with an epoll_ctl ADD and DEL before each wait "
                  f"(--churn): mean {f(churn['pair_mean_us'], 1)} us, p50 "
                  f"{f(churn['pair_p50_us'], 1)} us.")
        print()
    # C's floor: what the critical section needs whatever the client: with one client a
    # release hands the lock to a waiter of the same client in one script, so a critical
    # section is three round trips (the hand-over, GET, SET); with a client per worker the
    # lock goes from client to client, at best as fast as the BLPOP floor's hand-off, and then
    # GET and SET. Round trips are PING's mean (redis-benchmark -c 1 -P 1, before A_lock).
    ping = rb_mean_us(os.path.join(out, "rb_ping_c1_p1.txt"))
    if ping and pc:
        cs = []
        for k in KINDS:
            own = c_floors.get(k)
            for suffix, note, per_cs in (("", "one client, 3 PINGs", 3 * ping),
                                         ("", "one client, its own requests",
                                          1e6 / own if own else None),
                                         ("_own_clients", "a client per worker",
                                          fd + 2 * ping if fd else None)):
                c = row(f"C_{k}{suffix}")
                if c and per_cs:
                    floor = 1e6 / per_cs
                    cs.append(f"| C {k} ({note}) | {f(c['ops_per_s'])} | {f(floor)} "
                              f"| {c['ops_per_s'] / floor:.0%} | {f(2.5 * pc)} "
                              f"| {2.5 * pc / floor:.0%} |")
        print(f"C against its floor (one client: 3 PING round trips of {f(ping, 1)} us per critical "
              "section, or the section's own requests on a plain socket, the median of the C "
              f"rounds; a client per worker: the BLPOP floor's hand-off p50 {f(fd)} us and 2 round "
              "trips), and where the target (2.5 x the best peer) lies against that floor. The "
              "rows are the run's single C rows, not the rounds.\n")
        print("| row | ops/s | floor ops/s | of the floor | target ops/s | target / floor |")
        print("|---|---|---|---|---|---|")
        print("\n".join(cs) + "\n")
    # B is bound by the server's CPU when the scripts cost it more than the client: the
    # server's CPU per pair (INFO's used_cpu deltas over the run, lock_bench's
    # server_cpu_us_per_op) gives the pairs per second a fully busy server would do.
    bs = []
    for k in KINDS:
        b = row(f"B_{k}_async")
        if b and b.get("server_cpu_us_per_op"):
            cap = 1e6 / b["server_cpu_us_per_op"]
            exec_us = b_exec_us(k)
            bs.append(f"| B {k} (async) | {f(b['ops_per_s'])} | {f(b.get('server_cmds_per_op'), 1)} "
                      f"| {f(b['server_cpu_us_per_op'], 2)} | {f(cap)} | {b['ops_per_s'] / cap:.0%} "
                      f"| {f(exec_us, 2)} | {f(exec_us and 1e6 / exec_us)} "
                      f"| {f(b.get('client_cpu_us_per_op'), 2)} |")
    if bs:
        print("B and the server's CPU: the server's CPU time per pair over the run, the pairs per "
              "second it would serve at 100 % of its core, and how busy it was; then the time "
              "the pair's requests themselves take on the server (INFO commandstats during the "
              "row: a script's usec_per_call, which includes the commands it calls), and the "
              "pairs per second that time alone allows, with no reading, parsing or writing.\n")
        print("| row | pairs/s | server cmds per pair | server CPU us per pair | server's ceiling "
              "pairs/s | server busy | requests' own us per pair | their ceiling pairs/s "
              "| client CPU us per pair |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(bs) + "\n")


if __name__ == "__main__":
    main()
