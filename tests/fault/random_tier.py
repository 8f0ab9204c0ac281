"""The randomised fault tier (reliability.md §7.7 tier 3): a seeded Jepsen-style schedule of
faults that keep dlock's model, judged as SAFE, with every fault counted as scheduled and as
fired, and a liveness bound. `faultrun.py random` (tests/fault/random.sh) runs it.

One fault at a time, then a pause of 100-800 ms, or with probability 1/4 a quiet phase of
QUIET_MS (so that the liveness bound has quiet time to judge). The faults:
  drop, reset, hold    the proxy on one acquire request of one route (fired: the proxy's
                       trigger count)
  blackhole, delay-down  every byte of one route, 0.2-2 s (fired: a call of a worker on that
                       route was in flight during the window)
  partition            nft drop both ways, in the run's own network namespace, 0.2-2 s: one
                       worker's route to one server, or one lock server's own port (everyone
                       cut from it) (fired: packets dropped)
  stall                lock server SIGSTOP 0.1-2 TTL (fired: the process was seen stopped)
  crash                a worker kill -9, a replacement started (fired: a live worker killed)
  flush                SCRIPT FLUSH (fired: the server answered OK)
  restart-aof          lock server kill -9 and restart with appendfsync always; S and F only
                       (fired: restarted)
  clock-back           a lock server's wall clock stepped back 50-300 ms (fired: the server's
                       TIME moved back against this host's clock by at least half the step)
  worker-clock         the workers' wall clock stepped +1 h, -1 h or +1 ms (F19; dlock reads
                       the steady clock) (fired: counted when written while a worker lived:
                       the shim re-reads the file every ms, nothing outside the worker sees it)
Every lock server also runs its clock at a constant rate drawn per seed in [0.997, 1.003]
(under the 1 % drift allowance; F15a). No forward clock step (F16: outside the model) and no
failover: a Sentinel failover loses a lock the replicas did not get (F25; the lock-delay narrows
the window, F25L), so SAFE is not what the model promises there.

Liveness bound: every fault's window [begin, end] is stretched by RECOVERY_MS after its end (a
key of a killed or unanswered holder lives a TTL, 1 s; then a command timeout and a
reconnect); in the time outside every stretched window ("quiet" time), no stretch longer than
LIVE_MS passes without an acquisition (of any worker).
"""

import os
import signal
import subprocess
import time

RECOVERY_MS = 2500
LIVE_MS = 2000
QUIET_MS = (4000, 6000)
KINDS = ["drop", "reset", "hold", "blackhole", "delay-down", "partition", "stall", "crash",
         "flush", "restart-aof", "clock-back", "worker-clock"]


# ---------------------------------------------------------------------------------------------
# pure parts (random_tier_test.py)


def merge(windows):
    """Sorted, overlapping or touching windows (begin, end) merged."""
    out = []
    for b, e in sorted(windows):
        if out and b <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((b, e))
    return out


def quiet(windows, begin, end, recovery):
    """The parts of [begin, end] outside every window stretched by `recovery` after its end."""
    out, t = [], begin
    for b, e in merge([(b, e + recovery) for b, e in windows]):
        if b > t:
            out.append((t, min(b, end)))
        t = max(t, e)
        if t >= end:
            break
    if t < end:
        out.append((t, end))
    return [(b, e) for b, e in out if e > b]


def liveness(acquisitions, windows, begin, end, recovery, bound):
    """Judges the liveness bound. Returns (quiet total, longest stretch of quiet time without
    an acquisition, stretches longer than bound as (begin, end)); times in one unit."""
    acq = sorted(acquisitions)
    total, longest, bad = 0, 0, []
    for qb, qe in quiet(windows, begin, end, recovery):
        total += qe - qb
        points = [qb] + [a for a in acq if qb < a < qe] + [qe]
        for a, b in zip(points, points[1:]):
            longest = max(longest, b - a)
            if b - a > bound:
                bad.append((a, b))
    return total, longest, bad


def tally(faults):
    """{kind: {"scheduled": n, "fired": m}} over records {"kind", "fired"}, every kind listed."""
    out = {k: {"scheduled": 0, "fired": 0} for k in KINDS}
    for f in faults:
        c = out.setdefault(f["kind"], {"scheduled": 0, "fired": 0})
        c["scheduled"] += 1
        c["fired"] += 1 if f["fired"] else 0
    return out


def in_flight(events, b, e):
    """Whether one of a worker's calls (invoke .. its completion) overlaps [b, e]."""
    inv = {}
    for ev in events:
        k = (ev["w"], ev["op"])
        if ev["type"] == "invoke":
            inv[k] = ev["t"]
        elif k in inv:
            if inv.pop(k) <= e and ev["t"] >= b:
                return True
    return any(t <= e for t in inv.values())  # a call that never completed


# ---------------------------------------------------------------------------------------------
# the run


def server_offset_us(srv):
    """The server's wall clock (TIME) minus this host's, in microseconds."""
    r = srv.call("TIME")
    return int(r[0]) * 1_000_000 + int(r[1]) - int(time.time() * 1_000_000)


def random_run(fr, run, seconds):
    """The body of `faultrun.py random` (fr: the faultrun module). Sets run.summary."""
    import campaign  # the commit the run starts on (campaign.py's, "-dirty" included)
    rev, load = campaign.commit(), campaign.loadavg()
    rng = run.rng
    partitions = True
    run.netns = fr.Netns(run)
    try:
        run.netns.enter()
    except fr.Skipped as e:  # no namespace here: the schedule goes on without partitions
        partitions, run.netns = False, None
        run.nemesis("note", "harness", "no partitions: %s" % e)
    n_lock = 3 if run.mode == "R" else 1
    rates = [round(rng.uniform(0.997, 1.003), 4) for _ in range(n_lock)]
    wskew = os.path.join(run.out, "workers.skew")
    with open(wskew, "w") as f:
        f.write("0 1.0")
    run.setup(duration_ms=int(seconds * 1000) + 1000, hold_ms=150, poll_ms=30,
              persistence="aof" if run.mode != "R" else "none", resource_via_proxy=False,
              lock_skew={i: "0 %s" % r for i, r in enumerate(rates)}, worker_skew=wskew)
    run.nemesis("skew-rate", "lock servers", " ".join(map(str, rates)))
    offsets = [0] * n_lock
    run.start_workers()
    t_begin = fr.mono_ns()
    end = time.monotonic() + seconds
    kinds = [k for k in KINDS if k != "partition" or partitions]
    if run.mode == "R":
        kinds.remove("restart-aof")
    faults = []

    def users(route):  # the workers (replacements included) whose URLs name this route
        port = str(run.proxy.ports[route])
        return [w for w in run.workers if any(port in a for a in w.args)]

    while time.monotonic() < end - 2:
        f = rng.choice(kinds)
        w = rng.randint(1, 3)  # a route; a replacement worker inherits its victim's routes
        srv = rng.randrange(len(run.lock_servers))
        route = run.route(w, srv)
        s = run.lock_servers[srv]
        b = fr.mono_ns()
        fired = False
        try:
            if f in ("drop", "reset", "hold"):
                before = run.proxy.triggered(route)
                run.proxy.ctl("rule %s %s %s count 1" % (route, f, run.acquire_rule()))
                run.sleep_ms(rng.randint(200, 1500))
                fired = run.proxy.triggered(route) > before
                run.proxy.ctl("clear %s" % route)
            elif f in ("blackhole", "delay-down"):
                rule = "blackhole" if f == "blackhole" else "delay-down %d" % rng.randint(10, 400)
                run.proxy.ctl("rule %s %s" % (route, rule))
                run.sleep_ms(rng.randint(200, 2000))
                run.proxy.ctl("clear %s" % route)
                e = fr.mono_ns()
                fired = any(in_flight(x.events(), b, e) for x in users(route))
            elif f == "partition":
                port = run.proxy.ports[route] if rng.random() < 0.5 else s.port
                run.netns.rules("tcp dport %d" % port, "tcp sport %d" % port)
                run.sleep_ms(rng.randint(200, 2000))
                fired = run.netns.heal() > 0
            elif f == "stall":
                s.signal(signal.SIGSTOP)
                run.nemesis("sigstop", s.name)
                fired = run.wait_for(lambda: run.stopped(s.pid()), 2, "a stopped server")
                run.sleep_ms(rng.randint(100, 2 * run.ttl_ms))
                s.signal(signal.SIGCONT)
                run.nemesis("sigcont", s.name)
            elif f == "crash":
                live = [x for x in run.workers if x.proc.poll() is None]
                if live:
                    victim = rng.choice(live)
                    victim.kill9()
                    run.nemesis("kill-9", "w%d" % victim.id)
                    fired = True
                    # a fresh process takes its place under a new worker id
                    args = list(victim.args[5:])
                    left = int((end - time.monotonic()) * 1000) + 500
                    args[args.index("--duration-ms") + 1] = str(max(500, left))
                    nw = fr.Worker(run, len(run.workers) + 1, args, wskew)
                    run.workers.append(nw)
                    nw.start()
            elif f == "flush":
                fired = s.call("SCRIPT", "FLUSH") == "OK"
                run.nemesis("script-flush", s.name)
            elif f == "restart-aof":
                s.kill9()
                run.nemesis("kill-9", s.name, "appendfsync always")
                s.start()
                run.nemesis("restart", s.name)
                fired = True
            elif f == "clock-back":
                step = rng.randint(50, 300)
                before = server_offset_us(s)
                offsets[srv] -= step
                s.set_skew(offsets[srv], rates[srv])
                fired = bool(run.wait_for(lambda: server_offset_us(s) < before - step * 500,
                                          1, "the server's clock stepped back"))
            elif f == "worker-clock":
                v = rng.choice([3600000, -3600000, 1])
                with open(wskew + ".tmp", "w") as fh:
                    fh.write("%d 1.0" % v)
                os.replace(wskew + ".tmp", wskew)
                run.nemesis("skew", "workers", v)
                fired = any(x.proc.poll() is None for x in run.workers)
        except (fr.HarnessError, OSError, subprocess.SubprocessError) as e:
            run.nemesis("note", "harness", "%s: %s" % (f, e))
        faults.append({"kind": f, "begin": b, "end": fr.mono_ns(), "fired": bool(fired)})
        quiet_phase = rng.random() < 0.25
        run.sleep_ms(rng.randint(*QUIET_MS) if quiet_phase else rng.randint(100, 800))
    t_end = fr.mono_ns()
    run.wait_workers()
    run.bounded_latency(3000 + 500 + 500 + 2000)
    run.min_acquisitions(int(seconds))
    counts = tally(faults)
    fired = sum(c["fired"] for c in counts.values())
    run.probe("at least one fault fired per 10 s", fired >= seconds / 10,
              "%d of %d fired" % (fired, len(faults)))
    acq = [e["t"] for x in run.workers for e in x.events()
           if e.get("f") == "acquire" and e.get("type") == "ok"]
    total, longest, bad = liveness(acq, [(f["begin"], f["end"]) for f in faults], t_begin,
                                   t_end, RECOVERY_MS * 1_000_000, LIVE_MS * 1_000_000)
    run.probe("an acquisition in every %d ms of quiet time (%d ms after each fault)"
              % (LIVE_MS, RECOVERY_MS), not bad,
              "%.1f s quiet, longest stretch without one %d ms%s" % (
                  total / 1e9, longest // 1_000_000, "; %d too long" % len(bad) if bad else ""))
    run.summary = {"commit": rev, "loadavg": load, "faults": counts, "partitions": partitions,
                   "server_clock_rates": rates,
                   "liveness": {"recovery_ms": RECOVERY_MS, "bound_ms": LIVE_MS,
                                "quiet_s": round(total / 1e9, 1),
                                "longest_quiet_gap_ms": longest // 1_000_000,
                                "too_long": len(bad)}}
    print("faults (fired/scheduled): " + ", ".join(
        "%s %d/%d" % (k, c["fired"], c["scheduled"]) for k, c in counts.items()))
