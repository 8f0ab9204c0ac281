"""faultrun's ZooKeeper, PostgreSQL and etcd scenarios (issue 24, item 1): the servers, their
setup and the scenarios Z.. (ZooKeeper), P.. (PostgreSQL) and E.. (etcd), registered in
faultrun's SCENARIOS through its `scenario` decorator by register(faultrun) (faultrun runs as
__main__, so this module does not import it).

The workload is faultrun's: 3 dlock_fault_workers in mode S on a zk://, postgresql:// or etcd://
URL
(`--kind` picks the lock kind), doing a read-modify-write of the append-only file resource
(`--resource file`, judged by RESOURCE like the Redis counter) under the lock; dlock_check
judges the merged histories. Modes:
  ZK  = one ZooKeeper server (standalone), InterProcessMutex (`lock`, the default kind), the
        token the node's czxid. No fixed lease: the session (2 s here) is the lease, so
        --ttl-ms is the session timeout and a holder's belief is the valid_until() it was
        granted (send time of the last answered request + session timeout - drift).
        Every worker reaches the server through its own fault-proxy route (the proxy passes
        ZooKeeper's bytes through untouched; they are not RESP), so one worker can be cut.
  ZKE = a 3-server ensemble (Z06), every server behind one route per worker.
        (Z07 gives each worker a session timeout of its own; in Z09 worker 1's URL names the
        two followers only, and it holds with --watchdog: it acts on the valid_until() its
        session's renewals push forward.)
  PGA = PostgreSQL advisory lock (`simple`: pg_advisory_lock on a session of its own, the
        token from the sequence dlock_fence), fixed lease = dlock_check = 1 s, so the granted
        valid_until is the reply time + 1 s.
  PGL = PostgreSQL lease row (`lease`: dlock's dlock_lease table, database-clock expiry,
        token from dlock_fence), fixed lease 1 s.
  PGS = ShedLock row (`shedlock`: database time, no token), fixed lease 1 s.
  PGV = versioned row (`versioned`: pglock's table, no clock in it, the version the token;
        a waiter takes a row over once its version stayed unchanged for a whole lease), 1 s.
  PGAW, PGLW, PGSW, PGVW = the same kinds held with the worker's --watchdog (faultrun's
        watchdog modes: no fixed lease; advisory locks stay proven by the session's checks,
        rows are extended every third of dlock_lease = 1 s; the checker's LOSS rule too). P05
        (cut off) and P07 (failover) run in them.
  ET  = one etcd member (3.4, heartbeat 50 ms, election timeout 500 ms), the Mutex recipe
        (`lock`), the token the key's create revision; as ZooKeeper, no fixed lease: the
        client's lease (TTL 2 s) is the lease, --ttl-ms its TTL; every worker through its own
        fault-proxy route (gRPC's bytes pass untouched).
  ETC = a 3-member etcd cluster (E04), every member behind one route per worker (E05
        partitions the leader, E06 a follower).
PostgreSQL connections are direct (the server's TCP keepalive must see a cut-off client
itself: a proxy in between would keep the server's side of the connection alive).
Every scenario here runs in the extended tier only (ctest label `extended`).

Everything is bounded: every wait has a deadline; servers are stopped by Run.close.
"""

import base64
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time

from server_process import ServerProcess

F = None  # the faultrun module, set by register()
_PENDING = []  # (sid, kwargs, body) until register()

ZK_SESSION_MS = 2000
# The ensemble's tickTime 200 ms x (syncLimit 10 + 1): how long a follower cut off from its
# leader may go on answering its clients, plus the leader's ping interval (the zk:// URL's
# server_lag, src/zookeeper/touches.hpp). Its sessions may last up to 20 x tickTime = 4 s.
ZK_ENSEMBLE_LAG_MS = 2200
ZK_ENSEMBLE_SESSION_MS = 4000
PG_TTL_MS = 1000
# dlock_keepalive idle:interval:count:user_timeout. The server frees a vanished client's
# session (and its advisory locks) within keepalive::server_bound() = 3 s; the holder's
# belief ends at most dlock_check (1 s) after its last proven check.
PG_KEEPALIVE = "1:1:2:3000"
PG_SERVER_BOUND_MS = 3000

ETCD_TTL_S = 2  # the client's lease (URL ttl=, whole seconds)

MODES = ["ZK", "ZKE", "PGA", "PGL", "PGS", "PGV", "ET", "ETC"]
PG_KIND = {"PGA": "simple", "PGL": "lease", "PGS": "shedlock", "PGV": "versioned"}
PG_MODES = ["PGA", "PGL", "PGS", "PGV"]
PG_WATCHDOG = [m + "W" for m in PG_MODES]  # faultrun.PG_WATCHDOG_MODES
ROWS = ["PGL", "PGS", "PGV"]


def row_free_ms(mode):
    """The longest a dead holder's row keeps the lock from the others: its lease (database
    clock: dlock_lease, shedlock); a versioned row is taken over once a waiter saw its
    version unchanged for a whole lease on its own clock (up to two leases), plus polling."""
    return (2 * PG_TTL_MS if mode == "PGV" else PG_TTL_MS) + 1000


def scenario(sid, title, checks, modes, **kw):
    def deco(fn):
        _PENDING.append((sid, dict(kw, title=title, checks=checks, modes=modes), fn))
        return fn
    return deco


def register(fr):
    """Registers the scenarios with faultrun's decorator: every mode extended."""
    global F
    F = fr
    for sid, kw, fn in _PENDING:
        modes = kw.pop("modes")
        fr.scenario(sid, kw.pop("title"), kw.pop("checks"), "", ext=list(modes), **kw)(fn)


def skip(why):
    raise F.Skipped(why)


# ---------------------------------------------------------------------------------------------
# ZooKeeper (as tests/support/zk_fixture.cpp: Debian's jars run by java, tickTime 200 ms so that
# sessions of 0.4-4 s are allowed; srvr for readiness)


def zk_java():
    j = os.environ.get("DLOCK_TEST_JAVA")
    if j:
        return j
    for c in ("/usr/bin/java", "/usr/lib/jvm/default-java/bin/java"):
        if os.access(c, os.X_OK):
            return c
    return None


def zk_jar():
    return os.environ.get("DLOCK_TEST_ZOOKEEPER_JAR") or "/usr/share/java/zookeeper.jar"


def zk_classpath():
    """ZooKeeper's jar, and Debian's slf4j binding when installed (its log lines then show)."""
    cp = zk_jar()
    if os.access("/usr/share/java/slf4j-simple.jar", os.R_OK):
        cp += ":/usr/share/java/slf4j-simple.jar"
    return cp


def four_letter(port, word, timeout=1.0):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            out = b""
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
            return out.decode(errors="replace")
    except OSError:
        return ""


class ZooKeeper(ServerProcess):
    """One ZooKeeper server (standalone, or member `myid` of an ensemble) on a free port."""

    def __init__(self, run, name, tick_ms=200, myid=0, port=None, quorum=None, uid=None):
        if not zk_java() or not os.access(zk_jar(), os.R_OK):
            skip("needs java and %s (Debian zookeeper)" % zk_jar())
        self.run, self.name, self.myid, self.uid = run, name, myid, uid
        self.port = port or F.free_port()
        self.dir = os.path.join(run.out, name)
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        if uid is not None:  # a uid of its own: nft tells its packets apart (Z08)
            os.chmod(run.out, 0o711)
            for d in (self.dir, os.path.join(self.dir, "data")):
                os.chown(d, uid, uid)
        lines = ["tickTime=%d" % tick_ms, "dataDir=%s" % os.path.join(self.dir, "data"),
                 "clientPortAddress=127.0.0.1", "clientPort=%d" % self.port,
                 "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
                 "maxClientCnxns=0"]
        if quorum:
            lines += ["initLimit=20", "syncLimit=10"] + quorum
            with open(os.path.join(self.dir, "data", "myid"), "w") as f:
                f.write("%d\n" % myid)
        with open(os.path.join(self.dir, "zoo.cfg"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = None

    def spawn(self):
        cp = zk_classpath()
        main = ("org.apache.zookeeper.server.quorum.QuorumPeerMain" if self.myid
                else "org.apache.zookeeper.server.ZooKeeperServerMain")
        with open(os.path.join(self.dir, "server.log"), "a") as log:
            self.proc = subprocess.Popen(
                [zk_java(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dznode.container.checkIntervalMs=1000", "-Dzookeeper.admin.enableServer=false",
                 "-cp", cp, main, os.path.join(self.dir, "zoo.cfg")],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                **({"user": self.uid, "group": self.uid, "extra_groups": []}
                   if self.uid is not None else {}))

    def start(self, budget=30.0):
        self.spawn()
        self.wait_ready(budget)

    def cli(self, *args, timeout=30):
        """ZooKeeper's own shell (ZooKeeperMain) runs one command against this server."""
        r = subprocess.run([zk_java(), "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", zk_classpath(),
                            "org.apache.zookeeper.ZooKeeperMain", "-server",
                            "127.0.0.1:%d" % self.port] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise F.HarnessError("zkCli %s: %s" % (" ".join(args), r.stdout[-300:]))
        return r.stdout

    def mode(self):
        """"leader", "follower", "standalone" or "" (not serving)."""
        for line in four_letter(self.port, "srvr").splitlines():
            if line.startswith("Mode: "):
                return line[6:].strip()
        return ""

    def wait_ready(self, budget=30.0, quorum=False):
        end = time.monotonic() + budget
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise F.HarnessError("%s exited at start; see %s/server.log" % (self.name,
                                                                                 self.dir))
            # `ruok` answers imok before the server serves requests; srvr names the mode
            # only once it does.
            if self.mode() in (("leader", "follower") if quorum else ("standalone",)):
                return
            time.sleep(0.05)
        raise F.HarnessError("%s not ready within %.0f s" % (self.name, budget))



ZK_UIDS = (61001, 61002, 61003)  # Z08: one uid per server (no name needed)


def zk_ensemble(run, own_uids=False):
    """3 servers (QuorumPeerMain), started together; ready when every one serves as leader
    or follower. `own_uids`: each server runs as a uid of its own (root only)."""
    # The quorum and election ports outside the ephemeral range: a member binds its quorum
    # port only when it becomes the leader, maybe after a client connection took it.
    ports = [(F.free_port(), F.free_listen_port(), F.free_listen_port()) for _ in range(3)]
    quorum = ["server.%d=127.0.0.1:%d:%d" % (i + 1, p[1], p[2]) for i, p in enumerate(ports)]
    servers = [ZooKeeper(run, "zk%d" % i, myid=i + 1, port=ports[i][0], quorum=quorum,
                         uid=ZK_UIDS[i] if own_uids else None)
               for i in range(3)]
    for s, p in zip(servers, ports):
        s.quorum_ports = p[1:]
    run.extra_servers += servers
    for s in servers:
        s.spawn()
    for s in servers:
        s.wait_ready(60, quorum=True)
    return servers


# Worker 1, cut off while it holds, lets every hold run to its deadline (no release): its
# belief then ends at the deadline the fault must beat, not at a release sent into the cut.
LET_EXPIRE = ["--expire-pct", "100"]


def zk_setup(run, ensemble=False, worker_extra_1=(), own_uids=False, followers_1=False, **kw):
    """ZooKeeper server(s), one proxy route per (worker, server), workers on a zk:// URL of
    their routes with the session timeout as their TTL. `followers_1`: worker 1's URL names
    the ensemble's followers only (its session is on a follower: Z09). An ensemble's URL
    carries its server_lag, (syncLimit + 1) x tickTime (ZK_ENSEMBLE_LAG_MS: dlock refuses an
    ensemble without one), and a session that outlasts 1.5 x it (ZK_ENSEMBLE_SESSION_MS); a
    standalone server's says nothing of a lag (the client reads that it has none)."""
    session_ms = ZK_ENSEMBLE_SESSION_MS if ensemble else ZK_SESSION_MS
    server_lag_ms = ZK_ENSEMBLE_LAG_MS if ensemble else 0
    if ensemble:
        servers = zk_ensemble(run, own_uids)
    else:
        servers = [ZooKeeper(run, "zk0")]
        run.extra_servers += servers
        servers[0].start()
    workers = kw.pop("workers", 3)
    routes = {"w%d-l%d" % (w, i): s.port for w in range(1, workers + 1)
              for i, s in enumerate(servers)}
    run.proxy = F.Proxy(run, routes, zk=True)
    leader = [s.mode() == "leader" for s in servers] if followers_1 else [False] * len(servers)
    if followers_1 and leader.count(True) != 1:
        raise F.HarnessError("no single leader in the ensemble: %s" % [s.mode() for s in servers])
    lag = "&server_lag=%d" % server_lag_ms if server_lag_ms else ""
    urls = {w: "zk://%s?session_timeout=%d&connect_timeout=1000%s" % (",".join(
        "127.0.0.1:%d" % run.proxy.ports["w%d-l%d" % (w, i)] for i in range(len(servers))
        if not (w == 1 and leader[i])), session_ms, lag) for w in range(1, workers + 1)}
    kw.setdefault("hold_ms", 300)
    kw.setdefault("duration_ms", 8000)
    run.setup(workers=workers, ttl_ms=session_ms, resource="file", lock_url=urls,
              worker_extra={w: ["--kind", "lock"] + (list(worker_extra_1) if w == 1 else [])
                            for w in range(1, workers + 1)}, **kw)
    return servers


# ---------------------------------------------------------------------------------------------
# PostgreSQL (as tests/support/pg_fixture.cpp: initdb + the postmaster as a child, as the
# `postgres` user when root; no durability; a socket in its own directory for psql)


def pg_bin(name):
    d = os.environ.get("DLOCK_TEST_PG_BIN") or "/usr/lib/postgresql/15/bin"
    p = os.path.join(d, name)
    return p if os.access(p, os.X_OK) else shutil.which(name)


class Postgres(ServerProcess):
    # No durability (the tests' servers): every scenario but P07, whose primary commits only
    # once its synchronous standby has the commit (`settings` override these).
    SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                "max_connections": "200"}

    def __init__(self, run, name, listen="127.0.0.1", initdb=True, settings=None):
        for b in ("initdb", "postgres", "psql"):
            if not pg_bin(b):
                skip("needs PostgreSQL's %s" % b)
        self.run, self.name, self.listen = run, name, listen
        self.settings = dict(self.SETTINGS, listen_addresses=listen, **(settings or {}))
        self.ids = None
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                skip("running as root and there is no `postgres` user")
            self.ids = (pw.pw_uid, pw.pw_gid)
            os.chmod(run.out, 0o711)  # the server user reaches its directory
        self.dir = os.path.join(run.out, name)
        os.makedirs(self.dir, exist_ok=True)
        if self.ids:
            os.chown(self.dir, *self.ids)
        self.port = F.free_port()
        self.proc = None
        if not initdb:  # a standby: its data directory comes from pg_basebackup
            return
        p = subprocess.run([pg_bin("initdb"), "-D", os.path.join(self.dir, "data"), "-U",
                            "postgres", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
                            "--no-instructions", "--auth=trust"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                           **self.as_server())
        if p.returncode != 0:
            raise F.HarnessError("initdb failed: %s" % p.stdout.decode(errors="replace")[-500:])

    def as_server(self):
        if not self.ids:
            return {}
        return {"user": self.ids[0], "group": self.ids[1], "extra_groups": []}

    def start(self, budget=30.0):
        args = [pg_bin("postgres"), "-D", os.path.join(self.dir, "data"), "-p", str(self.port),
                "-k", self.dir]
        for k, v in self.settings.items():
            args += ["-c", "%s=%s" % (k, v)]
        with open(os.path.join(self.dir, "server.log"), "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, **self.as_server())
        end = time.monotonic() + budget
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise F.HarnessError("%s exited at start; see %s/server.log" % (self.name,
                                                                                 self.dir))
            try:
                if self.psql("SELECT 1", timeout=2) == "1":
                    return
            except F.HarnessError:
                pass
            time.sleep(0.02)
        raise F.HarnessError("%s not ready within %.0f s" % (self.name, budget))

    def psql(self, sql, timeout=10):
        p = subprocess.run([pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d",
                            "postgres", "-c", sql], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        if p.returncode != 0:
            raise F.HarnessError("psql %r: %s" % (sql, p.stderr.decode(errors="replace")[-300:]))
        return p.stdout.decode().strip()

    def url(self, host="127.0.0.1"):
        # dlock_lease: the rows' watchdog lease in the watchdog modes (a fixed lease wins).
        return ("postgresql://postgres@%s:%d/postgres?dlock_check=%d&dlock_timeout=1000"
                "&dlock_connect_timeout=1000&dlock_keepalive=%s&dlock_lease=%d"
                % (host, self.port, PG_TTL_MS, PG_KEEPALIVE, PG_TTL_MS))

    def stop(self, budget=10.0):
        """Fast shutdown (SIGINT: every session ended, a clean checkpoint), then kill -9."""
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def pg_setup(run, listen="127.0.0.1", urls=None, worker_extra_1=(), **kw):
    pg = Postgres(run, "pg0", listen=listen)
    run.extra_servers.append(pg)
    pg.start()
    kw.setdefault("hold_ms", 300)
    kw.setdefault("duration_ms", 6000)
    workers = kw.pop("workers", 3)
    run.setup(workers=workers, ttl_ms=PG_TTL_MS, resource="file",
              lock_url=urls or {w: pg.url() for w in range(1, workers + 1)},
              worker_extra={w: ["--kind", PG_KIND[run.mode]] + (list(worker_extra_1)
                                                                 if w == 1 else [])
                            for w in range(1, workers + 1)}, **kw)
    return pg


# ---------------------------------------------------------------------------------------------
# history helpers


def acquisitions(run, workers=None, after=0, before=None):
    """Every acquire ok (worker, event), optionally of some workers within [after, before]."""
    out = []
    for w in run.workers:
        if workers and w.id not in workers:
            continue
        for e in w.events():
            if e.get("f") == "acquire" and e.get("type") == "ok" and e["t"] >= after and \
                    (before is None or e["t"] <= before):
                out.append((w, e))
    return sorted(out, key=lambda we: we[1]["t"])


def holding(run, t_from):
    """A worker that holds now: its acquire ok after t_from, no release invoked since, its
    granted deadline more than 100 ms away (so a fault applied now lands inside the hold)."""
    now = F.mono_ns()
    for w, e in acquisitions(run, after=t_from):
        later = [x for x in w.events() if x["t"] > e["t"] and x.get("f") == "release"]
        if not later and e["deadline"] > now + 100_000_000:
            return (w, e)
    return None


def victim_hold(run, w, t_fault):
    """The acquire ok of worker w in force at t_fault (the last one before it)."""
    oks = [e for x, e in acquisitions(run, workers=[w.id]) if e["t"] <= t_fault]
    return oks[-1] if oks else None


def probe_count(run, name, items, least=1):
    run.probe(name, len(items) >= least, "%d" % len(items))


def probe_no_write_after(run, w, hold, renewed=False):
    """The faulted hold's critical section did not write after its granted deadline (the
    checker judges this too; said here with the numbers). `renewed`: a --watchdog hold, whose
    uses (every op up to its release) each count against the latest deadline it saw renewed
    before the write (its extend ok events)."""
    if renewed:
        end = min([e["op"] for e in w.events() if e.get("f") == "release" and
                   e["op"] > hold["op"]] or [1 << 62])
        seen = [e for e in w.events() if e.get("f") == "extend" and e.get("type") == "ok" and
                hold["op"] < e["op"] < end]
        late = [e for e in w.events() if e.get("f") == "use" and e["type"] == "ok" and
                hold["op"] < e["op"] < end and e["t"] > max(
                    [hold["deadline"]] + [x["deadline"] for x in seen if x["t"] <= e["t"]])]
        run.probe("the faulted holder wrote nothing after its deadline", not late,
                  "%d late writes (%d renewals seen)" % (len(late), len(seen)))
        return
    late = [e for e in w.events() if e.get("f") == "use" and e["type"] == "ok" and
            e["op"] == hold["op"] + 1 and e["t"] > hold["deadline"]]
    run.probe("the faulted holder wrote nothing after its deadline", not late,
              "%d late writes" % len(late))


def probe_first_grant_after(run, w, hold, t_fault, least_ms=None, most_ms=None, killed=False):
    """The first grant to another worker after the fault: after the victim's belief ended (its
    deadline; a killed holder's at the kill; MUTEX says it too), and when bounds are given
    within [least_ms, most_ms] of the fault."""
    others = [x for x in run.workers if x is not w]
    nxt = acquisitions(run, workers=[x.id for x in others], after=t_fault)
    if not nxt:
        run.probe("another worker acquired after the fault", False, "none")
        return None
    t = nxt[0][1]["t"]
    # The belief ends at the deadline, the release's invocation or the kill (the checker's
    # hold window).
    ends = [(hold["deadline"], "deadline")] + [(t_fault, "kill")] * killed + [
        (e["t"], "release") for e in w.events() if e.get("f") == "release" and
        e["type"] == "invoke" and e["t"] > hold["t"]][:1]
    end, what = min(ends)
    gap = (t - end) / 1e6
    run.probe("the faulted holder's belief ended before the next grant", gap > 0,
              "next grant %.1f ms after its %s" % (gap, what))
    after = (t - t_fault) / 1e6
    if least_ms is not None:
        run.probe("the next grant came at least %d ms after the fault" % least_ms,
                  after >= least_ms, "%.0f ms" % after)
    if most_ms is not None:
        run.probe("the next grant came within %d ms of the fault" % most_ms, after <= most_ms,
                  "%.0f ms" % after)
    return t


def own_netns(run, who):
    """The run's own network namespace, entered. Root only: each server (`who`) runs as a uid
    of its own, which nft tells apart (Z08, Z09, E05, E06)."""
    if os.geteuid() != 0:
        skip("needs root: each %s runs as a uid of its own" % who)
    run.netns = F.Netns(run)
    run.netns.enter()


def cut_off(run, server, ports, their_ports):
    """nft: drop every packet to and from `server`'s `ports` and every packet its uid sends to
    the others' `their_ports` (its quorum or peer traffic), so it is partitioned from them."""
    own = "{ %s }" % ", ".join(str(p) for p in ports)
    theirs = "{ %s }" % ", ".join(str(p) for p in their_ports)
    run.netns.rules("tcp dport %s" % own, "tcp sport %s" % own,
                    "meta skuid %d tcp dport %s" % (server.uid, theirs))


def start_with_victim_holding(run):
    """Worker 1 starts alone and the others follow once it holds (its first acquisition meets
    a free lock); returns worker 1's hold. The fault is applied by the caller at once."""
    t = F.mono_ns()
    got = {}

    def arm(_w1):
        got["hold"] = run.wait_for(lambda: holding(run, t), 20, "worker 1 holding")[1]
    run.start_workers(arm=arm, others_after_ms=0)
    return run.workers[0], got["hold"]


def stop_in_hold(run, w, hold):
    """SIGSTOPs worker w, asserting it still held when stopped (its granted deadline lies
    ahead, no release invoked)."""
    os.kill(w.pid(), signal.SIGSTOP)
    t = F.mono_ns()
    run.nemesis("sigstop", "w%d" % w.id, "holding, deadline in %.0f ms"
                % ((hold["deadline"] - t) / 1e6))
    released = [e for e in w.events() if e.get("f") == "release" and e["t"] > hold["t"]]
    run.probe("worker %d was stopped while holding" % w.id,
              not released and hold["deadline"] > t, "")
    return t


def cont(run, w):
    os.kill(w.pid(), signal.SIGCONT)
    run.nemesis("sigcont", "w%d" % w.id)
    return F.mono_ns()


# ---------------------------------------------------------------------------------------------
# ZooKeeper scenarios


ZK_SAFE = "SAFE, LIVE(session timeout)"
# With a server_lag (every ensemble row: Z06, Z08, Z09) a session's validity counts from a
# request sent at least the lag before the latest answer, usually before the acquisition
# began: DEADLINE's
# START_BEFORE_INVOKE (a grant's validity counted from a request of the acquisition itself)
# then reports the earlier, never later, deadline; reported, not asserted, as on etcd.
ZK_LAG_DEADLINE = {"DEADLINE": "any"}


@scenario("Z01", "ZooKeeper: the holder killed (kill -9) while holding",
          "no overlap; the dead session's node goes at its expiry, then the others acquire",
          ["ZK"], outcome={"ZK": ZK_SAFE})
def z01(run):
    zk_setup(run)
    w, hold = start_with_victim_holding(run)
    w.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", "w%d" % w.id)
    run.wait_workers()
    # The node lives until the server expires the session: at least about the session
    # timeout (the server's expiry is rounded to ticks), at most it plus a few ticks.
    probe_first_grant_after(run, w, hold, t, least_ms=ZK_SESSION_MS // 2,
                            most_ms=ZK_SESSION_MS + 1500, killed=True)
    probe_count(run, "acquisitions after the kill", acquisitions(run, after=t), 3)


@scenario("Z02", "ZooKeeper: the holder paused (SIGSTOP) past its session timeout, then resumed",
          "the server expires the session and frees the lock; the paused holder's belief ended "
          "at its deadline and it does not write; its client makes a new session and acquires "
          "again", ["ZK"], outcome={"ZK": ZK_SAFE})
def z02(run):
    zk_setup(run, duration_ms=9000)
    w, hold = start_with_victim_holding(run)
    t = stop_in_hold(run, w, hold)
    # Paused until another worker holds: the server expired the session (an observable
    # event), which takes at least the session timeout.
    run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t), 3 * ZK_SESSION_MS / 1000
                 + 5, "another worker's grant while worker 1 is stopped")
    t1 = cont(run, w)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_first_grant_after(run, w, hold, t, least_ms=ZK_SESSION_MS // 2)
    probe_count(run, "worker 1 acquired again after SIGCONT (a new session)",
                acquisitions(run, workers=[1], after=t1))
    probe_count(run, "acquisitions after the pause", acquisitions(run, after=t1), 3)


@scenario("Z03", "ZooKeeper: session expiry while holding: the holder's connection blackholed "
          "(proxy) until the server expired its session and another worker acquired",
          "the holder stops at its deadline (it hears nothing: loss at valid_until), the server "
          "expires the session and frees the lock; after the heal the holder's client makes a "
          "new session", ["ZK"], outcome={"ZK": ZK_SAFE})
def z03(run):
    zk_setup(run, duration_ms=9000, worker_extra_1=LET_EXPIRE)
    w, hold = start_with_victim_holding(run)
    run.proxy.ctl("rule w1-l0 blackhole")
    t = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t), 3 * ZK_SESSION_MS / 1000
                 + 5, "another worker's grant while worker 1 is cut off")
    run.proxy.ctl("clear w1-l0")
    t1 = F.mono_ns()
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_first_grant_after(run, w, hold, t, least_ms=ZK_SESSION_MS // 2)
    probe_count(run, "worker 1 acquired again after the heal (a new session)",
                acquisitions(run, workers=[1], after=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)
    run.bounded_latency(3000 + 2 * ZK_SESSION_MS + 1000)


@scenario("Z04", "ZooKeeper: the server killed (kill -9) while a worker holds, restarted at once "
          "(same data directory)",
          "sessions and their nodes survive a restart (snapshot + transaction log); a holder "
          "whose deadline passed while the server was down has lost; locking goes on",
          ["ZK"], outcome={"ZK": ZK_SAFE})
def z04(run):
    zk = zk_setup(run, duration_ms=12000)[0]
    w, hold = start_with_victim_holding(run)
    zk.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", zk.name, "holder w%d" % w.id)
    zk.start()
    t1 = F.mono_ns()
    run.nemesis("restart", zk.name, "ready after %.0f ms" % ((t1 - t) / 1e6))
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions after the restart", acquisitions(run, after=t1), 3)


@scenario("Z05", "ZooKeeper: the holder cut off (nft drop both ways on its route, in the run's "
          "own network namespace) until the server expired its session and another acquired",
          "as Z03 at the TCP level: the holder stops at its deadline, the server frees the "
          "lock at the session's expiry; after the heal the holder acquires again",
          ["ZK"], outcome={"ZK": ZK_SAFE})
def z05(run):
    run.netns = F.Netns(run)
    run.netns.enter()
    zk_setup(run, duration_ms=10000, worker_extra_1=LET_EXPIRE)
    w, hold = start_with_victim_holding(run)
    p = run.proxy.ports["w1-l0"]
    run.netns.rules("tcp dport %d" % p, "tcp sport %d" % p)
    t = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t), 3 * ZK_SESSION_MS / 1000
                 + 5, "another worker's grant while worker 1 is cut off")
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_first_grant_after(run, w, hold, t, least_ms=ZK_SESSION_MS // 2)
    probe_count(run, "worker 1 acquired again after the heal",
                acquisitions(run, workers=[1], after=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


@scenario("Z06", "ZooKeeper ensemble (3 servers): the leader killed (kill -9) while a worker "
          "holds, restarted after the new leader is elected",
          "the held node survives the election (a quorum keeps it); sessions move to another "
          "server; no overlap, locking goes on", ["ZKE"], outcome={"ZKE": ZK_SAFE},
          expect={"ZKE": ZK_LAG_DEADLINE}, timeout=150)
def z06(run):
    servers = zk_setup(run, ensemble=True, duration_ms=14000, wait_ms=4000)
    w, hold = start_with_victim_holding(run)
    leader = next((s for s in servers if s.mode() == "leader"), None)
    if leader is None:
        raise F.HarnessError("no leader in the ensemble")
    leader.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", leader.name, "leader; holder w%d" % w.id)
    new = run.wait_for(lambda: next((s for s in servers if s is not leader and
                                     s.mode() == "leader"), None), 30, "a new leader")
    run.nemesis("elected", new.name, "after %.0f ms" % ((F.mono_ns() - t) / 1e6))
    leader.spawn()
    leader.wait_ready(60, quorum=True)
    t1 = F.mono_ns()
    run.nemesis("restart", leader.name, "back as %s" % leader.mode())
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions after the old leader rejoined", acquisitions(run, after=t1),
                3)


@scenario("Z08", "ZooKeeper ensemble (3 servers): the leader partitioned from the other two "
          "(nft, in the run's own network namespace: its quorum and election ports, and every "
          "packet its uid sends to theirs) until they elected a new leader and a worker "
          "acquired, then healed",
          "a minority leader stops serving; the majority elects a leader and locking goes on; "
          "sessions move or expire, a holder stops at its deadline; no overlap", ["ZKE"],
          outcome={"ZKE": ZK_SAFE}, expect={"ZKE": ZK_LAG_DEADLINE}, timeout=150)
def z08(run):
    own_netns(run, "server")
    servers = zk_setup(run, ensemble=True, own_uids=True, duration_ms=16000, wait_ms=4000)
    w, hold = start_with_victim_holding(run)
    leader = next((s for s in servers if s.mode() == "leader"), None)
    if leader is None:
        raise F.HarnessError("no leader in the ensemble")
    others = [s for s in servers if s is not leader]
    cut_off(run, leader, leader.quorum_ports, [p for s in others for p in s.quorum_ports])
    t = F.mono_ns()
    new = run.wait_for(lambda: next((s for s in others if s.mode() == "leader"), None), 30,
                       "a new leader among the majority")
    run.nemesis("elected", new.name, "after %.0f ms" % ((F.mono_ns() - t) / 1e6))
    t_new = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, after=t_new), 15,
                 "an acquisition under the new leader")
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.probe("the isolated leader stopped leading", leader.mode() != "leader", leader.mode())
    run.wait_for(lambda: leader.mode() == "follower", 30, "the old leader back as a follower")
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions during the partition", acquisitions(run, after=t, before=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


def zk_route_of(run, servers, w):
    """The server worker w's session is connected to: the one whose proxy route from w has a
    live connection (the C client keeps one); None while that is not exactly one."""
    live = [s for i, s in enumerate(servers) if int(run.proxy.ctl(
        "stats w%d-l%d" % (w, i)).split("sessions=")[1].split()[0]) > 0]
    return live[0] if len(live) == 1 else None


@scenario("Z09", "ZooKeeper ensemble (3 servers): the follower the holder's session is "
          "connected to (worker 1's URL names the two followers only) partitioned from the "
          "other two (nft, in the run's own network namespace: its quorum and election ports, "
          "and every packet its uid sends to theirs) while worker 1 holds through its "
          "session's renewals (--watchdog), until it dropped out of the quorum and a worker "
          "acquired, then healed",
          "the leader keeps its quorum and locking goes on; the isolated follower stops serving "
          "and closes its clients' connections: their sessions move to the majority or expire, "
          "a holder's belief ends at its valid_until() or at the loss signal; no overlap",
          ["ZKE"], outcome={"ZKE": ZK_SAFE}, expect={"ZKE": ZK_LAG_DEADLINE}, timeout=150)
def z09(run):
    own_netns(run, "server")
    # Worker 1 holds through its session's renewals (--watchdog: it reads valid_until() before
    # each of 16 uses, about 4 s, and logs every renewal it sees), so that its hold outlasts
    # the follower's drop-out (about syncLimit x tickTime = 2 s) and what its client tells it
    # then is judged.
    # The URL's server_lag is the ensemble's (ZK_ENSEMBLE_LAG_MS): the lease leaves out what a
    # cut-off follower may still answer (without it every run overlapped, 139-177 ms).
    servers = zk_setup(run, ensemble=True, own_uids=True, followers_1=True, duration_ms=16000,
                       wait_ms=4000, worker_extra_1=["--watchdog", "--uses", "16"])
    w, hold = start_with_victim_holding(run)
    leader = next((s for s in servers if s.mode() == "leader"), None)
    if leader is None:
        raise F.HarnessError("no leader in the ensemble")
    follower = run.wait_for(lambda: zk_route_of(run, servers, w.id), 5,
                            "the server worker 1's session is connected to")
    if follower is leader:
        raise F.HarnessError("worker 1's session is on the leader (its URL names the followers)")
    others = [s for s in servers if s is not follower]
    cut_off(run, follower, follower.quorum_ports, [p for s in others for p in s.quorum_ports])
    t = F.mono_ns()
    run.nemesis("partitioned", follower.name, "follower of %s; holder w%d's server, deadline in "
                "%.0f ms" % (leader.name, w.id, (hold["deadline"] - t) / 1e6))
    run.wait_for(lambda: follower.mode() not in ("leader", "follower"), 30,
                 "the isolated follower out of the quorum")
    t_out = F.mono_ns()
    run.nemesis("out-of-quorum", follower.name, "not serving after %.0f ms" % ((t_out - t) / 1e6))
    run.wait_for(lambda: acquisitions(run, after=t_out), 15,
                 "an acquisition after the follower dropped out")
    kept, out = leader.mode() == "leader", follower.mode()
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.probe("the isolated follower stopped serving (until the heal)",
              out not in ("leader", "follower"), "out after %.0f ms; %s at the heal" % (
                  (t_out - t) / 1e6, out or "not serving"))
    run.probe("the leader kept leading", kept, leader.mode())
    run.wait_for(lambda: follower.mode() == "follower", 30, "the follower back in the quorum")
    run.wait_workers()
    probe_no_write_after(run, w, hold, renewed=True)
    probe_count(run, "acquisitions during the partition", acquisitions(run, after=t, before=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


def zk_node_count(zk):
    for line in four_letter(zk.port, "srvr").splitlines():
        if line.startswith("Node count: "):
            return int(line[12:])
    return -1


@scenario("Z07", "ZooKeeper: the waiter in the middle of the queue killed (kill -9) while the "
          "holder holds; its node expires (1 s session) before the holder releases",
          "no queue jumping: the last waiter, whose predecessor's node went, reads the queue "
          "again and keeps waiting behind the holder (Curator's rule); MUTEX judges it",
          ["ZK"], outcome={"ZK": "SAFE (no queue jumping)"})
def z07(run):
    zk = ZooKeeper(run, "zk0")
    run.extra_servers.append(zk)
    zk.start()
    run.proxy = F.Proxy(run, {"w%d-l0" % w: zk.port for w in (1, 2, 3)}, zk=True)

    def url(w, session_ms):
        return "zk://127.0.0.1:%d?session_timeout=%d&connect_timeout=1000" % (
            run.proxy.ports["w%d-l0" % w], session_ms)
    # Worker 1 holds 1.6-3.2 s (session 4 s); worker 2, killed while it waits, has a 1 s
    # session, so its node goes while worker 1 still holds; worker 3 waits behind worker 2.
    run.setup(workers=3, ttl_ms=ZK_SESSION_MS, resource="file", hold_ms=300,
              duration_ms=9000, wait_ms=6000,
              lock_url={1: url(1, 4000), 2: url(2, 1000), 3: url(3, ZK_SESSION_MS)},
              worker_extra={1: ["--kind", "lock", "--ttl-ms", "4000", "--hold-ms", "3200"],
                            2: ["--kind", "lock", "--ttl-ms", "1000"],
                            3: ["--kind", "lock"]})
    w1, w2, w3 = run.workers
    t = F.mono_ns()
    w1.start()
    hold = run.wait_for(lambda: holding(run, t), 20, "worker 1 holding")[1]
    for w in (w2, w3):  # each queued (its node made) before the next starts
        n = zk_node_count(zk)
        w.start()
        run.wait_for(lambda: zk_node_count(zk) > n, 10, "worker %d's node" % w.id)
    w2.kill9()
    t_kill = F.mono_ns()
    run.nemesis("kill-9", "w2", "waiting behind w1, ahead of w3")
    run.wait_for(lambda: zk_node_count(zk) < n + 1, 10, "worker 2's node gone")
    t_gone = F.mono_ns()
    run.nemesis("node-gone", "w2", "session expired")
    released = [e for e in w1.events() if e.get("f") == "release" and e["t"] > hold["t"]]
    run.probe("worker 2's node went while worker 1 still held", not released,
              "released first" if released else "%.0f ms after the kill" % ((t_gone - t_kill)
                                                                          / 1e6))
    run.wait_workers()
    first3 = acquisitions(run, workers=[3])
    end1 = min([hold["deadline"]] + [e["t"] for e in w1.events() if e.get("f") == "release"
                                      and e["type"] == "invoke" and e["t"] > hold["t"]])
    run.probe("worker 3 was granted only after worker 1's hold ended",
              first3 and first3[0][1]["t"] > end1,
              "%.0f ms after" % ((first3[0][1]["t"] - end1) / 1e6) if first3 else "no grant")
    probe_count(run, "acquisitions after the kill", acquisitions(run, after=t_kill), 3)


@scenario("Z10", "ZooKeeper: the answer to worker 1's create of its lock node lost 3 times under "
          "contention (the fault proxy forwards the CREATE2 of a `-lock-` node and discards "
          "every reply of that connection, so the node is made and the client, hearing "
          "nothing, drops the connection at 2/3 of its session timeout and reconnects)",
          "protected mode: the client reconnects within its session, finds its node by its "
          "_c_<uuid> prefix and adopts it; each faulted acquisition ends with the lock and no "
          "node is left behind (an orphan would stall the queue: every worker acquires after "
          "the faults); no overlap", ["ZK"], outcome={"ZK": "SAFE, LIVE (at once)"})
def z10(run):
    servers = zk_setup(run, duration_ms=9000, wait_ms=6000)
    # The lock's directory made beforehand as a persistent node: a container parent can be
    # missing (not made yet, or reaped while empty), and a create answered "no parent" makes
    # no node, so its lost answer would show the retry, not the adoption.
    out = servers[0].cli("create", "/" + run.lock)
    run.probe("the lock's directory was made persistent", "Created /" in out, "")
    t = F.mono_ns()
    run.start_workers(arm=lambda _w1: run.proxy.ctl(
        "rule w1-l0 drop cmd CREATE2 arg -lock- count 3"))
    # A reset instead of drop can close the server's side before it reads the create: the
    # node is then never made, and the run shows only the retry, not the adoption.
    run.wait_for(lambda: run.proxy.triggered("w1-l0") >= 3, 20, "3 lost create answers")
    t_last = F.mono_ns()
    run.wait_workers()
    run.probe("worker 1's create answer was lost 3 times", run.proxy.triggered("w1-l0") == 3,
              "%d" % run.proxy.triggered("w1-l0"))
    drops = [e["t"] for e in F.read_jsonl(run.proxy.log) if e.get("nemesis") == "proxy-drop"]
    w1 = run.workers[0]
    acq = [e for e in w1.events() if e.get("f") == "acquire"]
    # The acquisition each lost answer belonged to: worker 1's last acquire invoked before it.
    hit = [max((e for e in acq if e["type"] == "invoke" and e["t"] <= d), key=lambda e: e["t"],
               default=None) for d in drops]
    ops = sorted({e["op"] for e in hit if e})
    ends = {e["op"]: e["type"] for e in acq if e["type"] != "invoke" and e["op"] in ops}
    # Adopted, each faulted acquisition makes one node: a second create (the node not found)
    # would meet the rule again, and the 3 losses would fall in fewer acquisitions.
    run.probe("worker 1's 3 lost answers fell in 3 acquisitions, each ended with the lock",
              len(drops) == 3 and len(ops) == 3 and all(ends.get(o) == "ok" for o in ops),
              "ops %s: %s" % (ops, [ends.get(o) for o in ops]))
    for w in run.workers:
        probe_count(run, "worker %d's acquisitions after the last fault" % w.id,
                    acquisitions(run, workers=[w.id], after=t_last), 2)


# ---------------------------------------------------------------------------------------------
# PostgreSQL scenarios


@scenario("P01", "PostgreSQL: the holder killed (kill -9) while holding",
          "no overlap; advisory: the server ends the session (EOF) and frees the lock at once; "
          "rows: free when the lease runs out (versioned: once a waiter saw the version "
          "unchanged for a lease)", PG_MODES,
          outcome={"PGA": "SAFE, LIVE (at once)", "PGL": "SAFE, LIVE(TTL)",
                   "PGS": "SAFE, LIVE(TTL)", "PGV": "SAFE, LIVE(2 TTL)"})
def p01(run):
    pg_setup(run)
    w, hold = start_with_victim_holding(run)
    w.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", "w%d" % w.id)
    run.wait_workers()
    if run.mode == "PGA":
        probe_first_grant_after(run, w, hold, t, most_ms=500, killed=True)
    else:
        probe_first_grant_after(run, w, hold, t, most_ms=row_free_ms(run.mode), killed=True)
    probe_count(run, "acquisitions after the kill", acquisitions(run, after=t), 3)


@scenario("P02", "PostgreSQL: the holder paused (SIGSTOP) for 2.5 x TTL while holding",
          "advisory: the paused holder's session keeps the lock (nobody else is granted until "
          "it resumes, ends its lease and closes the session); lease row: the row expires and "
          "another worker takes it; either way the paused holder writes nothing after its "
          "deadline", PG_MODES,
          outcome={"PGA": "SAFE; no grant during the pause (the session holds the lock)",
                   "PGL": "SAFE, LIVE(TTL)", "PGS": "SAFE, LIVE(TTL)",
                   "PGV": "SAFE, LIVE(2 TTL)"})
def p02(run):
    pg_setup(run, duration_ms=8000)
    w, hold = start_with_victim_holding(run)
    t = stop_in_hold(run, w, hold)
    if run.mode in ROWS:
        run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t), 2.5 * PG_TTL_MS / 1000
                     + 5, "another worker's grant while worker 1 is stopped")
    run.sleep_ms(max(0, 2.5 * PG_TTL_MS - (F.mono_ns() - t) / 1e6))  # the pause itself
    t1 = cont(run, w)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    during = acquisitions(run, workers=[2, 3], after=t, before=t1)
    if run.mode == "PGA":
        run.probe("no grant while the paused holder's session held the lock", not during,
                  "%d grants" % len(during))
    else:
        probe_count(run, "grants to others during the pause", during)
        probe_first_grant_after(run, w, hold, t)
    probe_count(run, "acquisitions after the pause", acquisitions(run, after=t1), 3)


def pg_waiter_queued(pg):
    return pg.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") \
        not in ("", "0")


@scenario("P03", "PostgreSQL: pg_terminate_backend of the holder's session (advisory: while "
          "another worker waits in the server's queue; lease row: every worker session)",
          "advisory: the lock goes with the session and the waiter is granted at once; the "
          "holder reads the FATAL and marks its lease lost (valid_until in the past) within "
          "milliseconds, so it does not write: the resource stays consistent, and the belief "
          "window the history shows (until its release) overlaps the next one (MUTEX reported, "
          "not asserted: the history has no loss event); lease row: the row outlives the "
          "session, SAFE", PG_MODES,
          expect={"PGA": {"MUTEX": "any"}},
          outcome={"PGA": "no stale write; beliefs overlap until the holder reads the FATAL "
                   "(the advisory overlap window)", "PGL": "SAFE, LIVE", "PGS": "SAFE, LIVE",
                   "PGV": "SAFE, LIVE"})
def p03(run):
    # Worker 1 holds longer (400-800 ms, within its 1 s lease) so that a waiter is queued
    # behind it before its release.
    pg = pg_setup(run, worker_extra_1=["--hold-ms", "800"])
    w, hold = start_with_victim_holding(run)
    if run.mode == "PGA":
        run.wait_for(lambda: pg_waiter_queued(pg), 5, "a waiter queued behind worker 1")
        n = pg.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND granted")
    else:
        n = pg.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name LIKE 'dlock%' OR (backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid())")
    t = F.mono_ns()
    run.nemesis("pg_terminate_backend", pg.name, "%s sessions, holder w%d" % (n, w.id))
    run.probe("the holder's session was terminated", n not in ("", "0"), "%s sessions" % n)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    if run.mode == "PGA":
        # Told at once: the section that was running did not write (valid_until moved into
        # the past when the FATAL arrived), and its release was not a clean ok.
        use = [e for e in w.events() if e.get("f") == "use" and e["type"] != "invoke" and
               hold["t"] < e["t"] and e["op"] == hold["op"] + 1]
        run.probe("the terminated holder did not write", use and use[0]["type"] != "ok",
                  use[0].get("err", use[0]["type"]) if use else "no use event")
        nxt = acquisitions(run, workers=[2, 3], after=t)
        run.probe("the waiter was granted within 500 ms", nxt and nxt[0][1]["t"] - t < 5e8,
                  "%.0f ms" % ((nxt[0][1]["t"] - t) / 1e6) if nxt else "no grant")
    else:
        probe_first_grant_after(run, w, hold, t)
    probe_count(run, "acquisitions after the termination", acquisitions(run, after=t), 3)


@scenario("P04", "PostgreSQL: the server stopped (fast shutdown) while a worker holds, started "
          "again once the holder's deadline passed",
          "advisory: every lock goes with its session, holders are told by the socket; lease "
          "row: rows survive the restart; no overlap, locking goes on", PG_MODES,
          outcome={m: "SAFE, LIVE" for m in PG_MODES})
def p04(run):
    pg = pg_setup(run, duration_ms=8000)
    w, hold = start_with_victim_holding(run)
    pg.stop()
    t = F.mono_ns()
    run.nemesis("stop", pg.name, "fast shutdown, holder w%d" % w.id)
    # Down until the holder's granted deadline passed (a restart before it could hand the
    # lock to a second believer: the advisory overlap window).
    run.sleep_ms(max(0, (hold["deadline"] - F.mono_ns()) / 1e6 + 50))
    pg.start()
    t1 = F.mono_ns()
    run.nemesis("restart", pg.name, "after %.0f ms" % ((t1 - t) / 1e6))
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions after the restart", acquisitions(run, after=t1), 3)


@scenario("P05", "PostgreSQL: the holder cut off (nft drop both ways between it and the server, "
          "in the run's own network namespace) for the server's keepalive bound + 2 s",
          "advisory: the holder's checks go unanswered and its belief ends at most dlock_check "
          "(1 s) after the last proven one; the server ends the session at its keepalive "
          "bound (dlock_keepalive=1:1:2:3000: 3 s) and grants the next waiter, after that "
          "deadline; rows: the row expires after its lease (versioned: is taken over); with "
          "the watchdog (PG*W) the holder's renewals fail and its loss is signalled by its last "
          "proven deadline", PG_MODES + PG_WATCHDOG,
          outcome=dict({"PGA": "SAFE (belief ended before the server freed the lock), "
                        "LIVE(keepalive bound)", "PGL": "SAFE, LIVE(TTL)",
                        "PGS": "SAFE, LIVE(TTL)", "PGV": "SAFE, LIVE(2 TTL)"},
                       **{m: "SAFE, LOSS signalled, LIVE as " + m[:-1] for m in PG_WATCHDOG}))
def p05(run):
    run.netns = F.Netns(run)
    run.netns.enter()
    # Worker 1 alone reaches the server at 127.0.0.2 (the namespace's own loopback), so the
    # rules cut its connections and nobody else's.
    pg = Postgres(run, "pg0", listen="127.0.0.1,127.0.0.2")
    run.extra_servers.append(pg)
    pg.start()
    urls = {1: pg.url("127.0.0.2"), 2: pg.url(), 3: pg.url()}
    run.setup(workers=3, ttl_ms=PG_TTL_MS, resource="file", lock_url=urls, hold_ms=300,
              # With the watchdog a hold lasts 1.5 TTL of uses, five times a fixed one: 6 s more
              # after the heal, so that worker 1 meets a free lock again (P05 PGSW seed 2 did not
              # within 10 s: ShedLock rows have no queue).
              duration_ms=16000 if run.watchdog else 10000,
              worker_extra={w: ["--kind", PG_KIND[run.mode]] + (
                  LET_EXPIRE if w == 1 else []) for w in (1, 2, 3)})
    w, hold = start_with_victim_holding(run)
    run.netns.rules("ip daddr 127.0.0.2 tcp dport %d" % pg.port,
                    "ip saddr 127.0.0.2 tcp sport %d" % pg.port)
    t = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t),
                 PG_SERVER_BOUND_MS / 1000 + 5, "another worker's grant while worker 1 is cut")
    run.sleep_ms(max(0, PG_SERVER_BOUND_MS + 2000 - (F.mono_ns() - t) / 1e6))  # the cut
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    probe_no_write_after(run, w, hold, renewed=run.watchdog)
    run.watchdog_probes(lost_by=(w.id, t))
    if run.mode == "PGA":
        probe_first_grant_after(run, w, hold, t, least_ms=PG_TTL_MS,
                                most_ms=PG_SERVER_BOUND_MS + 1500)
    else:
        probe_first_grant_after(run, w, hold, t, most_ms=row_free_ms(run.mode))
    probe_count(run, "worker 1 acquired again after the heal",
                acquisitions(run, workers=[1], after=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


# ---------------------------------------------------------------------------------------------
# etcd (as tests/support/etcd_fixture.cpp: /usr/bin/etcd members on loopback, heartbeat 50 ms,
# election timeout 500 ms; ready when /health says so; etcdctl for the nemesis)


def etcd_bin(name):
    return os.environ.get("DLOCK_TEST_ETCD" if name == "etcd" else "DLOCK_TEST_ETCDCTL") or \
        shutil.which(name)


class Etcd(ServerProcess):
    def __init__(self, run, name, client_port, peer_port, initial, uid=None):
        if not etcd_bin("etcd") or not etcd_bin("etcdctl"):
            skip("needs etcd and etcdctl")
        self.run, self.name, self.port, self.peer = run, name, client_port, peer_port
        self.initial, self.started_once, self.proc, self.uid = initial, False, None, uid
        self.dir = os.path.join(run.out, name)
        os.makedirs(self.dir, exist_ok=True)
        if uid is not None:  # a uid of its own: nft tells its packets apart (E05)
            os.chmod(run.out, 0o711)
            os.chown(self.dir, uid, uid)

    def spawn(self):
        url = "http://127.0.0.1:%d" % self.port
        peer = "http://127.0.0.1:%d" % self.peer
        args = [etcd_bin("etcd"), "--name", self.name, "--data-dir",
                os.path.join(self.dir, "data"), "--listen-client-urls", url,
                "--advertise-client-urls", url, "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer, "--initial-cluster", self.initial,
                "--initial-cluster-state", "existing" if self.started_once else "new",
                "--initial-cluster-token", "dlock-fault", "--heartbeat-interval", "50",
                "--election-timeout", "500", "--logger", "zap", "--log-outputs", "stderr"]
        with open(os.path.join(self.dir, "server.log"), "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True,
                                         **({"user": self.uid, "group": self.uid,
                                             "extra_groups": []} if self.uid is not None
                                            else {}))
        self.started_once = True

    def healthy(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                out, end = b"", time.monotonic() + 1
                while time.monotonic() < end:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    out += chunk
            return b'"health":"true"' in out
        except OSError:
            return False

    def wait_ready(self, budget=30.0):
        end = time.monotonic() + budget
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise F.HarnessError("%s exited; see %s/server.log" % (self.name, self.dir))
            if self.healthy():
                return
            time.sleep(0.05)
        raise F.HarnessError("%s not healthy within %.0f s" % (self.name, budget))

    def ctl(self, *args, timeout=10):
        p = subprocess.run([etcd_bin("etcdctl"), "--endpoints=127.0.0.1:%d" % self.port,
                            "--dial-timeout=2s", "--command-timeout=5s"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           env=dict(os.environ, ETCDCTL_API="3"))
        if p.returncode != 0:
            raise F.HarnessError("etcdctl %s: %s" % (" ".join(args),
                                                     p.stderr.decode(errors="replace")[-300:]))
        return p.stdout.decode()

    def status(self):
        """The member's own status (its header and the leader it knows), {} when it does not
        answer. Zero fields are left out of the JSON: no "leader" while there is none."""
        try:
            st = json.loads(self.ctl("endpoint", "status", "-w", "json", timeout=5))
        except (F.HarnessError, ValueError, subprocess.SubprocessError):
            return {}
        return st[0].get("Status", {}) if st else {}

    def is_leader(self):
        status = self.status()
        me = status.get("header", {}).get("member_id")
        return me is not None and me == status.get("leader")

    def knows_leader(self):
        """True while the member follows (or is) a leader; False once it has none (an isolated
        member campaigns after the election timeout) or does not answer."""
        return bool(self.status().get("leader"))

    def http(self, method, path, body=None, timeout=2.0):
        """One request to the member's HTTP side: its JSON gateway (POST /v3/..., int64 fields
        as strings) or /metrics. The answer's text; HarnessError on an error answer or none
        (cheaper than an etcdctl process per request, for the nemesis loops)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=json.dumps(body) if body is not None else None)
            r = c.getresponse()
            out = r.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            raise F.HarnessError("%s %s on %s: %s" % (method, path, self.name, e))
        finally:
            c.close()
        if r.status != 200:
            raise F.HarnessError("%s %s on %s: %d %s" % (method, path, self.name, r.status,
                                                         out[-300:]))
        return out

    def revision(self):
        return int(json.loads(self.http("POST", "/v3/maintenance/status", {}))["header"]
                   ["revision"])

    def metric(self, name):
        """A metric of /metrics without labels (None when absent)."""
        for line in self.http("GET", "/metrics").splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None



def etcd_setup(run, members=1, worker_extra_1=(), own_uids=False, **kw):
    ports = [(F.free_port(), F.free_port()) for _ in range(members)]
    initial = ",".join("e%d=http://127.0.0.1:%d" % (i, p[1]) for i, p in enumerate(ports))
    servers = [Etcd(run, "e%d" % i, p[0], p[1], initial, uid=ZK_UIDS[i] if own_uids else None)
               for i, p in enumerate(ports)]
    run.extra_servers += servers
    for s in servers:
        s.spawn()
    for s in servers:
        s.wait_ready()
    workers = kw.pop("workers", 3)
    run.proxy = F.Proxy(run, {"w%d-l%d" % (w, i): s.port for w in range(1, workers + 1)
                              for i, s in enumerate(servers)})
    urls = {w: "etcd://%s/dlock-fault?ttl=%d&connect_timeout=1000" % (",".join(
        "127.0.0.1:%d" % run.proxy.ports["w%d-l%d" % (w, i)] for i in range(members)),
        ETCD_TTL_S) for w in range(1, workers + 1)}
    kw.setdefault("hold_ms", 300)
    kw.setdefault("duration_ms", 8000)
    run.setup(workers=workers, ttl_ms=ETCD_TTL_S * 1000, resource="file", lock_url=urls,
              worker_extra={w: ["--kind", "lock"] + (list(worker_extra_1) if w == 1 else [])
                            for w in range(1, workers + 1)}, **kw)
    return servers


ET_SAFE = "SAFE, LIVE(lease TTL)"
ET_TTL_MS = ETCD_TTL_S * 1000
# DEADLINE's START_BEFORE_INVOKE assumes a grant's validity is counted from a request of the
# acquisition itself. On etcd a hold's valid_until is the client lease's: the send time of its
# last answered keep-alive (every TTL/3, often sent before the acquisition began) + TTL - drift.
# That deadline is earlier, never later, than one counted from the acquisition (the server
# renewed the lease after that send), so the check is reported, not asserted; every other
# check holds.
ET_DEADLINE = {"DEADLINE": "any"}


@scenario("E01", "etcd: the holder killed (kill -9) while holding",
          "no overlap; the dead client's lease expires after its TTL, then the others acquire",
          ["ET"], outcome={"ET": ET_SAFE}, expect={"ET": ET_DEADLINE})
def e01(run):
    etcd_setup(run)
    w, hold = start_with_victim_holding(run)
    w.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", "w%d" % w.id)
    run.wait_workers()
    probe_first_grant_after(run, w, hold, t, least_ms=ET_TTL_MS // 2, most_ms=ET_TTL_MS + 1500,
                            killed=True)
    probe_count(run, "acquisitions after the kill", acquisitions(run, after=t), 3)


def holder_lease(srv, lock):
    """The lease of the key that holds `lock` (the lowest create revision under its range)."""
    kvs = json.loads(srv.ctl("get", "--from-key", "", "-w", "json")).get("kvs", [])
    kvs = [kv for kv in kvs if kv.get("lease") and
           ("/%s/" % lock).encode() in base64.b64decode(kv["key"])]
    if not kvs:
        return None
    return min(kvs, key=lambda kv: kv["create_revision"])["lease"]


@scenario("E02", "etcd: the holder's lease revoked (etcdctl lease revoke) while it holds and "
          "another worker waits",
          "the key goes with the lease and the waiter is granted at once; the holder's watch on "
          "its own key sees the deletion within milliseconds and marks its lease lost; a "
          "careful holder checks valid_until before it writes (MUTEX reported, not asserted: the "
          "history has no loss event)", ["ET"], expect={"ET": dict(ET_DEADLINE, MUTEX="any")},
          outcome={"ET": "no stale write; beliefs overlap until the holder hears of the "
                   "revocation"})
def e02(run):
    srv = etcd_setup(run, worker_extra_1=["--hold-ms", "1200"])[0]
    w, hold = start_with_victim_holding(run)
    lease = run.wait_for(lambda: holder_lease(srv, run.lock), 5, "the holder's lease")
    srv.ctl("lease", "revoke", "%x" % lease)
    t = F.mono_ns()
    run.nemesis("lease-revoke", srv.name, "%x, holder w%d" % (lease, w.id))
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    use = [e for e in w.events() if e.get("f") == "use" and e["type"] != "invoke" and
           e["op"] == hold["op"] + 1]
    run.probe("the revoked holder did not write", use and use[0]["type"] != "ok",
              use[0].get("err", use[0]["type"]) if use else "no use event")
    nxt = acquisitions(run, workers=[2, 3], after=t)
    run.probe("another worker was granted within 1000 ms", nxt and nxt[0][1]["t"] - t < 1e9,
              "%.0f ms" % ((nxt[0][1]["t"] - t) / 1e6) if nxt else "no grant")
    probe_count(run, "worker 1 acquired again (a new lease)",
                acquisitions(run, workers=[1], after=t))
    probe_count(run, "acquisitions after the revocation", acquisitions(run, after=t), 3)


@scenario("E03", "etcd: the holder cut off (proxy blackhole of its route) past its lease TTL, "
          "until another worker acquired",
          "the holder's keep-alives go unanswered: its belief ends at valid_until; the lease "
          "expires on the server after its TTL and the key goes; after the heal the holder "
          "gets a new lease", ["ET"], outcome={"ET": ET_SAFE}, expect={"ET": ET_DEADLINE})
def e03(run):
    etcd_setup(run, duration_ms=9000, worker_extra_1=LET_EXPIRE)
    w, hold = start_with_victim_holding(run)
    run.proxy.ctl("rule w1-l0 blackhole")
    t = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, workers=[2, 3], after=t), 3 * ET_TTL_MS / 1000 + 5,
                 "another worker's grant while worker 1 is cut off")
    run.proxy.ctl("clear w1-l0")
    t1 = F.mono_ns()
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_first_grant_after(run, w, hold, t, least_ms=ET_TTL_MS // 2)
    probe_count(run, "worker 1 acquired again after the heal (a new lease)",
                acquisitions(run, workers=[1], after=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


@scenario("E04", "etcd cluster (3 members): the leader killed (kill -9) while a worker holds, "
          "restarted after a new leader is elected",
          "leases and keys survive the election (the new leader extends every lease by its "
          "TTL); clients move to another member; no overlap, locking goes on", ["ETC"],
          outcome={"ETC": ET_SAFE}, expect={"ETC": ET_DEADLINE})
def e04(run):
    servers = etcd_setup(run, members=3, duration_ms=12000, wait_ms=4000)
    w, hold = start_with_victim_holding(run)
    leader = run.wait_for(lambda: next((s for s in servers if s.is_leader()), None), 10,
                          "the etcd leader")
    leader.kill9()
    t = F.mono_ns()
    run.nemesis("kill-9", leader.name, "leader; holder w%d" % w.id)
    new = run.wait_for(lambda: next((s for s in servers if s is not leader and
                                     s.is_leader()), None), 30, "a new leader")
    run.nemesis("elected", new.name, "after %.0f ms" % ((F.mono_ns() - t) / 1e6))
    leader.spawn()
    leader.wait_ready()
    t1 = F.mono_ns()
    run.nemesis("restart", leader.name, "healthy again")
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions after the old leader rejoined", acquisitions(run, after=t1),
                3)


# ---------------------------------------------------------------------------------------------
# PostgreSQL failover: advisory locks are not replicated


def pg_standby(run, primary, name="pg1"):
    """A streaming standby of `primary` (pg_basebackup -R -X stream), started; a standby
    whose data directory came from the primary (its postgresql.auto.conf names the primary)."""
    standby = Postgres(run, name, initdb=False)
    run.extra_servers.append(standby)
    p = subprocess.run([pg_bin("pg_basebackup") or "pg_basebackup", "-h", primary.dir, "-p",
                        str(primary.port), "-U", "postgres", "-D",
                        os.path.join(standby.dir, "data"), "-R", "-X", "stream"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                       **standby.as_server())
    if p.returncode != 0:
        raise F.HarnessError("pg_basebackup: %s" % p.stdout.decode(errors="replace")[-500:])
    standby.start()
    if standby.psql("SELECT pg_is_in_recovery()") != "t":
        raise F.HarnessError("%s is not a standby" % name)
    return standby


@scenario("P06", "PostgreSQL: a streaming standby promoted (pg_promote) while the old primary "
          "keeps serving worker 1 (split brain: worker 1 still reaches the old primary, the "
          "others only the new one)",
          "advisory locks live in one server's memory and are not replicated: the promoted "
          "standby has none, so the others are granted the lock worker 1 holds, and both "
          "believe (worker 1's checks succeed on the old primary): the documented violation",
          ["PGA"], timeout=150,
          expect={"PGA": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any",
                          "FENCE": "any", "FOREIGN_RELEASE": "any"}},
          outcome={"PGA": "EXPECT-VIOL (advisory locks are lost by a failover)"})
def p06(run):
    primary = Postgres(run, "pg0")
    run.extra_servers.append(primary)
    primary.start()
    standby = pg_standby(run, primary)
    # Workers 2 and 3 accept only a read-write server, and reach only the standby: refused
    # until it is promoted. Worker 1 reaches only the old primary.
    rw = standby.url() + "&target_session_attrs=read-write"
    run.setup(workers=3, ttl_ms=PG_TTL_MS, resource="file", hold_ms=300, duration_ms=7000,
              lock_url={1: primary.url(), 2: rw, 3: rw},
              worker_extra={w: ["--kind", "simple"] + (LET_EXPIRE if w == 1 else [])
                            for w in (1, 2, 3)})
    w, hold = start_with_victim_holding(run)
    before = acquisitions(run, workers=[2, 3])
    run.probe("no grant to the others before the promotion", not before,
              "%d grants" % len(before))
    standby.psql("SELECT pg_promote(true, 30)", timeout=40)
    t = F.mono_ns()
    run.nemesis("promote", standby.name, "old primary pg0 still serves worker 1")
    run.wait_workers()
    probe_count(run, "grants to the others on the promoted standby",
                acquisitions(run, workers=[2, 3], after=t))
    probe_count(run, "worker 1 still acquired on the old primary after the promotion",
                acquisitions(run, workers=[1], after=t))



# The token each row kind's sequence hands out (PGS has none: its row is looked for instead).
PG_TOKEN_SEQUENCE = {"PGA": "dlock_fence", "PGL": "dlock_fence", "PGV": "locks_rvn"}


@scenario("P07", "PostgreSQL: the primary crashed (kill -9 of every process) while worker 1 "
          "holds, then its synchronous streaming standby promoted (pg_promote); workers 2 and 3 "
          "name both servers (target_session_attrs=read-write), worker 1 the primary only",
          "rows: a commit is acknowledged only once the standby has it, so the holder's row and "
          "the token sequence survive the failover: nobody is granted before the row's lease "
          "ran out (versioned: was taken over), tokens keep increasing, locking goes on on the "
          "new primary; advisory: the lock goes with the crashed session, the holder is told by "
          "its socket and writes nothing more; the promotion comes after its granted deadline "
          "(a promotion within dlock_check of the crash could overlap beliefs: the advisory "
          "overlap window), and the token sequence survives; with the watchdog (PG*W) worker "
          "1's renewals fail after the crash and its loss is signalled by its last proven "
          "deadline", PG_MODES + PG_WATCHDOG, timeout=150,
          outcome=dict({"PGA": "SAFE (promoted after the holder's deadline), LIVE after the "
                   "promotion", "PGL": "SAFE, LIVE(TTL) after the promotion",
                   "PGS": "SAFE, LIVE(TTL) after the promotion",
                   "PGV": "SAFE, LIVE(2 TTL) after the promotion"},
                       **{m: "SAFE, LOSS signalled, LIVE after the promotion" for m in PG_WATCHDOG}))
def p07(run):
    primary = Postgres(run, "pg0", settings={"synchronous_commit": "on",
                                             "synchronous_standby_names": "*"})
    run.extra_servers.append(primary)
    primary.start()
    standby = pg_standby(run, primary)
    run.wait_for(lambda: primary.psql("SELECT sync_state FROM pg_stat_replication") == "sync",
                 20, "the standby streaming as the synchronous one")
    both = primary.url().replace("127.0.0.1:%d" % primary.port, "127.0.0.1:%d,127.0.0.1:%d" % (
        primary.port, standby.port)) + "&target_session_attrs=read-write"
    run.setup(workers=3, ttl_ms=PG_TTL_MS, resource="file", hold_ms=300, duration_ms=9000,
              lock_url={1: primary.url(), 2: both, 3: both},
              worker_extra={w: ["--kind", PG_KIND[run.mode]] for w in (1, 2, 3)})
    w, hold = start_with_victim_holding(run)
    os.killpg(primary.proc.pid, signal.SIGKILL)
    primary.proc.wait(timeout=10)
    t = F.mono_ns()
    run.nemesis("kill-9", primary.name, "every process, holder w%d" % w.id)
    if run.mode == "PGA":
        run.sleep_ms(max(0, (hold["deadline"] - F.mono_ns()) / 1e6 + 50))
    standby.psql("SELECT pg_promote(true, 30)", timeout=40)
    t1 = F.mono_ns()
    run.nemesis("promote", standby.name, "%.0f ms after the crash" % ((t1 - t) / 1e6))
    seq = PG_TOKEN_SEQUENCE.get(run.mode)
    if seq:
        last = standby.psql("SELECT last_value FROM %s" % seq)
        run.probe("the promoted standby's %s is at least the holder's token %s" % (
            seq, hold.get("fence")), hold.get("fence") is not None and
            int(last) >= hold["fence"], "last_value %s" % last)
    else:
        rows = standby.psql("SELECT count(*) FROM shedlock")
        run.probe("the holder's ShedLock row is on the promoted standby", rows == "1",
                  "%s rows" % rows)
    run.wait_workers()
    probe_no_write_after(run, w, hold, renewed=run.watchdog)
    run.watchdog_probes(lost_by=(w.id, t))
    if run.mode == "PGA":
        if not run.watchdog:  # with the watchdog its uses before the crash may have written
            use = [e for e in w.events() if e.get("f") == "use" and e["type"] != "invoke" and
                   e["op"] == hold["op"] + 1]
            run.probe("the crashed primary's holder did not write",
                      use and use[0]["type"] != "ok",
                      use[0].get("err", use[0]["type"]) if use else "no use event")
        probe_first_grant_after(run, w, hold, t)
    else:
        probe_first_grant_after(run, w, hold, t, most_ms=(t1 - t) / 1e6 + row_free_ms(run.mode))
    probe_count(run, "acquisitions on the promoted standby", acquisitions(run, after=t1), 3)

@scenario("E05", "etcd cluster (3 members): the leader partitioned from the other two (nft, in "
          "the run's own network namespace: its peer port, and every packet its uid sends to "
          "theirs) until they elected a new leader and a worker acquired, then healed",
          "a minority leader steps down (check quorum); the majority elects a leader; clients "
          "whose member went silent move to another one and keep their lease; no overlap, "
          "locking goes on", ["ETC"], outcome={"ETC": ET_SAFE}, expect={"ETC": ET_DEADLINE},
          timeout=150)
def e05(run):
    own_netns(run, "member")
    servers = etcd_setup(run, members=3, own_uids=True, duration_ms=14000, wait_ms=4000)
    w, hold = start_with_victim_holding(run)
    leader = run.wait_for(lambda: next((s for s in servers if s.is_leader()), None), 10,
                          "the etcd leader")
    others = [s for s in servers if s is not leader]
    cut_off(run, leader, [leader.peer], [s.peer for s in others])
    t = F.mono_ns()
    new = run.wait_for(lambda: next((s for s in others if s.is_leader()), None), 30,
                       "a new leader among the majority")
    run.nemesis("elected", new.name, "after %.0f ms" % ((F.mono_ns() - t) / 1e6))
    t_new = F.mono_ns()
    run.wait_for(lambda: acquisitions(run, after=t_new), 15,
                 "an acquisition under the new leader")
    stepped_down = not leader.is_leader()
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.probe("the isolated leader stepped down", stepped_down)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions during the partition", acquisitions(run, after=t, before=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


@scenario("E06", "etcd cluster (3 members): a follower (either one: every worker's client reaches "
          "every member, round robin) partitioned from the other two (nft, in the run's own "
          "network namespace: its peer port, and every packet its uid sends to theirs) while a "
          "worker holds, until it lost its leader and a worker acquired through the majority, "
          "then healed",
          "the leader keeps its quorum; the isolated follower cannot forward requests or "
          "keep-alives and ends its streams once it has no leader; clients whose member went "
          "silent move to another one and keep their lease; no overlap, locking goes on",
          ["ETC"], outcome={"ETC": ET_SAFE}, expect={"ETC": ET_DEADLINE}, timeout=150)
def e06(run):
    own_netns(run, "member")
    servers = etcd_setup(run, members=3, own_uids=True, duration_ms=14000, wait_ms=4000)
    w, hold = start_with_victim_holding(run)
    leader = run.wait_for(lambda: next((s for s in servers if s.is_leader()), None), 10,
                          "the etcd leader")
    follower = next(s for s in servers if s is not leader)
    others = [s for s in servers if s is not follower]
    cut_off(run, follower, [follower.peer], [s.peer for s in others])
    t = F.mono_ns()
    run.nemesis("partitioned", follower.name, "follower of %s; holder w%d" % (leader.name, w.id))
    run.wait_for(lambda: not follower.knows_leader(), 15, "the isolated follower without a leader")
    t_lost = F.mono_ns()
    run.nemesis("no-leader", follower.name, "after %.0f ms" % ((t_lost - t) / 1e6))
    run.wait_for(lambda: acquisitions(run, after=t_lost), 15,
                 "an acquisition through the majority")
    kept, lost = leader.is_leader(), not follower.knows_leader()
    dropped = run.netns.heal()
    t1 = F.mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.probe("the isolated follower lost its leader (until the heal)", lost,
              "after %.0f ms" % ((t_lost - t) / 1e6))
    run.probe("the leader kept leading through the partition", kept)
    run.wait_workers()
    probe_no_write_after(run, w, hold)
    probe_count(run, "acquisitions during the partition", acquisitions(run, after=t, before=t1))
    probe_count(run, "acquisitions after the heal", acquisitions(run, after=t1), 3)


# E07: one compaction to the current revision every 50-100 ms (seeded) for E07_WINDOW_MS.
E07_WINDOW_MS = 5000
E07_EVERY_MS = (50, 100)
# Each worker's requests reach etcd this late (proxy delay-up): a hold's watch from the grant's
# revision + 1 arrives after the previous holder put its key again, so it waits for etcd's
# catch-up loop, where a compaction past that revision cancels it.
E07_DELAY_MS = 25
E07_WRITER = "e07-writer"


def compact_loop(run, srv, window_ms):
    """Compacts srv's keyspace to its current revision every 50-100 ms for window_ms, through
    the JSON gateway, not physical (etcd sets the compact revision, what cancels watches from
    older revisions, when it applies the request; `physical` only makes the call wait for the
    backend's deletion). Between two compactions it puts an unrelated key (E07_WRITER) in a
    loop, so that the revision keeps moving as in a busy cluster. Each compaction is a nemesis
    event. Returns the revisions compacted to and the writes."""
    fired, writes = [], 0
    key = base64.b64encode(E07_WRITER.encode()).decode()
    end = F.mono_ns() + window_ms * 1_000_000
    while F.mono_ns() < end:
        rev = srv.revision()
        if not fired or rev > fired[-1]:  # etcd refuses an already compacted revision
            srv.http("POST", "/v3/kv/compaction", {"revision": str(rev)})
            run.nemesis("compact", srv.name, "to revision %d" % rev)
            fired.append(rev)
        tick = F.mono_ns() + run.rng.randint(*E07_EVERY_MS) * 1_000_000
        while F.mono_ns() < min(tick, end):
            srv.http("POST", "/v3/kv/put", {"key": key, "value": base64.b64encode(
                str(writes).encode()).decode()})
            writes += 1
    return fired, writes


def contended_at(run, t):
    """At t, a worker held (acquire ok, its release not yet invoked) while another waited (acquire
    invoked, not yet answered)."""
    held = waited = False
    for w in run.workers:
        last = None
        for e in w.events():
            if e["t"] <= t and e.get("f") in ("acquire", "release"):
                last = e
        if last is None:
            continue
        if last["f"] == "acquire" and last["type"] == "invoke":
            waited = True
        elif last["f"] == "acquire" and last["type"] == "ok":
            held = True
    return held and waited


@scenario("E07", "etcd: the keyspace compacted to its current revision every 50-100 ms for 5 s "
          "(not physical) while an unrelated key is put in a loop (the revision keeps moving) "
          "and 4 workers, each 25 ms away (proxy delay-up), hand one lock over with short holds "
          "(50-100 ms)",
          "no overlap; acquisitions go on during and after the compactions; no waiter is stuck "
          "(none times out, every worker acquires after them, no 2 s gap). A waiter watches its "
          "predecessor from etcd's current revision: a synced watch, which compaction never "
          "cancels. A holder watches its own key from the grant's revision + 1: written past by "
          "the time that watch arrives, it waits for etcd's catch-up loop (every 100 ms), and a "
          "compaction past its revision meanwhile cancels it (compact_revision set); the hold "
          "then reads its key again and watches anew. Asserted from the workers' metrics "
          "(watches_cancelled, summed over the workers): at least one watch cancelled per run "
          "(without the writer and the delay, a logging worker saw none in two seeds)",
          ["ET"], outcome={"ET": ET_SAFE}, expect={"ET": ET_DEADLINE}, max_gap_ms=ET_TTL_MS)
def e07(run):
    srv = etcd_setup(run, workers=4, hold_ms=100, think_ms=50, duration_ms=11000)[0]
    for w in run.workers:  # every request of every worker reaches etcd E07_DELAY_MS late
        run.proxy.ctl("rule w%d-l0 delay-up %d" % (w.id, E07_DELAY_MS))
    run.nemesis("delay-up", "every worker", "%d ms" % E07_DELAY_MS)
    t_start = F.mono_ns()
    run.start_workers()
    run.wait_for(lambda: acquisitions(run, after=t_start), 10, "a first acquisition")
    t = F.mono_ns()
    fired, writes = compact_loop(run, srv, E07_WINDOW_MS)
    t1 = F.mono_ns()
    run.nemesis("compactions-end", srv.name, "%d compactions, %d writes of %s"
                % (len(fired), writes, E07_WRITER))
    run.wait_workers()
    # A compaction per 150 ms of the window at least (one every 50-100 ms plus two requests).
    run.probe("compactions fired (at least %d)" % (E07_WINDOW_MS // 150),
              len(fired) >= E07_WINDOW_MS // 150,
              "%d, revisions %s-%s" % (len(fired), fired[0] if fired else "-",
                                       fired[-1] if fired else "-"))
    server_rev = srv.metric("etcd_debugging_mvcc_compact_revision")
    run.probe("etcd's compact revision is the last one compacted to",
              fired and server_rev == fired[-1], "%s" % server_rev)
    ts = [e["t"] for e in F.read_jsonl(os.path.join(run.out, "nemesis.jsonl"))
          if e["nemesis"] == "compact"]
    hit = [x for x in ts if contended_at(run, x)]
    run.probe("compactions while a worker held and another waited (at least a quarter)",
              len(hit) * 4 >= len(ts) > 0, "%d of %d" % (len(hit), len(ts)))
    probe_count(run, "acquisitions during the compactions (at least 2 a second)",
                acquisitions(run, after=t, before=t1), 2 * E07_WINDOW_MS // 1000)
    probe_count(run, "acquisitions after the compactions", acquisitions(run, after=t1), 3)
    late = [w.id for w in run.workers if not acquisitions(run, workers=[w.id], after=t1)]
    run.probe("every worker acquired after the compactions", not late,
              "none after them: %s" % late if late else "")
    # A waiter stuck on a watch that never fires gives up at its wait (3 s; the run lasts more
    # than that after the window, so no wait begun before its end is cut short by the run's).
    stuck = []
    for w in run.workers:
        invoked = {e["op"]: e["t"] for e in w.events()
                   if e.get("f") == "acquire" and e["type"] == "invoke"}
        stuck += ["w%d op %d: %s" % (w.id, e["op"], e.get("err", e["type"])) for e in w.events()
                  if e.get("f") == "acquire" and e["type"] in ("fail", "info") and
                  invoked.get(e["op"], 1 << 62) <= t1]
    run.probe("no acquisition begun before the compactions ended failed or timed out",
              not stuck, "; ".join(stuck[:5]))
    # The workers' own counters (written at their end): the holds' watches etcd cancelled.
    ms = [w.metrics() for w in run.workers]
    cancelled = sum(m["watches_cancelled"] for m in ms if m)
    run.probe("watches etcd cancelled (compact_revision), over the workers (at least 1)",
              all(ms) and cancelled >= 1,
              "%d cancelled, %s streams broken; by worker %s" % (
                  cancelled, sum(m["watch_streams_broken"] for m in ms if m),
                  [m["watches_cancelled"] if m else None for m in ms]))
