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
(under the 1 % drift allowance; F15a). No forward clock step (F16: outside the model).

Mode FO (a Sentinel-managed master: faultrun.fo_setup, master lock0, replicas lock1-2, each
behind its proxy route l0-l2, which every client, replica and sentinel takes; three sentinels,
quorum 2, down-after-milliseconds 1000, failover-timeout 3000) adds
  failover             a coordinated failover (coordinated_failover): wait until both replicas
                       replicate the master, CLIENT PAUSE WRITE on the master, wait until every
                       replica's slave_repl_offset reached the master's master_repl_offset,
                       SENTINEL FAILOVER mymaster on one sentinel, wait until every sentinel
                       names the new master, REPLICAOF the old master to the new one (Sentinel
                       would convert it only 8 s after seeing it again, taking writes until
                       then), CLIENT UNPAUSE (its paused writes meet READONLY). No acknowledged
                       write is missing on the new master, so SAFE is the model's promise. The
                       next failover picks whichever replica Sentinel selects (the old master
                       included). (fired: the master the sentinels name changed; a probe
                       fails the run when a failover stopped short of one of its steps)
An uncoordinated failover is not (a Sentinel failover loses a lock the replicas did not get:
F25; the lock-delay narrows the window, F25L), so the FO schedule keeps the sentinels from
starting one, and a probe fails the run if they did (+odown in a sentinel's log, more
+switch-master than coordinated failovers, or a master change between faults):
  blackhole, partition, stall of the master: FO_MASTER_CUT_MS, 0.2-0.4 s, under half of
    down-after-milliseconds: a sentinel drops and re-opens its link to a master that leaves
    its PING unanswered for half of it, and PINGs at once on the new link; a partition's
    dropped segment comes back with TCP's first retransmissions (200 ms, then 400 ms later), so
    an unanswered PING stays well under the 1 s that makes the master subjectively down. Of a
    replica (its own route or port: the replication link takes the master's route) the usual
    0.2-2 s (a replica down is no failover).
  drop, reset, hold, blackhole, delay-down, flush: on the master's route or the master (the
    workers' requests go there only); delay-down's 10-400 ms per reply is under the half of
    down-after-milliseconds that drops a sentinel's link.
  partition: a data node's proxy port or its own port (either cuts it from everyone).
  crash, worker-clock: as in the other modes.
  restart-aof: excluded. kill -9 of the master is F25's crash: a restart longer than
    down-after-milliseconds is an uncoordinated failover that may lose the newest grant, and
    a loaded 2-core machine cannot promise a shorter one (FO's nodes keep no AOF, as in
    fo_setup's scenarios, so a restarted master would also come back empty).
  clock-back, and the clock rates: excluded. Redis 7 propagates an expiry as an absolute time
    (SET .. PXAT, PEXPIREAT) to the replicas, which expire it by their own wall clock: a
    master's clock stepped back, or a replica's clock running off the master's, ends a lease
    early on a replica that is promoted. An offset between the nodes' clocks is outside the
    model (its drift is that of one server's clock against the lease); no node runs the shim.

Liveness bound: every fault's window [begin, end] is stretched by RECOVERY_MS after its end (a
key of a killed or unanswered holder lives a TTL, 1 s; then a command timeout and a
reconnect); in the time outside every stretched window ("quiet" time), no stretch longer than
LIVE_MS passes without an acquisition (of any worker). A failover's window runs from the
pause to the unpause after the sentinels named the new master (about 1.1 s: the leader
waits for the promoted replica's INFO, sent every second during a failover); it is stretched
by FO_RECOVERY_MS, 3.5 s: RECOVERY_MS (a holder's release that the pause held times out,
its key lives out its TTL on the new master) plus the clients' lock-delay, one lease (the
workers' TTL, 1 s), from the +switch-master each client sees, during which it grants nothing.
"""

import os
import signal
import subprocess
import time

RECOVERY_MS = 2500
LIVE_MS = 2000
QUIET_MS = (4000, 6000)
KINDS = ["drop", "reset", "hold", "blackhole", "delay-down", "partition", "stall", "crash",
         "flush", "restart-aof", "clock-back", "worker-clock", "failover"]
# FO: the sentinels' down-after-milliseconds (faultrun.Sentinel) and the longest cut of the
# master (blackhole, partition, stall) the schedule makes there: under half of it, the point
# at which a sentinel drops its link to a master that does not answer its PING.
FO_DOWN_AFTER_MS = 1000
FO_MASTER_CUT_MS = (200, 400)
# FO: a coordinated failover's window is stretched by this (RECOVERY_MS plus the clients'
# lock-delay of one lease, the TTL, 1 s, from the +switch-master they see).
FO_RECOVERY_MS = RECOVERY_MS + 1000
FO_PAUSE_MS = 30000  # CLIENT PAUSE's own limit; the harness unpauses once the switch is done
# ---------------------------------------------------------------------------------------------
# pure parts (random_tier_test.py)


def kinds(mode, partitions=True):
    """The fault kinds of a mode. R: no restart-aof (no persistence on its masters). FO: no
    restart-aof and no clock-back (see the module's docstring), and a coordinated failover."""
    out = [k for k in KINDS if k != "partition" or partitions]
    if mode in ("R", "FO"):
        out.remove("restart-aof")
    if mode == "FO":
        out.remove("clock-back")
    else:
        out.remove("failover")
    return out


def cut_ms(kind, mode, on_master):
    """(shortest, longest) duration in ms of a blackhole, delay-down, partition or stall (TTL
    1 s). In FO a cut of the master (blackhole, partition, stall) stays at FO_MASTER_CUT_MS."""
    if mode == "FO" and on_master and kind in ("blackhole", "partition", "stall"):
        return FO_MASTER_CUT_MS
    return (100, 2000) if kind == "stall" else (200, 2000)


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
    """The parts of [begin, end] outside every window stretched by `recovery` after its end; a
    window (begin, end, r) is stretched by its own r instead."""
    out, t = [], begin
    for b, e in merge([(w[0], w[1] + (w[2] if len(w) > 2 else recovery)) for w in windows]):
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


def tally(faults, kinds_listed=None):
    """{kind: {"scheduled": n, "fired": m}} over records {"kind", "fired"}, every kind of
    kinds_listed (default KINDS) listed."""
    out = {k: {"scheduled": 0, "fired": 0} for k in (kinds_listed or KINDS)}
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


def fo_master(run):
    """FO: the index (in run.lock_servers) of the master every sentinel names, or None while
    they disagree or name none."""
    ports = {s.master_port_now() for s in run.extra_servers}
    if len(ports) != 1:
        return None
    port = ports.pop()
    for i, n in enumerate(run.lock_servers):
        if run.announced(n) == port:
            return i
    return None


def fo_linked(fr, run, master):
    """FO: every other data node replicates the master (its announced port), link up."""
    port = str(run.announced(run.lock_servers[master]))
    for i, n in enumerate(run.lock_servers):
        if i == master:
            continue
        if fr.info_field(n, "replication", "role") != "slave" or \
                fr.info_field(n, "replication", "master_port") != port or \
                fr.info_field(n, "replication", "master_link_status") != "up":
            return False
    return True


def coordinated_failover(fr, run, rng, master):
    """FO: pauses the master's writes, waits until every replica's offset reached the master's,
    has one sentinel fail over (SENTINEL FAILOVER), waits until every sentinel names the new
    master, makes the old master a replica of it (Sentinel itself converts a former master
    only 8 s after it sees it again, SENTINEL_PUBLISH_PERIOD x 4; until then it would take
    writes), then unpauses it (its paused writes then meet READONLY). HarnessError when a
    step does not happen in time (the pause ends all the same)."""
    old = run.lock_servers[master]
    run.wait_for(lambda: fo_linked(fr, run, master), 10, "the replicas linked")
    old.call("CLIENT", "PAUSE", str(FO_PAUSE_MS), "WRITE")
    run.nemesis("client-pause", old.name, "WRITE")
    try:
        target = int(fr.info_field(old, "replication", "master_repl_offset"))

        def caught_up():
            return all(int(fr.info_field(n, "replication", "slave_repl_offset") or -1) >= target
                       for i, n in enumerate(run.lock_servers) if i != master)
        run.wait_for(caught_up, 5, "every replica at the master's offset")
        run.nemesis("replicas-caught-up", "lock servers", target)
        s = rng.choice(run.extra_servers)
        r = s.call("SENTINEL", "FAILOVER", "mymaster")
        run.nemesis("sentinel-failover", s.name, r)
        if r != "OK":
            raise fr.HarnessError("SENTINEL FAILOVER: %r" % (r,))
        new, = run.wait_for(lambda: (lambda m: (m,) if m is not None and m != master else None)(
            fo_master(run)), 15, "the sentinels naming a new master")  # (0,): lock0 is truthy
        run.nemesis("failover", "sentinels", "new master %s on port %d" % (
            run.lock_servers[new].name, run.announced(run.lock_servers[new])))
        old.call("REPLICAOF", "127.0.0.1", str(run.announced(run.lock_servers[new])))
        run.nemesis("replicaof", old.name, run.lock_servers[new].name)
        run.wait_for(lambda: fr.info_field(old, "replication", "role") == "slave", 5,
                     "the old master a replica")
    finally:
        old.call("CLIENT", "UNPAUSE")
        run.nemesis("client-unpause", old.name)


def sentinel_log_count(run, what):
    """FO: how many times each sentinel logged `what` (e.g. "+switch-master")."""
    out = []
    for s in run.extra_servers:
        try:
            with open(os.path.join(s.dir, "sentinel.log"), errors="replace") as f:
                out.append(sum(1 for line in f if " %s " % what in line))
        except OSError:
            out.append(-1)
    return out


def random_run(fr, run, seconds):
    """The body of `faultrun.py random` (fr: the faultrun module). Sets run.summary."""
    import campaign  # the commit the run starts on (campaign.py's, "-dirty" included)
    rev, load = campaign.commit(), campaign.loadavg()
    rng = run.rng
    fo = run.mode == "FO"
    partitions = True
    run.netns = fr.Netns(run)
    try:
        run.netns.enter()
    except fr.Skipped as e:  # no namespace here: the schedule goes on without partitions
        partitions, run.netns = False, None
        run.nemesis("note", "harness", "no partitions: %s" % e)
    n_lock = 3 if run.mode == "R" else 0 if fo else 1  # FO: no clock rates (docstring)
    rates = [round(rng.uniform(0.997, 1.003), 4) for _ in range(n_lock)]
    wskew = os.path.join(run.out, "workers.skew")
    with open(wskew, "w") as f:
        f.write("0 1.0")
    run.setup(duration_ms=int(seconds * 1000) + 1000, hold_ms=150, poll_ms=30,
              persistence="aof" if run.mode in ("S", "F") else "none", resource_via_proxy=False,
              lock_skew={i: "0 %s" % r for i, r in enumerate(rates)} or None,
              worker_skew=wskew)
    if not fo:
        run.nemesis("skew-rate", "lock servers", " ".join(map(str, rates)))
    offsets = [0] * n_lock
    run.start_workers()
    t_begin = fr.mono_ns()
    end = time.monotonic() + seconds
    kinds_here = kinds(run.mode, partitions)
    faults = []
    master = 0  # FO: the index of the master the sentinels name
    uncoordinated = []  # FO: master changes the schedule did not make
    fo_errors = []  # FO: coordinated failovers that stopped short of a step

    def users(route):  # the workers (replacements included) whose URLs name this route
        port = str(run.proxy.ports[route])
        return [w for w in run.workers if any(port in a for a in w.args)]

    while time.monotonic() < end - 2:
        f = rng.choice(kinds_here)
        w = rng.randint(1, 3)  # a route; a replacement worker inherits its victim's routes
        srv = rng.randrange(len(run.lock_servers))
        if fo:
            now = fo_master(run)
            if now is not None and now != master:
                uncoordinated.append(now)
                run.nemesis("note", "harness", "uncoordinated failover to lock%d" % now)
                master = now
            if f != "partition" and f != "stall":  # the workers' requests go to the master
                srv = master
        route = run.route(w, srv)
        s = run.lock_servers[srv]
        on_master = not fo or srv == master
        b = fr.mono_ns()
        fired = False
        recovery = None
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
                run.sleep_ms(rng.randint(*cut_ms(f, run.mode, on_master)))
                run.proxy.ctl("clear %s" % route)
                e = fr.mono_ns()
                fired = any(in_flight(x.events(), b, e) for x in (run.workers if fo
                                                                   else users(route)))
            elif f == "partition":
                port = run.proxy.ports[route] if rng.random() < 0.5 else s.port
                run.netns.rules("tcp dport %d" % port, "tcp sport %d" % port)
                run.sleep_ms(rng.randint(*cut_ms(f, run.mode, on_master)))
                fired = run.netns.heal() > 0
            elif f == "stall":
                s.signal(signal.SIGSTOP)
                run.nemesis("sigstop", s.name)
                fired = run.wait_for(lambda: run.stopped(s.pid()), 2, "a stopped server")
                run.sleep_ms(rng.randint(*cut_ms(f, run.mode, on_master)))
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
            elif f == "failover":
                recovery = FO_RECOVERY_MS * 1_000_000
                coordinated_failover(fr, run, rng, master)
        except (fr.HarnessError, OSError, subprocess.SubprocessError) as e:
            run.nemesis("note", "harness", "%s: %s" % (f, e))
            if f == "failover":
                fo_errors.append(str(e))
        if f == "failover":  # fired: the master the sentinels name changed (also after an error)
            now = fo_master(run)
            if now is not None and now != master:
                master, fired = now, True
        rec = {"kind": f, "begin": b, "end": fr.mono_ns(), "fired": bool(fired)}
        if recovery is not None:
            rec["recovery"] = recovery
        faults.append(rec)
        quiet_phase = rng.random() < 0.25
        run.sleep_ms(rng.randint(*QUIET_MS) if quiet_phase else rng.randint(100, 800))
    t_end = fr.mono_ns()
    run.wait_workers()
    run.bounded_latency(3000 + 500 + 500 + 2000)
    run.min_acquisitions(int(seconds))
    counts = tally(faults, kinds_here)
    fired = sum(c["fired"] for c in counts.values())
    run.probe("at least one fault fired per 10 s", fired >= seconds / 10,
              "%d of %d fired" % (fired, len(faults)))
    acq = [e["t"] for x in run.workers for e in x.events()
           if e.get("f") == "acquire" and e.get("type") == "ok"]
    windows = [(f["begin"], f["end"]) + ((f["recovery"],) if "recovery" in f else ())
               for f in faults]
    total, longest, bad = liveness(acq, windows, t_begin, t_end, RECOVERY_MS * 1_000_000,
                                   LIVE_MS * 1_000_000)
    run.probe("an acquisition in every %d ms of quiet time (%d ms after each fault%s)"
              % (LIVE_MS, RECOVERY_MS, ", %d ms after a failover" % FO_RECOVERY_MS if fo
                 else ""), not bad,
              "%.1f s quiet, longest stretch without one %d ms%s" % (
                  total / 1e9, longest // 1_000_000, "; %d too long" % len(bad) if bad else ""))
    liveness_summary = {"recovery_ms": RECOVERY_MS, "bound_ms": LIVE_MS,
                        "quiet_s": round(total / 1e9, 1),
                        "longest_quiet_gap_ms": longest // 1_000_000, "too_long": len(bad)}
    run.summary = {"commit": rev, "loadavg": load, "faults": counts, "partitions": partitions,
                   "server_clock_rates": rates, "liveness": liveness_summary}
    if fo:
        liveness_summary["failover_recovery_ms"] = FO_RECOVERY_MS
        fw = [(f["end"] - f["begin"]) // 1_000_000 for f in faults
              if f["kind"] == "failover" and f["fired"]]
        switches = sentinel_log_count(run, "+switch-master")
        odown = sentinel_log_count(run, "+odown")
        run.probe("no uncoordinated failover (every master change is the schedule's)",
                  not uncoordinated and max(switches) == len(fw) and not any(odown),
                  "%d coordinated; +switch-master logged %s; +odown %s; unexpected %r" % (
                      len(fw), switches, odown, uncoordinated))
        run.probe("every coordinated failover went through its steps", not fo_errors,
                  "; ".join(fo_errors))
        run.summary["failover"] = {"fired": len(fw), "windows_ms": fw, "errors": fo_errors,
                                   "switch_master_logged": switches, "odown_logged": odown,
                                   "uncoordinated": len(uncoordinated),
                                   "final_master": "lock%d" % master}
    print("faults (fired/scheduled): " + ", ".join(
        "%s %d/%d" % (k, c["fired"], c["scheduled"]) for k, c in counts.items()))
    if fo:
        print("failover: %r" % run.summary["failover"])
