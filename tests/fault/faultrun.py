#!/usr/bin/env python3
"""faultrun: the orchestrator of dlock's fault suite (issue 11, reliability.md §7).

One scenario run: start redis-server processes (lock servers and a "resource" server with an
append-only file), the fault proxy (one route per worker and server), N workers; apply the
nemesis; collect the histories (worker logs, nemesis log, proxy log, the resource log rebuilt
from the resource server's AOF in the server's order); run dlock_check with the expectation the
scenario's row of reliability.md §7.3 names; record seed, duration and verdicts as JSON.

  faultrun.py [paths] list
  faultrun.py [paths] run ID MODE [--seed N] [--results DIR] [--keep]
      MODE: S, F, R, FO, or SW, FW, RW, FOW: S, F, R, FO with watchdog leases (the worker's
      --watchdog: no fixed lease, the client renews it; judged by the checker's LOSS as well)
  faultrun.py [paths] random --seconds S --seed N [--mode S|F|R|FO]
  faultrun.py safety-doc [--random DIR] [--tests FILE] RESULTS_DIR... > docs/SAFETY.md

Standard library only. Everything is bounded: every wait has a deadline, every process is
killed at the end, every loop has a count or a time limit. All traffic stays on 127.0.0.1.
"""

import argparse
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from server_process import ServerProcess

# ---------------------------------------------------------------------------------------------
# small helpers


def mono_ns():
    """CLOCK_MONOTONIC in ns: the clock of every history (the workers use steady_clock)."""
    return time.monotonic_ns()


def free_port(below=65536):
    """A free loopback port under `below` (a cluster node's bus port is port + 10000)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < below:
            return port
    raise HarnessError("no free port under %d" % below)


def free_listen_port():
    """A free loopback port outside the kernel's ephemeral range, for a port a server binds
    late (a ZooKeeper member binds its quorum port only when it becomes the leader): a port
    from that range may be handed to an outgoing connection in the meantime, and the bind then
    fails (Z08 seed 12: "Address already in use", no leader for 30 s)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    candidates = [p for p in range(10000, 65536) if not lo <= p <= hi]
    rng = random.Random()  # not the run's seed: which free port is no part of the schedule
    for _ in range(200):
        port = rng.choice(candidates)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise HarnessError("no free port outside the ephemeral range %d-%d" % (lo, hi))


class HarnessError(Exception):
    """The harness itself failed (a server did not start, a fault did not take effect)."""


def resp_encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class RespReader:
    """Reads RESP2 replies from a socket (the orchestrator's own admin client)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _line(self):
        for _ in range(1 << 20):
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        raise HarnessError("reply line too long")

    def _exact(self, n):
        for _ in range(1 << 20):
            if len(self.buf) >= n + 2:
                data, self.buf = self.buf[:n], self.buf[n + 2:]
                return data
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        raise HarnessError("reply too long")

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise HarnessError("unexpected reply %r" % line)


class RedisReplyError(str):
    pass


def redis_call(port, *args, timeout=3.0):
    """One command on a fresh connection; returns the reply (errors as RedisReplyError)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(resp_encode(args))
        return RespReader(s).read()


def parse_resp_commands(data):
    """The commands of an AOF (RESP arrays of bulk strings), in file order; a truncated tail
    (kill -9 mid-write) is ignored."""
    cmds, i, n = [], 0, len(data)
    while i < n:
        if data[i:i + 1] != b"*":
            break
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        count, i, cmd = int(data[i + 1:j]), j + 2, []
        for _ in range(count):
            j = data.find(b"\r\n", i)
            if j < 0 or data[i:i + 1] != b"$":
                return cmds
            ln = int(data[i + 1:j])
            if j + 2 + ln + 2 > n:
                return cmds
            cmd.append(data[j + 2:j + 2 + ln].decode(errors="replace"))
            i = j + 2 + ln + 2
        cmds.append(cmd)
    return cmds


# ---------------------------------------------------------------------------------------------
# processes


class Redis(ServerProcess):
    """One redis-server on a free loopback port, with its own directory and config."""

    def __init__(self, run, name, persistence="none", extra=None, skew=None, below=65536):
        self.run, self.name = run, name
        self.skew_file = os.path.join(run.out, name + ".skew") if skew else None
        if skew:
            with open(self.skew_file, "w") as f:
                f.write(skew)
        self.port = free_port(below)
        self.dir = os.path.join(run.out, name)
        os.makedirs(self.dir, exist_ok=True)
        self.persistence = persistence  # none | aof
        self.extra = extra or []
        self.args = []  # extra command-line arguments (--sentinel)
        self.proc = None

    def conf(self):
        lines = [
            "port %d" % self.port, "bind 127.0.0.1", "dir %s" % self.dir, 'save ""',
            "daemonize no", "protected-mode no", "logfile %s" % os.path.join(self.dir, "redis.log"),
            "maxmemory-policy noeviction", "auto-aof-rewrite-percentage 0",
        ]
        if self.persistence == "aof":
            lines += ["appendonly yes", "appendfsync always"]
        else:
            lines += ["appendonly no"]
        return "\n".join(lines + self.extra) + "\n"

    def start(self, budget=10.0):
        path = os.path.join(self.dir, "redis.conf")
        with open(path, "w") as f:
            f.write(self.conf())
        env = dict(os.environ)
        if self.skew_file:
            env.update(LD_PRELOAD=self.run.env.skew, DLOCK_SKEW_FILE=self.skew_file)
        self.proc = subprocess.Popen([self.run.env.redis_server, path] + self.args,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True, env=env)
        end = time.monotonic() + budget
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise HarnessError("%s exited at start; see %s/redis.log" % (self.name, self.dir))
            try:
                r = redis_call(self.port, "PING", timeout=0.5)
                if r == "PONG":
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise HarnessError("%s did not answer PING within %.0f s" % (self.name, budget))

    def set_skew(self, offset_ms, rate=1.0):
        """Steps this server's wall clock (the skew shim re-reads the file every ms)."""
        with open(self.skew_file + ".tmp", "w") as f:
            f.write("%d %s" % (offset_ms, rate))
        os.replace(self.skew_file + ".tmp", self.skew_file)
        self.run.nemesis("skew", self.name, "%d %s" % (offset_ms, rate))

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def call(self, *args, timeout=3.0):
        return redis_call(self.port, *args, timeout=timeout)

    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def aof_commands(self):
        d = os.path.join(self.dir, "appendonlydir")
        manifest = os.path.join(d, "appendonly.aof.manifest")
        if not os.path.exists(manifest):
            return []
        files = []
        with open(manifest) as f:
            for line in f:
                parts = line.split()
                kv = dict(zip(parts[0::2], parts[1::2]))
                if kv.get("type") == "i":
                    files.append((int(kv.get("seq", 0)), kv["file"]))
        cmds = []
        for _, name in sorted(files):
            with open(os.path.join(d, name), "rb") as f:
                cmds += parse_resp_commands(f.read())
        return cmds


class Proxy:
    """dlock_fault_proxy with one route per (worker, server). `zk`: the routes carry ZooKeeper
    requests (rules match the operation, e.g. CREATE2, and its path), not RESP."""

    def __init__(self, run, routes, zk=False):
        self.run = run
        self.log = os.path.join(run.out, "proxy.jsonl")
        self.fwd_log = os.path.join(run.out, "forwards.jsonl")
        args = [run.env.proxy, "--log", self.log, "--fwd-log", self.fwd_log,
                "--max-seconds", "600"]
        for name, port in routes.items():
            args += ["--route", "%s=%d%s" % (name, port, "/zk" if zk else "")]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.ports, self.control = {}, None
        end, buf = time.monotonic() + 10, b""
        while time.monotonic() < end:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                if b"ready\n" in buf:
                    break
        for line in buf.decode().splitlines():
            p = line.split()
            if p[:1] == ["control"]:
                self.control = int(p[1])
            elif p[:1] == ["route"]:
                self.ports[p[1]] = int(p[2])
        if self.control is None or len(self.ports) != len(routes):
            raise HarnessError("fault proxy did not start: %r" % buf)

    def ctl(self, line):
        with socket.create_connection(("127.0.0.1", self.control), timeout=3) as s:
            s.sendall(line.encode() + b"\n")
            reply = b""
            end = time.monotonic() + 3
            while not reply.endswith(b"\n") and time.monotonic() < end:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        reply = reply.decode().strip()
        if not reply.startswith("ok"):
            raise HarnessError("proxy: %s -> %s" % (line, reply))
        return reply  # the proxy logs rules, triggers, releases and clears itself

    def triggered(self, route):
        reply = self.ctl("stats %s" % route)
        return int(reply.split("triggered=")[1].split()[0])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def read_jsonl(path):
    """The complete lines of a JSON-lines log (a line still being written is left out); none
    when the file does not exist yet."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except OSError:
        return []


class Worker:
    def __init__(self, run, wid, args, skew_file=None):
        self.run, self.id, self.skew_file = run, wid, skew_file
        self.log = os.path.join(run.out, "w%d.jsonl" % wid)
        self.args = [run.env.worker, "--id", str(wid), "--log", self.log] + args
        self.proc = None
        self.crashed = False
        self.gid = None  # F14 FO: a group of its own, so that nft can match its packets


    def start(self):
        env = dict(os.environ)
        if self.skew_file:
            env.update(LD_PRELOAD=self.run.env.skew, DLOCK_SKEW_FILE=self.skew_file)
        with open(self.log + ".err", "w") as err:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True, env=env, group=self.gid)

    def pid(self):
        return self.proc.pid

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
            self.crashed = True
            # The checker's synthetic end of a crashed worker (docs/design/fault-suite.md).
            self.run.append(os.path.join(self.run.out, "nemesis.jsonl"),
                            {"w": self.id, "f": "crash", "type": "info", "t": mono_ns()})

    def events(self):
        return read_jsonl(self.log)

    def metrics(self):
        """The counters the worker wrote at its end (fault_worker's write_metrics), or None
        (killed, or not ended yet)."""
        try:
            with open(self.log + ".metrics.json") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


# ---------------------------------------------------------------------------------------------
# one run


CHECKS = ["MUTEX", "EXTEND_EXPIRED", "DEADLINE", "USE_WITHIN_HOLD", "FENCE", "RESOURCE",
          "FOREIGN_RELEASE", "ORPHANS", "LIVENESS", "LOSS"]
# Watchdog modes: the base mode (S, F, R, FO) with the worker's --watchdog. A holder keeps its lock
# for WATCHDOG_HOLD_TTLS x TTL of uses (so that the client renews it a few times, and a fault
# that starts while it holds meets it holding), logs the renewals it sees and its loss signal.
WATCHDOG_MODES = ["SW", "FW", "RW", "FOW"]
# PostgreSQL's kinds with the watchdog (backends.py: PGAW, PGLW, PGSW, PGVW run PGA... bodies).
PG_WATCHDOG_MODES = ["PGAW", "PGLW", "PGSW", "PGVW"]
WATCHDOG_HOLD_TTLS = 1.5


class Run:
    """The context of one scenario run: servers, proxy, workers, logs, probes."""

    def __init__(self, env, scenario, mode, seed, out):
        self.env, self.scenario, self.seed, self.out = env, scenario, seed, out
        # SW/FW/RW/FOW run the body of S/F/R/FO (every `run.mode` test sees the base mode).
        self.watchdog = mode in WATCHDOG_MODES + PG_WATCHDOG_MODES
        self.mode = mode[:-1] if self.watchdog else mode
        self.rng = random.Random(seed)
        self.lock = "fault-%s" % scenario.id.lower()
        self.ttl_ms = 1000
        self.lock_servers, self.workers, self.proxy, self.resource = [], [], None, None
        self.extra_servers = []  # started by a scenario body (F33's upstream), stopped by close
        self.netns = None  # F12-F14: the run's own network namespace
        self.resource_kind = "none"
        self.file = os.path.join(out, "resource.txt")
        self.probes = []  # (name, passed, detail)
        self.t0 = mono_ns()

    # logs -------------------------------------------------------------------------------
    def append(self, path, obj):
        with open(path, "a") as f:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def nemesis(self, what, target, value=""):
        self.append(os.path.join(self.out, "nemesis.jsonl"),
                    {"nemesis": what, "target": target, "value": str(value), "t": mono_ns()})

    def probe(self, name, passed, detail=""):
        self.probes.append({"name": name, "passed": bool(passed), "detail": detail})

    # topology ---------------------------------------------------------------------------
    def setup(self, workers=3, ttl_ms=1000, persistence="none", resource=None, hold_ms=100,
              duration_ms=4500, command_timeout_ms=500, wait_ms=3000, poll_ms=0,
              worker_extra=None, lock_extra=None, resource_via_proxy=False, lock_skew=None,
              worker_skew=None, think_ms=100, lock_auth="", lock_url=None, lock_mode="S",
              masters=3):
        """Starts lock servers (1, or `masters` masters for R), the resource server, the proxy and
        prepares (does not start) the workers. `lock_url` (one URL, or one per worker id:
        backends.py's ZooKeeper, PostgreSQL and etcd) replaces the Redis lock servers. In mode
        FO a scenario written for one master runs the same on a Sentinel-managed master
        (fo_setup: the workers find it through the sentinels; every data node behind its own
        proxy route; lock_servers[0] is the master)."""
        if self.mode == "FO" and lock_url is None:
            return fo_setup(self, lock_extra=lock_extra, lock_skew=lock_skew,
                            lock_auth=lock_auth, workers=workers, ttl_ms=ttl_ms,
                            resource=resource, hold_ms=hold_ms, duration_ms=duration_ms,
                            command_timeout_ms=command_timeout_ms, wait_ms=wait_ms,
                            poll_ms=poll_ms, worker_extra=worker_extra, worker_skew=worker_skew,
                            think_ms=think_ms, persistence=persistence,
                            resource_via_proxy=resource_via_proxy)
        self.ttl_ms = ttl_ms
        n_lock = 0 if lock_url else masters if self.mode == "R" else 1
        for i in range(n_lock):
            r = Redis(self, "lock%d" % i, persistence=persistence, extra=lock_extra,
                      skew=(lock_skew or {}).get(i))
            r.start()
            self.lock_servers.append(r)
        if resource is None:
            resource = "fenced" if self.mode == "F" else "counter"
        self.resource_kind = resource
        if resource in ("counter", "fenced"):
            if not self.resource:  # fo_setup made it, to route it through its proxy
                self.resource = Redis(self, "resource", persistence="aof")
            self.resource.start()
        routes = {}
        for w in range(1, workers + 1):
            for i, r in enumerate(self.lock_servers[:n_lock]):
                routes["w%d-l%d" % (w, i)] = r.port
            if self.resource and resource_via_proxy:
                routes["w%d-res" % w] = self.resource.port
        if self.proxy and routes:  # FO: fo_setup's proxy already has these routes
            assert set(routes) <= set(self.proxy.ports), routes
        else:
            self.proxy = Proxy(self, routes) if routes else self.proxy
        for w in range(1, workers + 1):
            urls = ["redis://%s127.0.0.1:%d" % (lock_auth, self.proxy.ports["w%d-l%d" % (w, i)])
                    for i in range(n_lock)]
            args = ["--mode", lock_mode if lock_url else self.mode, "--lock", self.lock,
                    "--ttl-ms", str(ttl_ms),
                    "--wait-ms", str(wait_ms), "--poll-ms", str(poll_ms),
                    "--command-timeout-ms", str(command_timeout_ms), "--hold-ms", str(hold_ms),
                    "--duration-ms", str(duration_ms), "--ops", "100000",
                    "--seed", str(self.seed), "--resource", resource,
                    "--think-ms", str(think_ms)]
            if lock_url:
                args += ["--url", lock_url[w] if isinstance(lock_url, dict) else lock_url]
            else:
                args += ["--masters", ",".join(urls)] if self.mode == "R" else ["--url", urls[0]]
            if self.resource:
                port = (self.proxy.ports["w%d-res" % w] if resource_via_proxy
                        else self.resource.port)
                args += ["--resource-url", "redis://127.0.0.1:%d" % port]
            if resource == "file":
                args += ["--file", self.file]
            if self.watchdog:
                args += ["--watchdog", "--uses", str(self.watchdog_uses(ttl_ms, hold_ms))]
            args += (worker_extra or {}).get(w, [])
            self.workers.append(Worker(self, w, args, worker_skew))

    @staticmethod
    def watchdog_uses(ttl_ms, hold_ms):
        """Uses per hold in a watchdog mode: one use sleeps 0.5-1 x hold_ms, so this many make
        a hold of about WATCHDOG_HOLD_TTLS x TTL (at least 2)."""
        per_use = max(1.0, 0.75 * hold_ms)
        return max(2, int(-(-WATCHDOG_HOLD_TTLS * ttl_ms // per_use)))

    def start_workers(self, arm=None, others_after_ms=300):
        """Starts every worker. With `arm`, worker 1 starts alone, arm(worker 1) sets up the
        fault, and the others follow after others_after_ms: the victim's first acquisition
        then meets a free lock, so the faulted request is one the server grants."""
        if arm:
            self.workers[0].start()
            arm(self.workers[0])
            self.sleep_ms(others_after_ms)
        for w in self.workers:
            if not w.proc:
                w.start()

    def route(self, w, server=0):
        """Worker w's proxy route to lock server `server`. In FO the route is the node's own
        (fo_setup: one per data node, shared by every client, replica and sentinel): the
        workers find the master through Sentinel, which can name only one address per node."""
        return "l%d" % server if self.fo_proxied() else "w%d-l%d" % (w, server)

    def lock_routes(self, w):
        """The routes worker w's lock requests take: one per lock server; in FO the master's
        (lock0 until a failover)."""
        n = 1 if self.fo_proxied() else len(self.lock_servers)
        return [self.route(w, i) for i in range(n)]

    def masters(self):
        """The lock servers that take writes: every one, or in FO the master (lock0)."""
        return self.lock_servers[:1] if self.mode == "FO" else self.lock_servers

    def fo_proxied(self):
        return self.mode == "FO" and self.proxy is not None and "l0" in self.proxy.ports

    def announced(self, srv):
        """The port Sentinel names for a data node: its proxy route in FO, else its own."""
        return self.proxy.ports[srv.name.replace("lock", "l")] if self.fo_proxied() \
            else srv.port

    def acquire_rule(self):
        """What the proxy matches for an acquisition request in this mode (FO: the simple
        lock, as in S)."""
        return "cmd SET" if self.mode in ("S", "R", "FO") else "arg redisson_lock_token"

    def write_rule(self):
        return "cmd SET" if self.resource_kind == "counter" else "cmd EVALSHA|EVAL arg :value"

    # waiting ----------------------------------------------------------------------------
    def sleep_ms(self, ms):
        time.sleep(ms / 1000.0)

    def wait_for(self, pred, timeout_s, what):
        """Polls every 10 ms until pred() is truthy; HarnessError after timeout_s."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.01)
        raise HarnessError("timed out after %.1f s waiting for %s" % (timeout_s, what))

    def acquired_since(self, t_ns, workers=None):
        """The first (worker, event) with an acquire ok after t_ns."""
        for w in self.workers:
            if workers and w.id not in workers:
                continue
            for e in w.events():
                if e.get("f") == "acquire" and e.get("type") == "ok" and e["t"] >= t_ns:
                    return (w, e)
        return None

    def stopped(self, pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
        except OSError:
            return False

    def wait_workers(self, extra_s=15):
        budget = max(w_duration(w) for w in self.workers) / 1000.0 + extra_s
        end = time.monotonic() + budget
        for w in self.workers:
            left = max(0.1, end - time.monotonic())
            try:
                w.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(w.proc.pid, signal.SIGCONT)
                except OSError:
                    pass
                w.kill9()
                self.probe("workers end within their duration", False,
                           "worker %d killed after %.0f s" % (w.id, budget))

    # results ----------------------------------------------------------------------------
    def resource_log(self):
        """The resource's log in the server's order: the SETs of the AOF (fenced_set's effects
        are a MULTI/SET/SET/EXEC), each value naming its writer; then the final value."""
        path = os.path.join(self.out, "resource.jsonl")
        entries = []
        vkey, okey = "res:{%s}:value" % self.lock, "res:{%s}:open" % self.lock
        if self.resource_kind == "file":
            try:
                with open(self.file) as f:
                    lines = [ln.split() for ln in f if ln.strip()]
            except FileNotFoundError:
                lines = []
            for p in lines:
                entries.append({"kind": "write", "after": int(p[0]), "before": int(p[1]),
                                "w": int(p[2]), "op": int(p[3]), "fence": int(p[4])})
            final = entries[-1]["after"] if entries else 0
        elif self.resource:
            for c in self.resource.aof_commands():
                if len(c) >= 3 and c[0].upper() == "SET" and c[1] in (vkey, okey):
                    p = c[2].split("|")
                    if c[1] == okey:
                        entries.append({"kind": "open", "w": int(p[1]), "op": int(p[2]),
                                        "fence": int(p[3])})
                    else:
                        entries.append({"kind": "write", "after": int(p[0]),
                                        "before": int(p[1]), "w": int(p[2]), "op": int(p[3]),
                                        "fence": int(p[4])})
            v = self.resource.call("GET", vkey)
            final = int(v.split("|")[0]) if v else 0
        else:
            return None
        with open(path, "w") as f:
            for i, e in enumerate(entries, 1):
                rec = {"seq": i, "lock": self.lock, "kind": e["kind"], "accepted": True}
                if e.get("fence"):
                    rec["fence"] = e["fence"]
                for k in ("before", "after"):
                    if k in e:
                        rec[k] = e[k]
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            f.write(json.dumps({"seq": len(entries) + 1, "lock": self.lock, "kind": "final",
                                "after": final}, separators=(",", ":")) + "\n")
        # ACK probe: what the workers were told agrees with what the server applied.
        applied = {(e["w"], e["op"]) for e in entries if e["kind"] == "write"}
        bad = []
        for w in self.workers:
            for e in w.events():
                if e.get("f") != "use" or "value" not in e:
                    continue
                key = (e["w"], e["op"])
                if e["type"] == "ok" and key not in applied:
                    bad.append("w%d op %d told ok, not applied" % key)
                if e["type"] == "fail" and key in applied:
                    bad.append("w%d op %d told rejected, applied" % key)
        self.probe("resource acknowledgements match the server's log", not bad, "; ".join(bad[:5]))
        return path

    def leftovers(self):
        """ORPHANS: keys with a TTL still on the lock servers after every worker ended and
        TTL + 500 ms passed (persistent keys such as fence counters are not leases). None
        without Redis lock servers (backends.py)."""
        if not self.lock_servers:
            return []
        self.sleep_ms(self.ttl_ms + 500)
        out = []
        for r in self.lock_servers:
            try:
                keys = r.call("KEYS", "*") or []
            except OSError:
                continue
            for k in keys:
                try:
                    if r.call("PTTL", k) > 0:
                        out.append(k)
                except OSError:
                    pass
        return out

    def bounded_latency(self, bound_ms):
        """Every call of every worker returned within bound_ms (probe for F11/F24)."""
        worst, where = 0, ""
        for w in self.workers:
            inv = {}
            for e in w.events():
                k = (e["w"], e["op"])
                if e["type"] == "invoke":
                    inv[k] = e["t"]
                elif k in inv:
                    d = (e["t"] - inv.pop(k)) // 1_000_000
                    if d > worst:
                        worst, where = d, "w%d op %d %s" % (w.id, e["op"], e["f"])
        self.probe("every call returned within %d ms" % bound_ms, worst <= bound_ms,
                   "slowest %d ms (%s)" % (worst, where))

    def victim_told_ambiguous(self):
        """Worker 1's first acquisition (the faulted one) ended as `info` (outcome unknown) or
        `fail`, never as a hold. In FO a client of a Sentinel master retries a timed-out or
        reset attempt within its wait (the master may be moving; the undo of the unknown
        attempt goes first): there the acquisition may end ok, but only through an attempt
        sent after the last faulted one (its lease starts after that request met the proxy)."""
        first = next((e for e in self.workers[0].events()
                      if e.get("f") == "acquire" and e["type"] != "invoke"), None)
        ok = first is not None and first["type"] in ("info", "fail")
        detail = "%s %s" % (first and first["type"], first and first.get("err", ""))
        if self.mode == "FO" and first is not None and first["type"] == "ok":
            faulted = [e["t"] for e in read_jsonl(os.path.join(self.out, "proxy.jsonl"))
                       if e.get("target") == self.route(1) and e.get("nemesis", "") not in
                       ("proxy-rule", "proxy-clear", "proxy-release", "proxy-stopped")]
            ok = bool(faulted) and first["t_start"] > max(faulted)
            detail += "; lease from %d ns after the last faulted request" % (
                first["t_start"] - max(faulted)) if faulted else "; no fault logged"
        self.probe("the faulted acquisition was not reported as a hold", ok, detail)

    def fo_master_note(self):
        """FO: logs (and prints) whether the sentinels moved the master; returns the port."""
        if self.mode != "FO":
            return None
        port = self.extra_servers[0].master_port_now()
        moved = port != self.announced(self.lock_servers[0])
        self.nemesis("master-now", "sentinels", "port %s (%s)" % (port, "failed over" if moved
                                                                 else "no failover"))
        print("FO: master on port %s: %s" % (port, "failed over" if moved else "no failover"))
        return port

    def fo_no_failover(self):
        """FO: probe that the sentinels kept the master (lock0): a fault that is not the
        master's loss (a clock fault on it, one client cut) must not fail over."""
        if self.mode == "FO":
            self.probe("no failover", self.fo_master_note() == self.announced(
                self.lock_servers[0]))

    def min_acquisitions(self, n):
        """At least n acquisitions; in a watchdog mode at least half as many (at least 2): a
        hold there is WATCHDOG_HOLD_TTLS x TTL of uses, several times a fixed-lease hold."""
        if self.watchdog:
            n = max(2, n // 2)
        ok = sum(1 for w in self.workers for e in w.events()
                 if e.get("f") == "acquire" and e.get("type") == "ok")
        self.probe("at least %d acquisitions" % n, ok >= n, "%d acquisitions" % ok)

    def stale_rejected(self, wid=1, n=1):
        """Mode F: the faulted holder's late write (or open) reached the fenced resource and
        the fence rejected it, at least n times: a SAFE row that shows the fence at work."""
        got = sum(1 for e in self.workers[wid - 1].events() if e.get("f") == "use"
                  and e["type"] == "fail" and "stale fence" in e.get("err", ""))
        self.probe("at least %d stale write of worker %d rejected by the fence" % (n, wid),
                   got >= n, "%d rejected" % got)

    def holder_after(self, t_ns, what, n=1):
        """At least n acquisitions after t_ns (the fault): the lock was usable again."""
        got = sum(1 for w in self.workers for e in w.events() if e.get("f") == "acquire"
                  and e.get("type") == "ok" and e["t"] > t_ns)
        self.probe("at least %d acquisition after %s" % (n, what), got >= n,
                   "%d acquisitions" % got)

    def watchdog_probes(self, lost_by=None):
        """Watchdog modes: the client renewed held locks (at least one renewal seen by a
        holder), and, with lost_by=(worker id, t0 ns), that worker's hold that met the fault at
        t0 was signalled lost (the fault outlasted its deadline)."""
        if not self.watchdog:
            return
        evs = [e for w in self.workers for e in w.events()]
        renewals = sum(1 for e in evs if e.get("f") == "extend" and e.get("observed"))
        lost = [e for e in evs if e.get("f") == "lost"]
        self.probe("holders saw at least one renewal", renewals >= 1,
                   "%d renewals seen, %d losses signalled" % (renewals, len(lost)))
        if lost_by:
            wid, t0 = lost_by
            held = [e for e in self.workers[wid - 1].events() if e.get("f") == "acquire"
                    and e["type"] == "ok" and e["t"] <= t0]
            tok = held[-1]["token_h"] if held else None
            mine = [e for e in lost if e.get("token_h") == tok]
            self.probe("worker %d's hold at the fault was signalled lost" % wid, mine,
                       "hold %s: lost %s" % (tok, "%.0f ms after the fault" % (
                           (mine[0]["t"] - t0) / 1e6) if mine else "never"))

    def join_forwards(self, w):
        """Copies worker w's log with t_first_fwd added to each acquire ok: when the requests
        of the attempt that won reached the proxy. That attempt sent one lock request per
        server: on each route the last one before the ok; for a Redlock round, the earliest
        of those last requests that lie within 5 ms of the latest (rounds are at least the
        retry delay apart, and a server that got no request in the winning round drops out).
        Only the last request of each route counts: a server stopped and resumed (SIGCONT)
        makes the proxy forward the earlier rounds' requests that waited for it all at once,
        just before the winning round (seed 118, mode R, of the randomised tier: those stale
        requests were taken for the round's first, a false START_AFTER_SEND). The checker then
        requires t_start <= t_first_fwd: the validity was measured from before the send."""
        fwd = {}
        if not self.proxy:
            return w.log
        try:
            with open(self.proxy.fwd_log) as f:
                for line in f:
                    e = json.loads(line)
                    wanted = e["fence_key"] if self.mode == "F" else e["cmd"] == "SET"
                    if wanted and e["route"].startswith("w%d-l" % w.id):
                        fwd.setdefault(e["route"], []).append(e["t"])
        except (OSError, ValueError):
            return w.log
        out = w.log.replace(".jsonl", ".joined.jsonl")
        inv = {}
        with open(out, "w") as f:
            for e in w.events():
                k = (e["w"], e["op"])  # F36's fork children write to their parent's log
                if e.get("f") == "acquire" and e["type"] == "invoke":
                    inv[k] = e["t"]
                if e.get("f") == "acquire" and e["type"] == "ok" and k in inv:
                    last = []  # per route, the last lock request of this attempt
                    for ts in fwd.values():
                        mine = [t for t in ts if inv[k] <= t <= e["t"]]
                        if mine:
                            last.append(max(mine))
                    burst = 5_000_000 if self.mode == "R" else 0  # one server: the last one
                    if last:
                        e["t_first_fwd"] = min(t for t in last if t >= max(last) - burst)
                f.write(json.dumps(e, separators=(",", ":")) + "\n")
        return out

    def check(self, expect, max_gap_ms=None):
        files = [self.join_forwards(w) for w in self.workers if os.path.exists(w.log)]
        for extra in ("nemesis.jsonl", "proxy.jsonl"):
            p = os.path.join(self.out, extra)
            if os.path.exists(p):
                files.append(p)
        res = self.resource_log()
        if res:
            files.append(res)
        args = [self.env.check]
        for c in CHECKS:
            args += ["--expect", "%s=%s" % (c, expect.get(c, "ok"))]
        for k in self.leftovers():
            args += ["--leftover", k]
        if max_gap_ms is not None:
            args += ["--max-gap-ms", str(max_gap_ms)]
        p = subprocess.run(args + files, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=120)
        out = p.stdout.decode(errors="replace")
        with open(os.path.join(self.out, "checker.txt"), "w") as f:
            f.write(out)
        measured = {}
        for line in out.splitlines():
            for c in CHECKS:
                if line.startswith(c + ": "):
                    measured[c] = "violated" if "VIOLATED" in line else "ok"
        return p.returncode, out, measured

    def close(self):
        for w in self.workers:
            if w.proc and w.proc.poll() is None:
                try:
                    os.kill(w.proc.pid, signal.SIGCONT)
                except OSError:
                    pass
                w.proc.kill()
                w.proc.wait(timeout=5)
        if self.proxy:
            self.proxy.stop()
        for r in self.lock_servers + ([self.resource] if self.resource else []) + \
                self.extra_servers:
            r.stop()
        if self.netns:
            self.netns.leave()


def w_duration(w):
    a = w.args
    return int(a[a.index("--duration-ms") + 1])


# ---------------------------------------------------------------------------------------------
# scenarios (reliability.md §7.3). Each body drives one run; `expect` maps the mode to the
# checks' expected verdicts (missing = ok); "any" = reported, not asserted.


class Scenario:
    def __init__(self, sid, title, checks, modes, body, expect=None, outcome=None,
                 max_gap_ms=None, timeout=90, ext=""):
        self.id, self.title, self.checks = sid, title, checks
        self.modes = [modes] if modes == "FO" else list(modes)
        # Modes the scenario runs in that CI leaves out for time (ctest label `extended`:
        # `ctest -L extended`); they add little over the modes CI runs.
        self.ext_modes = ext if isinstance(ext, list) else list(ext)
        self.body, self.expect, self.outcome = body, expect or {}, outcome or {}
        self.max_gap_ms, self.timeout = max_gap_ms, timeout


SCENARIOS = {}


def scenario(sid, title, checks, modes, expect=None, outcome=None, max_gap_ms=None, timeout=90,
             ext=""):
    def deco(fn):
        SCENARIOS[sid] = Scenario(sid, title, checks, modes, fn, expect, outcome, max_gap_ms,
                                  timeout, ext)
        return fn
    return deco


SAFE = {}
FO_MODES = ["S", "F", "R", "FO"]
# In FO a fault on the proxy hits a data node for every client, replica and sentinel (see
# fo_setup): a partition or a stall of the master longer than down-after-milliseconds (1 s)
# is a failover. dlock's lock-delay (no new grant for one lease after a client sees the master
# change) then outlasts every hold the old master granted to a request sent before the switch
# was seen (its validity counts from before the send): SAFE. What is left is a race as wide
# as the spread of the sentinels' +switch-master among the clients (milliseconds here): a
# client that has not seen it yet can still be granted by the old master while it is master.
FO_FAILOVER = ("SAFE: the master is cut from everyone, sentinels included, for longer than "
               "down-after-milliseconds: Sentinel fails over; the lock-delay outlasts every "
               "hold the old master granted")
LOST_UPDATE = {"RESOURCE": "violated", "USE_WITHIN_HOLD": "violated"}
# The outcome of a watchdog mode that met the fault: beliefs end at the last renewal's deadline.
WATCHDOG_SAFE = ("SAFE, LOSS: renewals fail, the loss is signalled by the last renewed deadline "
                 "(+100 ms), the holder stops")


@scenario("F01", "holder killed (kill -9) while holding",
          "no overlap; the lock is free again within TTL + retry", "SR", ext=["F", "FO"],
          outcome={m: "SAFE, LIVE(TTL+1s)" for m in ["S", "F", "R", "FO"]}, max_gap_ms=2000)
def f01(run):
    run.setup(hold_ms=300)
    run.start_workers()
    run.sleep_ms(1000)
    t = mono_ns()
    w, _ = run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    w.kill9()
    run.nemesis("kill-9", "w%d" % w.id)
    run.wait_workers()
    run.min_acquisitions(5)


@scenario("F02", "holder paused (SIGSTOP) > TTL inside its critical section, then writes",
          "beliefs never overlap; the unfenced resource loses an update, the fenced one rejects "
          "the stale write", "SFR", ext=["FO"],
          expect={"S": LOST_UPDATE, "R": LOST_UPDATE, "F": SAFE, "FO": LOST_UPDATE},
          outcome={"S": "beliefs SAFE; resource EXPECT-VIOL", "R": "beliefs SAFE; resource "
                   "EXPECT-VIOL", "F": "SAFE (stale write rejected)",
                   "FO": "as S: beliefs SAFE; resource EXPECT-VIOL"})
def f02(run):
    run.setup(resource_via_proxy=True, worker_extra={1: ["--careless"]})
    run.start_workers()
    run.sleep_ms(500)
    victim = run.workers[0]
    run.proxy.ctl("rule w1-res stop %d cmd GET count 1" % victim.pid())
    run.wait_for(lambda: run.stopped(victim.pid()), 8, "worker 1 stopped in its critical section")
    run.nemesis("sigstop", "w1", "in critical section")
    run.sleep_ms(2.5 * run.ttl_ms)
    os.kill(victim.pid(), signal.SIGCONT)
    run.nemesis("sigcont", "w1")
    run.wait_workers()
    if run.mode == "F":  # SAFE only if the paused holder's write came and was refused
        run.stale_rejected()


@scenario("F03", "holder paused between the acquire request and its reply (Kleppmann #2)",
          "the validity counts from before the send: a reply read after TTL is no hold",
          "SR", ext=["F", "FO"], outcome={m: "SAFE" for m in FO_MODES})
def f03(run):
    run.setup()
    victim = run.workers[0]
    # Redlock: a stop armed on one master's route alone can land after the other two granted
    # (the proxy forwarded them first, CI 2026-11-24: the quorum was reached and checked
    # before the stop, so the fault was a pause *after* the acquisition, F02's, not this
    # one). The first lock request on any of the worker's routes stops it, before any reply
    # can pass; the other routes' rules are cleared while it is stopped.
    routes = run.lock_routes(1)  # FO: the master's route, which worker 1 alone uses yet

    def arm(w):
        for r in routes:
            run.proxy.ctl("rule %s stop %d %s count 1" % (r, w.pid(), run.acquire_rule()))
    run.start_workers(arm=arm)
    run.wait_for(lambda: run.stopped(victim.pid()), 8, "worker 1 stopped after its acquire")
    for r in routes:
        run.proxy.ctl("clear %s" % r)
    run.sleep_ms(2 * run.ttl_ms)
    os.kill(victim.pid(), signal.SIGCONT)
    run.nemesis("sigcont", "w1")
    run.wait_workers()


@scenario("F04", "acquire reply held back by the proxy for 1.5 x TTL",
          "a reply arriving after the validity is no hold; per-node timeout respected", "SR",
          ext=["F", "FO"],
          outcome={"S": "SAFE", "F": "SAFE", "R": "SAFE (node counted failed)", "FO": "SAFE"})
def f04(run):
    run.setup(worker_extra={1: ["--command-timeout-ms", "3000"]})
    held = [0, 1] if run.mode == "R" else [0]

    def arm(_):
        for i in held:
            run.proxy.ctl("rule %s hold %s count 1" % (run.route(1, i), run.acquire_rule()))
    run.start_workers(arm=arm)
    run.wait_for(lambda: all(run.proxy.triggered(run.route(1, i)) for i in held), 8,
                 "a held acquire reply")
    run.sleep_ms(1.5 * run.ttl_ms)
    for i in held:
        run.proxy.ctl("release %s" % run.route(1, i))
        run.proxy.ctl("clear %s" % run.route(1, i))
    run.wait_workers()


def fault_first_acquire(run, fault, count=1, others_after_ms=300):
    """`fault` on worker 1's first acquisition request(s) (to its first server), met while the
    lock is free; the victim must report it as unknown or failed, and locking goes on."""
    run.setup()
    run.start_workers(arm=lambda _: run.proxy.ctl(
        "rule %s %s %s count %d" % (run.route(1), fault, run.acquire_rule(), count)),
        others_after_ms=others_after_ms)
    run.wait_for(lambda: run.proxy.triggered(run.route(1)), 8, "the fault to trigger")
    run.wait_workers()
    run.min_acquisitions(5)
    if run.mode != "R":  # a Redlock round survives one faulted master
        run.victim_told_ambiguous()


@scenario("F05", "acquire request delayed 1.5 s in the network; the client times out, "
          "releases on a new connection, then the SET lands",
          "no belief; the orphan key lives at most TTL", "SFR", ext=["FO"],
          outcome={"S": "SAFE, LIVE(2.5 TTL)", "F": "SAFE", "R": "SAFE, LIVE(2.5 TTL)",
                   "FO": "SAFE"},
          max_gap_ms=2500)
def f05(run):
    fault_first_acquire(run, "delay-req 1500", others_after_ms=100)


@scenario("F06", "data-plane delay: the holder's write reaches the resource 2 x TTL late",
          "no client-side check helps; only the fence does", "SFR", ext=["FO"],
          expect={"S": LOST_UPDATE, "R": LOST_UPDATE, "F": SAFE, "FO": LOST_UPDATE},
          outcome={"S": "EXPECT-VIOL (overwrite)", "R": "EXPECT-VIOL", "F": "SAFE",
                   "FO": "EXPECT-VIOL (overwrite)"})
def f06(run):
    run.setup(resource_via_proxy=True, worker_extra={1: ["--command-timeout-ms", "5000"]})
    run.start_workers()
    run.sleep_ms(500)
    run.proxy.ctl("rule w1-res delay-req %d %s count 1" % (2 * run.ttl_ms, run.write_rule()))
    run.wait_for(lambda: run.proxy.triggered("w1-res"), 8, "a delayed write")
    run.wait_workers()
    if run.mode == "F":  # SAFE only if the delayed write arrived and was refused
        run.stale_rejected()


@scenario("F09", "asymmetric loss: the acquire request is applied, its reply dropped",
          "acquire reported ambiguous, token released best-effort, lock free within TTL",
          "SFR", ext=["FO"], outcome={"S": "SAFE, LIVE(2.5 TTL)",
                                      "F": "SAFE (fence may be burned)",
                                      "R": "SAFE", "FO": "SAFE, LIVE(2.5 TTL)"},
          max_gap_ms=2500)
def f09(run):
    fault_first_acquire(run, "drop")


@scenario("F10", "connection reset right after the acquire request was forwarded",
          "idempotent retry or ambiguity, never a false hold", "SR", ext=["F", "FO"],
          outcome={m: "SAFE" for m in FO_MODES}, max_gap_ms=2500)
def f10(run):
    fault_first_acquire(run, "reset", count=3)


def cut_victim(run, rule, fails_over=True):
    """Applies `rule` to worker 1's routes to every lock server for 3 s, then heals; every
    call must still return within wait + one command timeout + one reconnect + slack. In FO
    the route is the master's, for everyone: `fails_over` says whether Sentinel must then
    move the master (asserted, both ways)."""
    run.setup(wait_ms=2000)
    run.start_workers()
    run.sleep_ms(700)
    before = run.extra_servers[0].master_port_now() if run.fo_proxied() else None
    for r in run.lock_routes(1):
        run.proxy.ctl("rule %s %s" % (r, rule))
    run.sleep_ms(3000)
    for r in run.lock_routes(1):
        run.proxy.ctl("clear %s" % r)
    if run.fo_proxied() and fails_over:  # a partition of the master, sentinels included
        port = run.wait_for(lambda: (lambda p: p if p and p != before else None)(
            run.extra_servers[0].master_port_now()), 15, "the sentinels' failover")
        run.nemesis("failover", "sentinels", "new master on port %d" % port)
    elif run.fo_proxied():
        run.probe("no failover", run.fo_master_note() == before)
    run.wait_workers()
    run.bounded_latency(2000 + 500 + 500 + 700)
    run.min_acquisitions(5)
    run.watchdog_probes()


@scenario("F11", "blackhole (no RST) between one worker and its server(s) for 3 s",
          "every call returns within its deadline", ["S", "R", "FO"], ext=["F", "SW", "FW", "RW", "FOW"],
          outcome=dict({m: "SAFE" for m in "SFR"}, FO=FO_FAILOVER,
                       **{m: WATCHDOG_SAFE for m in ["SW", "FW", "RW"]},
                       FOW=WATCHDOG_SAFE + "; " + FO_FAILOVER))
def f11(run):
    cut_victim(run, "blackhole")


@scenario("F11s", "slow drip: replies to one worker trickle at 5 bytes/s for 3 s",
          "every call returns within its deadline", "SR", ext=["F", "FO"],
          outcome=dict({m: "SAFE" for m in "SFR"},
                       FO="SAFE: the master's route (everyone's) drips; no failover (Sentinel's "
                       "PING replies are short enough to pass in time)"))
def f11s(run):
    # FO: no failover: the proxy paces at least a byte per 50 ms, so the sentinels' 7-byte
    # PING replies still come within down-after-milliseconds; the master is slow, not down.
    cut_victim(run, "drip 5", fails_over=False)


def crash_restart(run, delay_ms=0, restore=None, victim=0, holder_after=False, blocked=None):
    """kill -9 lock server `victim` while a worker holds the lock, restart it after delay_ms
    (optionally from a copy of its data directory). holder_after: probe that the lock was
    taken again after the restart (and, in mode R, while the victim was down: a quorum
    of 2 is left). blocked: a Redlock master on which the lock's key is held by a foreign
    owner (a lease of a client gone, as a restart-less crash leaves it) from before the workers
    start, so that the hold met is on exactly a bare quorum (2 of 3); the foreign key goes
    (its lease ends) once that hold is seen, just before the victim is killed; the victim's
    restart then leaves one master with the holder's key, and the victim and `blocked` grant
    the lock to a second holder. (Killing that master instead and starting it again empty
    met the workers' reconnect backoff: in 1 run of 3 no one acquired before the holder
    released.)"""
    if blocked is not None:
        run.lock_servers[blocked].call("SET", run.lock, "foreign-owner", "PX", "60000")
        run.nemesis("foreign-key", run.lock_servers[blocked].name, "held before the run")
    run.start_workers()
    run.sleep_ms(800)
    t = mono_ns()
    w, e = run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    if blocked is not None:
        run.lock_servers[blocked].call("DEL", run.lock)
        run.nemesis("foreign-key-gone", run.lock_servers[blocked].name, "holder w%d" % w.id)
    srv = run.lock_servers[victim]
    srv.kill9()
    t_kill = mono_ns()
    run.nemesis("kill-9", srv.name, "holder w%d" % w.id)
    if restore:
        d = os.path.join(srv.dir, "appendonlydir")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(restore, d)
        run.nemesis("rollback", srv.name, "data dir from before the run")
    run.sleep_ms(delay_ms)
    srv.start()
    t_restart = mono_ns()
    run.nemesis("restart", srv.name, "after %d ms" % delay_ms)
    run.wait_workers()
    if blocked is not None:  # the overlap needs the lock taken again while w's belief lasts
        run.holder_after(t_restart, "the restart")
    run.fo_master_note()  # FO: whether the sentinels moved the master (reported)
    if holder_after:
        run.holder_after(t_restart, "the restart")
        if run.mode == "R" and delay_ms > 0:
            down = sum(1 for x in run.workers for e in x.events() if e.get("f") == "acquire"
                       and e.get("type") == "ok" and t_kill < e["t"] < t_restart)
            run.probe("at least 1 acquisition while %s was down (quorum of 2)" % srv.name,
                      down >= 1, "%d acquisitions" % down)


@scenario("F20", "lock server kill -9 and immediate restart without persistence",
          "the holder's key is lost: a second holder overlaps (Redlock: one of 3 restarted is "
          "safe)", "SR", ext=["FO"],
          expect={"S": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "R": SAFE,
                  "FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"S": "EXPECT-VIOL", "R": "SAFE (holder on all 3, one restarted)",
                   "FO": "EXPECT-VIOL: the master is back, empty, long before "
                   "down-after-milliseconds, so no failover; its replicas resync from it and "
                   "lose the key too"})
def f20(run):
    run.setup(ttl_ms=2000, hold_ms=1500, poll_ms=30)
    crash_restart(run, holder_after=run.mode == "R")


@scenario("F20q", "Redlock bare quorum: master 2 held by a foreign key, the holder on masters 0 "
          "and 1; the foreign key gone, master 0 kill -9 and immediate restart without "
          "persistence",
          "a restart that leaves exactly a bare quorum loses the lock: a second holder "
          "overlaps (why a Redlock master must restart only after the longest lease)", "",
          ext=["R"],
          expect={"R": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"R": "EXPECT-VIOL (holder on exactly 2 of 3, one restarted empty)"})
def f20q(run):
    # A lease of 4 s held 3 s: the others' connections to the two restarted masters come back
    # (reconnect backoff) while the holder still believes (with F20's 2 s / 1.5 s, 1 run of 2
    # found the holder already gone).
    run.setup(**BARE_QUORUM)
    crash_restart(run, blocked=2)


BARE_QUORUM = dict(ttl_ms=4000, hold_ms=3000, poll_ms=30, duration_ms=8000)


@scenario("F21", "lock server kill -9, restart delayed past the TTL",
          "safe without persistence when the restart waits out every lease", FO_MODES,
          outcome={"S": "SAFE (unavailable meanwhile)", "F": "SAFE (with AOF)",
                   "R": "SAFE, LIVE with quorum (an acquisition while lock0 is down)",
                   "FO": "SAFE: the master is down past down-after-milliseconds; whether "
                   "Sentinel fails over first (the replicas have the key; lock-delay) or the "
                   "empty master returns first, every lease it lost has ended"})
def f21(run):
    run.setup(ttl_ms=1000, hold_ms=500, poll_ms=30, persistence="aof" if run.mode == "F" else "none")
    crash_restart(run, delay_ms=run.ttl_ms + 500, holder_after=True)


@scenario("F22", "lock server kill -9 and immediate restart with appendfsync always",
          "key and fence counter survive", "SFR", ext=["FO"],
          outcome={"S": "SAFE", "F": "SAFE (fences monotonic)", "R": "SAFE",
                   "FO": "SAFE (the master restarts with its keys before down-after-"
                   "milliseconds; the replicas resync from it)"})
def f22(run):
    run.setup(ttl_ms=2000, hold_ms=1500, poll_ms=30, persistence="aof")
    crash_restart(run, holder_after=True)


@scenario("F23", "rollback restart: the lock server restarts from a copy of its data taken "
          "before the run (emulated lost fsync window)",
          "the lost key lets a second holder in; the fence counter goes back (Redlock: master "
          "2 held by a foreign key, the holder on exactly 0 and 1, master 0 rolled back)", "SF",
          ext=["FO", "R"],
          expect={"S": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "R": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "F": {"FENCE": "violated", "MUTEX": "any", "USE_WITHIN_HOLD": "any",
                        "RESOURCE": "any"}},
          outcome={"S": "EXPECT-VIOL", "F": "fence regression detected (EXPECT-VIOL on "
                   "fences); a repeated fence can also defeat the fenced resource",
                   "FO": "EXPECT-VIOL, as S: the replicas resync from the rolled-back master",
                   "R": "EXPECT-VIOL: a rollback of one master of a bare quorum (holder on 2 "
                   "of 3) loses the lock, as F20q"})
def f23(run):
    run.setup(persistence="aof", **(BARE_QUORUM if run.mode == "R" else
                                    dict(ttl_ms=2000, hold_ms=1500, poll_ms=30)))
    snap = os.path.join(run.out, "lock0-snapshot")
    shutil.copytree(os.path.join(run.lock_servers[0].dir, "appendonlydir"), snap)
    run.nemesis("snapshot", "lock0", "before the run")
    crash_restart(run, restore=snap, blocked=2 if run.mode == "R" else None)


@scenario("F24", "lock server stalled (SIGSTOP) for 2 x TTL while the lock is held",
          "the holder's deadline passes before the server resumes; calls time out",
          ["S", "R", "FO", "SW"], ext=["F", "FW", "FOW"],
          outcome=dict({m: "SAFE" for m in "SFR"}, SW=WATCHDOG_SAFE, FW=WATCHDOG_SAFE,
                       FOW=WATCHDOG_SAFE + "; the master stalls, Sentinel may fail over",
                       FO=FO_FAILOVER.replace("is cut from everyone, sentinels included,",
                                              "stalls").replace("Sentinel fails", "Sentinel "
                                                                "may fail")))
def f24(run):
    run.setup(wait_ms=2000)
    run.start_workers()
    run.sleep_ms(800)
    t = mono_ns()
    holder, _ = run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    srv = run.lock_servers[0]
    srv.signal(signal.SIGSTOP)
    t_stop = mono_ns()
    run.nemesis("sigstop", srv.name)
    run.sleep_ms(2 * run.ttl_ms)
    srv.signal(signal.SIGCONT)
    run.nemesis("sigcont", srv.name)
    run.wait_workers()
    run.fo_master_note()  # FO: a 2 s stall may or may not end in a failover (both SAFE)
    run.bounded_latency(2000 + 500 + 500 + 700)
    # SW/FW/FOW: the holder's renewals hang on the stopped server; its uses (on the resource
    # server) outlast its deadline, so it must be told. (No RW: 2 of 3 masters still renew.)
    run.watchdog_probes(lost_by=(holder.id, t_stop))


# clock faults: the LD_PRELOAD shim (tests/fault/skew) moves the servers' wall clock, which
# Redis uses for key expiry; the histories' clock (CLOCK_MONOTONIC) is untouched.


def fast_servers(run):
    """Which lock servers run fast in F15b: the only one, or 2 of 3 Redlock masters (a
    violation needs holder's nodes - quorum + 1 of them)."""
    return [0] if run.mode != "R" else [0, 1]


def f15(run, rate, careless_writer=False):
    """careless_writer: worker 1 writes whatever its lease says (F15b F: the careful holders
    hold 4 s > TTL and never write, so the fenced resource must meet a late write)."""
    run.setup(ttl_ms=2000, hold_ms=4000, poll_ms=10, duration_ms=7000, wait_ms=5000,
              lock_skew={i: "0 %s" % rate for i in fast_servers(run)},
              worker_extra={1: ["--careless"]} if careless_writer else None)
    run.nemesis("skew-rate", ",".join("lock%d" % i for i in fast_servers(run)), rate)
    if careless_writer:  # worker 1 takes the lock first (else it may lose every race)
        t = mono_ns()
        run.start_workers(arm=lambda _: run.wait_for(
            lambda: run.acquired_since(t, workers=[1]), 8, "worker 1 holding"))
    else:
        run.start_workers()
    run.wait_workers()
    run.fo_no_failover()
    run.min_acquisitions(3)
    if careless_writer:
        writes = [e for e in run.workers[0].events() if e.get("f") == "use" and "value" in e]
        run.probe("worker 1 (careless) wrote at least once (accepted or refused by the fence)",
                  writes, "%d writes: %d accepted, %d refused" % (
                      len(writes), sum(e["type"] == "ok" for e in writes),
                      sum(e["type"] == "fail" for e in writes)))


@scenario("F15a", "server clock runs 0.5 % fast (rate 1.005, under the 1 % drift allowance)",
          "the drift allowance covers a clock rate error below 1 %", "S", ext=["F", "R"],
          outcome={m: "SAFE" for m in "SFR"})
def f15a(run):
    f15(run, 1.005)


@scenario("F15b", "server clock runs 5 % fast (rate 1.05; Redlock: 2 of 3 masters)",
          "overlap iff rate - 1 > drift factor: the checker must see it", "SFR", ext=["FO"],
          expect={"S": {"MUTEX": "violated"},
                  "F": {"MUTEX": "violated", "USE_WITHIN_HOLD": "any"},
                  "R": {"MUTEX": "violated"}, "FO": {"MUTEX": "violated"}},
          outcome={"S": "EXPECT-VIOL", "F": "beliefs EXPECT-VIOL; RES-SAFE (worker 1 writes "
                   "carelessly past its lease: the fence takes or refuses each write)",
                   "R": "EXPECT-VIOL (2 of 3 fast)",
                   "FO": "EXPECT-VIOL as S (the master's clock runs fast; the replicas and "
                   "sentinels change nothing; no failover, asserted)"})
def f15b(run):
    f15(run, 1.05, careless_writer=run.mode == "F")


@scenario("F16", "server clock stepped forward 3 s (> TTL) while the lock is held",
          "a step expires the key at once: a second holder overlaps (Redlock: one master "
          "stepped is safe)", "SFR", ext=["FO"],
          expect={"S": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "F": {"MUTEX": "violated", "USE_WITHIN_HOLD": "any"}, "R": SAFE,
                  "FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"S": "EXPECT-VIOL", "F": "beliefs EXPECT-VIOL; RES-SAFE",
                   "R": "SAFE (holder on all 3, one stepped)",
                   "FO": "EXPECT-VIOL as S (the master's clock is stepped: its key expires at "
                   "once, a second holder overlaps; no failover, asserted)"})
def f16(run):
    run.setup(ttl_ms=2000, hold_ms=1500, poll_ms=30, lock_skew={0: "0 1.0"})
    run.start_workers()
    run.sleep_ms(800)
    t = mono_ns()
    run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    run.lock_servers[0].set_skew(3000)  # FO: the master (lock0)
    t_step = mono_ns()
    run.wait_workers()
    run.fo_no_failover()
    if run.mode == "R":  # SAFE only if the lock was taken again after the step
        run.holder_after(t_step, "the step")


@scenario("F18", "server clock stepped back 5 s mid-run",
          "keys outlive their TTL: no safety issue, liveness degraded", "SR", ext=["F", "FO"],
          expect={m: {"ORPHANS": "any"} for m in FO_MODES},
          outcome=dict({m: "SAFE, LIVE degraded (keys outlive TTL: ORPHANS not asserted)"
                        for m in "SFR"}, FO="SAFE, LIVE degraded as S (the master's clock "
                       "stepped back; ORPHANS not asserted); no failover, asserted"))
def f18(run):
    run.setup(ttl_ms=1000, poll_ms=30, lock_skew={0: "0 1.0"},
              worker_extra={w: ["--expire-pct", "30"] for w in (1, 2, 3)})
    run.start_workers()
    run.sleep_ms(1500)
    srv = run.lock_servers[0]  # FO: the master (lock0)
    srv.set_skew(-5000)
    # The shim re-reads its file on a clock read at most once a millisecond, so a TIME right
    # after the write may still answer the old clock (one CI run saw "0 ms behind"). Poll TIME,
    # bounded, until the step shows; the probe judges the last answer.
    behind = []

    def stepped():
        sec, usec = (int(x) for x in srv.call("TIME"))
        behind.append(time.time() * 1000 - (sec * 1000 + usec / 1000))
        return behind[-1] >= 4000
    try:
        run.wait_for(stepped, 2, "TIME to show the step")
    except HarnessError:
        pass  # the probe below records the miss
    run.probe("the server's clock stepped back (TIME about 5 s behind)",
              4000 <= behind[-1] <= 6000,
              "%.0f ms behind after %d TIME calls" % (behind[-1], len(behind)))
    run.wait_workers()
    run.fo_no_failover()
    # A key left to expire outlives its TTL by 5 s after the step: a 6 s run may see only the
    # acquisitions before it and one after (2 seen in a CI run; 3 was a timing flake).
    run.min_acquisitions(2)


@scenario("F19", "workers' wall clock stepped +1 h, -1 h, +1 ms every 300 ms",
          "dlock measures leases on the steady clock only: no spurious expiry, no overlap",
          "SR", ext=["F", "FO"],
          outcome={m: "SAFE, no spurious expiry" for m in ["S", "F", "R", "FO"]})
def f19(run):
    skew = os.path.join(run.out, "workers.skew")
    with open(skew, "w") as f:
        f.write("0 1.0")
    run.setup(worker_skew=skew)
    run.start_workers()
    for i in range(15):
        run.sleep_ms(300)
        with open(skew + ".tmp", "w") as f:
            f.write("%d 1.0" % [3600000, -3600000, 1][i % 3])
        os.replace(skew + ".tmp", skew)
        run.nemesis("skew", "workers", [3600000, -3600000, 1][i % 3])
    run.wait_workers()
    run.min_acquisitions(10)


def fill(srv, count, size, ex=None):
    """Writes `count` filler keys of `size` bytes into db 1 (pipelined, 200 at a time);
    returns how many writes the server refused (OOM)."""
    refused = 0
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        rd = RespReader(s)
        s.sendall(resp_encode(["SELECT", "1"]))
        rd.read()
        value = "x" * size
        for start in range(0, count, 200):
            n = min(count, start + 200) - start
            s.sendall(b"".join(resp_encode(["SET", "filler:%d" % i, value] +
                                           (["EX", str(ex)] if ex else []))
                               for i in range(start, start + n)))
            for _ in range(n):
                if isinstance(rd.read(), RedisReplyError):
                    refused += 1
    return refused


def info_field(srv, section, field):
    for line in str(srv.call("INFO", section)).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""


@scenario("F29", "eviction: maxmemory 2 MB with volatile-lru, filled while the lock is held "
          "(Redlock: masters 0 and 1, a quorum, filled)",
          "an evicted lock key lets a second holder in (why dlock requires noeviction)", "SF",
          ext=["FO", "R"],
          expect={"S": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "R": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"},
                  "F": {"MUTEX": "violated", "USE_WITHIN_HOLD": "any"}},
          outcome={"S": "EXPECT-VIOL", "F": "beliefs EXPECT-VIOL, RES-SAFE (the fence "
                   "counter has no TTL)", "FO": "EXPECT-VIOL (the master evicts; its replicas "
                   "follow its DELs)", "R": "EXPECT-VIOL (a quorum of masters evicts the key)"})
def f29(run):
    evict(run, "volatile-lru", [0, 1] if run.mode == "R" else [0])
    run.wait_workers()


@scenario("F29a", "eviction: maxmemory 2 MB with allkeys-lru, filled while the lock is held",
          "allkeys-lru evicts keys without a TTL too: the fence counter goes, and fencing "
          "tokens repeat (why dlock requires noeviction even with fencing)", "", ext=["F"],
          expect={"F": {"FENCE": "violated", "MUTEX": "any", "USE_WITHIN_HOLD": "any",
                        "RESOURCE": "any"}},
          outcome={"F": "EXPECT-VIOL on fences (the counter evicted, a token handed out "
                   "twice); the lock key goes too"})
def f29a(run):
    gone = evict(run, "allkeys-lru", [0], ex=None)
    run.wait_workers()
    run.probe("a persistent key (the fence counter) was evicted", gone, ", ".join(gone))
    run.min_acquisitions(3)


def evict(run, policy, victims, ex=600):
    """Lock servers with maxmemory 2 MB and `policy`; once a worker holds, 4000 x 1 KB filler
    keys (with EX `ex`) are written into each victim, which must evict. Returns the keys of db 0
    without a TTL (fence counters) that were there before the fill and are gone after it."""
    run.setup(ttl_ms=2000, hold_ms=1500, poll_ms=30,
              lock_extra=["maxmemory 2mb", "maxmemory-policy " + policy])
    run.start_workers()
    run.sleep_ms(800)
    t = mono_ns()
    run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    gone = []
    for i in victims:
        srv = run.lock_servers[i]
        persistent = [k for k in srv.call("KEYS", "*") or [] if srv.call("PTTL", k) == -1]
        run.nemesis("fill", srv.name, "4000 x 1 KB%s" % (" with EX %d" % ex if ex else ""))
        fill(srv, 4000, 1024, ex=ex)
        evicted = int(info_field(srv, "stats", "evicted_keys") or 0)
        run.probe("keys were evicted on %s" % srv.name, evicted > 0, "evicted_keys %d" % evicted)
        gone += [k for k in persistent if srv.call("EXISTS", k) == 0]
    return gone


@scenario("F30", "OOM under noeviction: 3 MB of persistent keys, then maxmemory 1 MB, for 2 s",
          "acquire fails with out_of_memory, no half acquisition; release still works; "
          "locking resumes once memory is freed", "SFR", ext=["FO"],
          outcome={m: "SAFE" for m in FO_MODES})
def f30(run):
    run.setup(poll_ms=30)
    run.start_workers()
    run.sleep_ms(800)
    for srv in run.masters():  # FO: the master (the replicas apply its writes)
        fill(srv, 3000, 1024)
    # The OOM begins while a lock is held (on every master at once, for Redlock), so that a
    # release meets it: "release still works" is probed below.
    t = mono_ns()
    run.wait_for(lambda: run.acquired_since(t), 5, "an acquisition")
    for srv in run.masters():
        srv.call("CONFIG", "SET", "maxmemory", "1mb")
        run.nemesis("oom", srv.name, "3 MB used, maxmemory 1 MB, noeviction")
        r = srv.call("SET", "probe", "x")
        run.probe("%s refuses writes (OOM)" % srv.name, str(r).startswith("OOM"), repr(r))
    t_oom = mono_ns()  # every master refuses writes from here
    run.sleep_ms(2000)
    t_freed = mono_ns()
    for srv in run.masters():
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            rd = RespReader(s)
            s.sendall(resp_encode(["SELECT", "1"]) + resp_encode(["FLUSHDB"]))
            rd.read()
            rd.read()
        srv.call("CONFIG", "SET", "maxmemory", "0")
        run.nemesis("flushdb", srv.name, "fillers removed, maxmemory 0")
    run.wait_workers()
    oom = sum(1 for w in run.workers for e in w.events()
              if e.get("f") == "acquire" and "memory" in e.get("err", "").lower())
    if run.mode != "R":  # Redlock counts an OOM master as a failed vote, not an error
        run.probe("a worker was told out of memory", oom > 0, "%d acquisitions" % oom)
    run.min_acquisitions(5)
    # "release still works": a release invoked and answered ok inside the OOM window.
    released = []
    for x in run.workers:
        inv = {}
        for e in x.events():
            if e.get("f") != "release":
                continue
            if e["type"] == "invoke":
                inv[e["op"]] = e["t"]
            elif e["type"] == "ok" and t_oom <= inv.get(e["op"], 0) and e["t"] <= t_freed:
                released.append("w%d op %d" % (x.id, e["op"]))
    run.probe("at least 1 release ok inside the OOM window", released,
              "%d: %s" % (len(released), ", ".join(released[:3])))


BUSY_SCRIPT = ("local t0 = redis.call('TIME') "
               "for i = 1, 100000000 do local t = redis.call('TIME') "
               "if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 400000 then break end end "
               "return 1")


@scenario("F31", "BUSY: another client runs a 400 ms script (busy-reply-threshold 100) 4 times",
          "BUSY is unavailability, retried within the wait; dlock never sends SCRIPT KILL",
          "SR", ext=["F"], outcome={m: "SAFE" for m in "SFR"})
# (Not in mode FO: Sentinel itself sends SCRIPT KILL to a master that answers its pings with
# BUSY while subjectively down, so "no SCRIPT KILL" is not dlock's to keep there; measured.)
def f31(run):
    run.setup(lock_extra=["busy-reply-threshold 100"])
    run.start_workers()
    run.sleep_ms(700)
    for _ in range(4):
        t = time.monotonic()
        run.nemesis("busy-script", "lock0", "400 ms")
        r = run.lock_servers[0].call("EVAL", BUSY_SCRIPT, "0", timeout=5)
        run.probe("busy script ran", r == 1 and time.monotonic() - t >= 0.35,
                  "reply %r after %.0f ms" % (r, (time.monotonic() - t) * 1000))
        run.sleep_ms(600)
    run.wait_workers()
    run.min_acquisitions(5)
    killed = int(str(run.lock_servers[0].call("INFO", "commandstats")).count("cmdstat_script|kill"))
    run.probe("no SCRIPT KILL sent", killed == 0)
    # The workers met BUSY: the server counts the error replies it sent (errorstats; only
    # the workers send commands while the scripts run). A single-master worker is also told
    # server_busy (its acquisition fails as busy); a Redlock round counts the vote as lost.
    busy = int((info_field(run.lock_servers[0], "errorstats", "errorstat_BUSY") or
                "count=0").split(",")[0].split("=")[1])
    told = sum(1 for x in run.workers for e in x.events() if e.get("f") == "acquire"
               and "busy" in e.get("err", "").lower())
    run.probe("the server answered BUSY at least once", busy >= 1,
              "%d BUSY replies; %d acquisitions told busy" % (busy, told))
    if run.mode != "R":  # Redlock counts a BUSY master as a failed vote, not an error
        run.probe("a worker was told the server was busy (typed)", told >= 1,
                  "%d acquisitions" % told)


@scenario("F32", "script cache loss: SCRIPT FLUSH on every server every 300 ms",
          "NOSCRIPT falls back to EVAL once, no loop; locking goes on", "SFR", ext=["FO"],
          outcome={m: "SAFE" for m in ["S", "F", "R", "FO"]}, max_gap_ms=1500)
def f32(run):
    run.setup()
    run.start_workers()
    servers = run.lock_servers + ([run.resource] if run.resource else [])
    for _ in range(15):
        run.sleep_ms(300)
        for s in servers:
            s.call("SCRIPT", "FLUSH")
        run.nemesis("script-flush", "all")
    run.wait_workers()
    run.min_acquisitions(10)


# ---------------------------------------------------------------------------------------------
# F07, F08, F33-F36 (session 2): renewal starvation, a cancellation/destroy storm, demotion,
# credentials rotated, transient server states, fork() while holding.


def worker_events(run, f=None, workers=None):
    """Every event of every worker's log (fork children included), optionally one kind."""
    return [e for w in run.workers if not workers or w.id in workers for e in w.events()
            if f is None or e.get("f") == f]


EXTEND_MS = 1377  # an extend lease no other request carries, so the proxy can match it


@scenario("F07", "renewal starvation: worker 1's extend request delayed 1.5 x TTL in the "
          "network (to every server)",
          "an extend that reaches the server after the deadline fails; the holder is told and "
          "does not write; no silent re-acquire", "SR", ext=["F", "FO"],
          outcome={m: "SAFE" for m in FO_MODES})
def f07(run):
    # 6.5 s, not the default 4.5: the starved extend ends 1.5 s in, and worker 1 then queues
    # again behind the two others. With 3 s left, a loaded machine left it no second hold
    # (the campaign's F07 F seed 4 at a load of 3: "0 extends ok"); 5 s leaves several.
    run.setup(hold_ms=200, duration_ms=6500,
              worker_extra={1: ["--extend-ms", str(EXTEND_MS), "--command-timeout-ms", "3000"]})
    routes = run.lock_routes(1)
    # Worker 1 starts alone with the delay armed, so its first hold's extend is the starved one
    # and it has the rest of the run for unfaulted extends. (Armed 600 ms after all three
    # started, worker 1 could lose the race for its first lock for 3 s and reach its starved
    # extend so late that no unfaulted one followed: CI's fault tier failed F07 F once so.)
    armed = {}

    def arm(_w1):
        armed["t"] = mono_ns()
        for r in routes:
            run.proxy.ctl("rule %s delay-req %d cmd EVALSHA|EVAL arg %d count 1"
                          % (r, 1.5 * run.ttl_ms, EXTEND_MS))

    run.start_workers(arm=arm)
    t = armed["t"]
    run.wait_for(lambda: all(run.proxy.triggered(r) for r in routes), 8, "a delayed extend")
    run.wait_workers()
    starved = [e for e in worker_events(run, "extend", [1])
               if e["type"] != "invoke" and e["t"] >= t]
    first = starved[0] if starved else None
    run.probe("the starved extend was not reported as ok",
              first is not None and first["type"] in ("fail", "info"),
              "%s %s" % (first and first["type"], first and first.get("err", "")))
    ok = sum(1 for e in worker_events(run, "extend", [1]) if e["type"] == "ok")
    run.probe("unfaulted extends succeed", ok > 0, "%d extends ok" % ok)
    run.min_acquisitions(5)


def keys_with_ttl(run):
    out = []
    for r in run.lock_servers:
        for k in r.call("KEYS", "*") or []:
            if r.call("PTTL", k) > 0:
                out.append("%s:%s" % (r.name, k))
    return out


@scenario("F08", "cancellation/destroy storm: watchdog leases dropped mid-renewal, async "
          "acquisitions dropped in their handler, exceptions in the critical section, clients "
          "destroyed while their acquisition is pending",
          "nothing is renewed after its handle is gone: no key with a TTL is left one TTL "
          "after the last round, while every process still lives", "F", ext=["S", "R", "FO"],
          outcome={m: "SAFE" for m in FO_MODES})
def f08(run):
    linger = run.ttl_ms + 3000
    run.setup(resource="none", worker_extra={w: ["--storm", "--linger-ms", str(linger)]
                                             for w in (1, 2, 3)})
    run.start_workers()
    end_rounds = time.monotonic() + max(w_duration(w) for w in run.workers) / 1000.0
    # A round's wait ends with the run; its hold (<= TTL/2) and a command timeout may follow;
    # then a dropped watchdog lease's key lives at most one more TTL.
    run.sleep_ms(max(0, end_rounds - time.monotonic()) * 1000 + run.ttl_ms / 2 + 500 +
                 run.ttl_ms + 500)
    alive = sum(1 for w in run.workers if w.proc.poll() is None)
    left = keys_with_ttl(run)
    run.nemesis("orphan-scan", "lock servers", "%d workers alive, %d keys" % (alive, len(left)))
    run.probe("workers still alive at the scan (their I/O threads could renew)",
              alive == len(run.workers), "%d of %d" % (alive, len(run.workers)))
    run.probe("no key renewed after its handle was destroyed", not left, ", ".join(left[:5]))
    run.wait_workers()
    bad = [ln for w in run.workers for ln in open(w.log + ".err") if "never completed" in ln]
    run.probe("every async acquisition completed", not bad, "; ".join(bad[:3]))
    run.min_acquisitions(10)


def repl_offset(srv, field):
    return int(info_field(srv, "replication", field) or -1)


def none_contended(run, t0, t1):
    """Probe: no acquisition invoked and completed in [t0, t1] (a server state in which nobody
    can hold the lock) was reported as "not acquired" without an error (= contended)."""
    inv = {(e["w"], e["op"]): e["t"] for e in worker_events(run, "acquire")
           if e["type"] == "invoke"}
    contended = [e for e in worker_events(run, "acquire") if e["type"] == "fail"
                 and not e.get("err") and t0 <= inv.get((e["w"], e["op"]), 0) and e["t"] <= t1]
    run.probe("no acquisition inside the fault reported as contended", not contended,
              "; ".join("w%d op %d" % (e["w"], e["op"]) for e in contended[:3]))


@scenario("F33", "demotion mid-run: lock server 0 becomes a replica (a controlled switch to a "
          "synced replica) for 1.5 x TTL, then master again",
          "READONLY is a typed error (never 'not acquired'); no hold across the demotion; "
          "fences survive (the replica had every write)", "SF",
          ext=["R", "FO"],
          outcome=dict({m: "SAFE" for m in "SFR"},
                       FO="SAFE: the switch is the sentinels' own (SENTINEL FAILOVER to a synced "
                       "replica; a demotion they did not make is one they undo); the clients "
                       "follow the master, none contended, the lock is taken again after the "
                       "switch, and the old master answers READONLY once demoted"))
def f33(run):
    if run.mode == "FO":
        return f33_fo(run)
    nodelay = ["repl-diskless-sync-delay 0"]  # Redis 7.0 waits 5 s for more replicas
    run.setup(poll_ms=30, lock_extra=nodelay)
    srv = run.lock_servers[0]
    up = Redis(run, "upstream", extra=nodelay)
    up.start()
    run.extra_servers.append(up)
    up.call("REPLICAOF", "127.0.0.1", str(srv.port))
    run.wait_for(lambda: info_field(up, "replication", "master_link_status") == "up", 10,
                 "the replica's link")
    run.start_workers()
    run.sleep_ms(800)
    # Switch: pause writes, let the replica catch up, promote it, demote the master.
    srv.call("CLIENT", "PAUSE", "2000", "WRITE")
    off = repl_offset(srv, "master_repl_offset")
    run.wait_for(lambda: repl_offset(up, "slave_repl_offset") >= off, 5, "the replica in sync")
    up.call("REPLICAOF", "NO", "ONE")
    srv.call("REPLICAOF", "127.0.0.1", str(up.port))
    srv.call("CLIENT", "UNPAUSE")
    t0 = mono_ns()
    run.nemesis("demote", srv.name, "replica of upstream")
    r = srv.call("SET", "probe", "x")
    run.probe("the demoted server answers READONLY", str(r).startswith("READONLY"), repr(r))
    run.sleep_ms(1.5 * run.ttl_ms)
    srv.call("REPLICAOF", "NO", "ONE")
    t1 = mono_ns()
    run.nemesis("promote", srv.name, "master again")
    run.wait_workers()
    if run.mode != "R":  # Redlock counts a READONLY master as a failed vote
        ro = [e for e in worker_events(run, "acquire") if t0 <= e["t"] <= t1
              and e["type"] in ("fail", "info") and "read" in e.get("err", "").lower()]
        run.probe("a worker was told the server is read-only", ro, "%d acquisitions" % len(ro))
        none_contended(run, t0, t1)
    run.min_acquisitions(5)


def f33_fo(run):
    """F33 on a Sentinel master: a controlled switch (SENTINEL FAILOVER) while the workers
    run. A Sentinel client follows READONLY to the new master instead of reporting it (no
    "told read-only" probe here); the lock-delay covers the switch as in F11 FO."""
    run.setup(poll_ms=30, duration_ms=8000)
    run.start_workers()
    run.sleep_ms(800)
    s0, old = run.extra_servers[0], run.lock_servers[0]
    before = s0.master_port_now()
    t0 = mono_ns()
    r = s0.call("SENTINEL", "FAILOVER", "mymaster")
    run.nemesis("sentinel-failover", s0.name, "controlled switch: %r" % r)
    run.probe("SENTINEL FAILOVER accepted", r == "OK", repr(r))
    port = run.wait_for(lambda: (lambda p: p if p and p != before else None)(
        s0.master_port_now()), 15, "the switch")
    t1 = mono_ns()
    run.nemesis("failover", "sentinels", "new master on port %d" % port)
    ro = run.wait_for(lambda: (lambda x: x if str(x).startswith("READONLY") else None)(
        old.call("SET", "probe", "x")), 15, "the old master demoted")
    run.probe("the old master answers READONLY once demoted", ro, repr(ro))
    run.wait_workers()
    none_contended(run, t0, t1)
    run.holder_after(t1, "the switch")
    run.min_acquisitions(5)


def acl_auth_failures(srv):
    """Refused AUTH/HELLO so far: the counts of ACL LOG's `auth` entries (Redis 7.0 has no
    INFO field for them; the log keeps 128 entries, similar ones aggregated)."""
    n = 0
    for entry in srv.call("ACL", "LOG", "128") or []:
        kv = dict(zip(entry[0::2], entry[1::2]))
        if kv.get("reason") == "auth":
            n += int(kv.get("count", 0))
    return n


@scenario("F34", "credentials rotated: the lock user's password changed and its connections "
          "killed (ACL SETUSER resetpass, CLIENT KILL USER) for 1.5 x TTL, then restored",
          "auth_failed is typed; no retry storm; the password never appears in any output; "
          "holders lose at their deadline", "SF", ext=["R", "FO"],
          outcome=dict({m: "SAFE" for m in "SFR"},
                       FO="SAFE as S: the lock user rotated on every data node (the replicas "
                       "and sentinels connect as the default user, untouched: no failover, "
                       "asserted); a Sentinel client is told auth_failed as a single-node one "
                       "(a refused handshake fails the connection's pending calls)"))
def f34(run):
    pw, new = "CANARY-%d" % run.rng.randrange(10 ** 9), "ROTATED-%d" % run.rng.randrange(10 ** 9)
    run.setup(poll_ms=30, lock_auth="locker:%s@" % pw,
              lock_extra=["user locker on >%s ~* &* +@all" % pw])
    run.start_workers()
    run.sleep_ms(800)
    before = [acl_auth_failures(s) for s in run.lock_servers]
    t0 = mono_ns()
    for s in run.lock_servers:
        s.call("ACL", "SETUSER", "locker", "resetpass", ">" + new)
        s.call("CLIENT", "KILL", "USER", "locker")
    run.nemesis("acl-rotate", "all lock servers", "password changed, connections killed")
    window = 1.5 * run.ttl_ms
    run.sleep_ms(window)
    denied = [acl_auth_failures(s) - b for s, b in zip(run.lock_servers, before)]
    for s in run.lock_servers:
        s.call("ACL", "SETUSER", "locker", "resetpass", ">" + pw)
    t1 = mono_ns()
    run.nemesis("acl-restore", "all lock servers", "password back")
    run.wait_workers()
    run.fo_no_failover()
    run.probe("the rotation took effect (AUTH refused)", sum(denied) > 0, "%r" % denied)
    # No storm: per worker and server at most one AUTH per 20 ms (the failed-call pause).
    bound = len(run.workers) * int(window / 20 + 2)
    run.probe("no retry storm (at most one refused AUTH per worker per 20 ms)",
              max(denied) <= bound, "%r refused AUTHs in %d ms, bound %d" % (denied, window, bound))
    if run.mode != "R":
        told = [e for e in worker_events(run, "acquire") if t0 <= e["t"] <= t1
                and e["type"] in ("fail", "info") and "auth" in e.get("err", "").lower()]
        run.probe("a worker was told auth_failed", told, "%d acquisitions" % len(told))
    leaks = []
    for w in run.workers:
        for path in (w.log, w.log + ".err"):
            try:
                with open(path) as f:
                    text = f.read()
            except OSError:
                continue
            leaks += ["%s in %s" % (p, os.path.basename(path)) for p in (pw, new) if p in text]
    run.probe("no password in any worker output", not leaks, "; ".join(leaks))
    run.min_acquisitions(5)


@scenario("F35", "transient server states: MASTERDOWN for 1.5 x TTL (replica of a dead master, "
          "replica-serve-stale-data no), then LOADING for about 1 s (DEBUG RELOAD, slowed by "
          "key-load-delay)",
          "a typed error (readonly / server_busy), never 'not acquired', never a hold across "
          "them (a single-node client reports them at once; Sentinel and Cluster clients retry "
          "them within the wait: integration tests, with TRYAGAIN and CLUSTERDOWN)", "SF",
          ext=["R", "FO"],
          outcome=dict({m: "SAFE" for m in "SFR"},
                       FO="SAFE; LOADING only (a master made a replica is a role change the "
                       "sentinels revert): retried within the wait, no acquisition in "
                       "flight told an error, one granted after it, none contended; no "
                       "failover, asserted"))
# FO: a Sentinel client retries LOADING within its wait instead of reporting it, so the row's
# "told server_busy" becomes "no acquisition in flight told an error, one granted after the
# reload"; the MASTERDOWN phase is left out.
def f35(run):
    run.setup(poll_ms=30, lock_extra=["enable-debug-command local", "key-load-delay 20",
                                      "loading-process-events-interval-bytes 1024"])
    srv = run.lock_servers[0]
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        rd = RespReader(s)
        s.sendall(resp_encode(["SELECT", "1"]) + resp_encode(["DEBUG", "POPULATE", "20000"]))
        rd.read()
        rd.read()
    run.start_workers()
    run.sleep_ms(800)
    t0 = mono_ns()  # FO: the fault is the reload
    if run.mode != "FO":  # FO: a master made a replica is a role change the sentinels revert
        srv.call("CONFIG", "SET", "replica-serve-stale-data", "no")
        srv.call("REPLICAOF", "127.0.0.1", str(free_port()))
        t0 = mono_ns()
        run.nemesis("masterdown", srv.name, "replica of a dead master")
        r = srv.call("GET", "probe")
        run.probe("the server answers MASTERDOWN", str(r).startswith("MASTERDOWN"), repr(r))
        run.sleep_ms(1.5 * run.ttl_ms)
        srv.call("REPLICAOF", "NO", "ONE")
        run.nemesis("master", srv.name, "master again")
        run.sleep_ms(500)
    seen = []

    def probe_loading():
        end = time.monotonic() + 5
        while time.monotonic() < end and not seen:
            try:
                r = srv.call("PING", timeout=1)
                if str(r).startswith("LOADING"):
                    seen.append(mono_ns())
            except OSError:
                pass
            time.sleep(0.02)
    import threading
    th = threading.Thread(target=probe_loading)
    th.start()
    t = time.monotonic()
    run.nemesis("loading", srv.name, "DEBUG RELOAD")
    r = srv.call("DEBUG", "RELOAD", timeout=30)
    took = time.monotonic() - t
    th.join(10)
    t_loaded = mono_ns()
    run.nemesis("loaded", srv.name, "%.0f ms" % (took * 1000))
    run.probe("the server answered LOADING during the reload", seen and r == "OK",
              "reload %r in %.0f ms" % (r, took * 1000))
    t1 = mono_ns()
    run.wait_workers()
    if run.mode == "FO":  # a Sentinel client retries LOADING within its wait (no error)
        run.fo_no_failover()
        met = [e for e in read_jsonl(run.proxy.fwd_log) if e["cmd"] == "SET"
               and seen and seen[0] <= e["t"] <= t_loaded]
        run.probe("lock requests reached the master while it answered LOADING", met,
                  "%d SETs forwarded" % len(met))
        # Every acquisition in flight while it answered LOADING (its polls met it) is retried
        # within its wait: none is told an error, and one is granted after the reload.
        inv = {(e["w"], e["op"]): e["t"] for e in worker_events(run, "acquire")
               if e["type"] == "invoke"}
        span = [e for e in worker_events(run, "acquire") if e["type"] != "invoke" and seen
                and inv.get((e["w"], e["op"]), t_loaded + 1) <= t_loaded and e["t"] >= seen[0]]
        errs = ["w%d op %d: %s" % (e["w"], e["op"], e["err"]) for e in span if e.get("err")]
        after = sum(1 for e in span if e["type"] == "ok" and e["t"] >= t_loaded)
        run.probe("acquisitions in flight during LOADING: none told an error, one granted after",
                  span and not errs and after, "%d in flight, %d granted after; %s" % (
                      len(span), after, "; ".join(errs[:3]) or "no error"))
        none_contended(run, t0, t1)
    elif run.mode != "R":  # Redlock counts such a master as a failed vote
        busy = [e for e in worker_events(run, "acquire") if t0 <= e["t"] <= t1
                and "busy" in e.get("err", "")]
        run.probe("a worker was told server_busy (LOADING)", busy, "%d acquisitions" % len(busy))
        none_contended(run, t0, t1)
    run.min_acquisitions(5)


@scenario("F36", "fork() while holding: 30 % of holders fork a child that makes its own client "
          "and contends for the same lock",
          "the child's new client has new tokens and a new owner id (a copied one would re-enter "
          "or release the parent's hold); the child leaves the parent's copied hold alone; no "
          "overlap", "S", ext=["F", "R", "FO"],
          outcome={m: "SAFE" for m in ["S", "F", "R", "FO"]})
def f36(run):
    run.setup(hold_ms=200, worker_extra={w: ["--fork-pct", "30"] for w in (1, 2, 3)})
    run.start_workers()
    run.wait_workers()
    kids = [e for e in worker_events(run, "acquire") if e["w"] > 100 and e["type"] == "ok"]
    run.probe("fork children acquired the lock", len(kids) >= 2, "%d acquisitions" % len(kids))
    bad = [ln.strip() for w in run.workers for ln in open(w.log + ".err") if "fork child" in ln]
    run.probe("every fork child exited cleanly", not bad, "; ".join(bad[:3]))
    run.min_acquisitions(5)


# ---------------------------------------------------------------------------------------------
# network namespaces and nftables (F12-F14): the run moves itself (this process, single-
# threaded at that point, and so every process it starts afterwards) into a network namespace
# of its own; its loopback is then private, and nft rules there touch nobody else's traffic.


class Skipped(Exception):
    """The scenario cannot run here (reason in the message): recorded, exit code 77."""


NETNS_PREFIX = "dlkf-"  # dlock fault: <prefix><creator pid>-<random>
CLONE_NEWNET = 0x40000000


def _setns(fd):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _ip(*args):
    return subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=10)


def sweep_netns():
    """Deletes namespaces of earlier runs whose creator is gone (a run killed by its timeout)."""
    p = _ip("netns", "list")
    for line in p.stdout.decode(errors="replace").splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(NETNS_PREFIX):
            continue
        try:
            pid = int(name[len(NETNS_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if not os.path.exists("/proc/%d" % pid):
            _ip("netns", "del", name)


class Netns:
    """This process's own network namespace with one nft table (`inet dlkf`, chain `out` on the
    output hook); left and deleted by leave() (Run.close, on every exit path)."""

    def __init__(self, run):
        self.run, self.name, self.home = run, None, None

    def enter(self):
        if not shutil.which("ip") or not shutil.which("nft"):
            raise Skipped("needs ip (iproute2) and nft (nftables)")
        if threading_active():
            raise HarnessError("netns must be entered before any thread starts")
        sweep_netns()
        name = "%s%d-%04x" % (NETNS_PREFIX, os.getpid(), random.getrandbits(16))
        p = _ip("netns", "add", name)
        if p.returncode != 0:
            raise Skipped("ip netns add not permitted: %s" % p.stdout.decode().strip())
        self.name = name
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            fd = os.open("/run/netns/" + name, os.O_RDONLY)
            try:
                _setns(fd)
            finally:
                os.close(fd)
        except OSError as e:
            self.leave()
            raise Skipped("setns into %s not permitted: %s" % (name, e))
        self.run.nemesis("netns", name, "entered")
        for cmd in (["ip", "link", "set", "lo", "up"], ["nft", "add", "table", "inet", "dlkf"],
                    ["nft", "add chain inet dlkf out { type filter hook output priority 0 ; "
                     "policy accept ; }"]):
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
            if p.returncode != 0:
                self.leave()
                raise Skipped("%s failed in the namespace: %s"
                              % (" ".join(cmd[:3]), p.stdout.decode().strip()))

    def rules(self, *rules):
        """Adds rules to the chain (each with a counter), logged as nemesis events."""
        for r in rules:
            p = subprocess.run(["nft", "add rule inet dlkf out %s counter drop" % r],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
            if p.returncode != 0:
                raise HarnessError("nft rule %r: %s" % (r, p.stdout.decode().strip()))
            self.run.nemesis("nft-drop", self.name, r)

    def heal(self):
        """Removes every rule; returns how many packets they dropped."""
        p = subprocess.run(["nft", "list", "chain", "inet", "dlkf", "out"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        dropped = 0
        for w in p.stdout.decode().split("packets ")[1:]:
            dropped += int(w.split()[0])
        subprocess.run(["nft", "flush", "chain", "inet", "dlkf", "out"], timeout=10)
        self.run.nemesis("nft-heal", self.name, "%d packets dropped" % dropped)
        return dropped

    def leave(self):
        if self.home is not None:
            try:
                _setns(self.home)
            except OSError:
                pass
            os.close(self.home)
            self.home = None
        if self.name:
            _ip("netns", "del", self.name)  # its rules die with it
            self.name = None


def threading_active():
    import threading
    return threading.active_count() > 1


def netns_setup(run, **kw):
    """Enters a fresh namespace, then sets the run up inside it. The scenarios let their
    workers run about 4 s past the heal: a request the kernel retransmits after the heal
    (backoff up to 3.2 s after a 3 s cut) must land, and expire, before the orphan scan."""
    run.netns = Netns(run)
    run.netns.enter()
    run.setup(**kw)


@scenario("F12", "30 % packet loss (nft numgen random) both ways on every lock server's port for "
          "3 s, in the run's own network namespace",
          "TCP retransmits stretch calls: validity shrinks, a grant read after its validity is "
          "no hold; every call bounded", "SR", ext=["F", "FO"],
          outcome=dict({m: "SAFE" for m in "SFR"},
                       FO="SAFE: the loss is on every data node's own port, so the replicas' "
                       "and sentinels' traffic meets it too; a failover may follow (reported): "
                       + FO_FAILOVER))
def f12(run):
    netns_setup(run, wait_ms=2000, duration_ms=7500)
    run.start_workers()
    run.sleep_ms(700)
    for s in run.lock_servers:  # FO: every data node, behind its proxy route
        run.netns.rules("tcp dport %d numgen random mod 100 < 30" % s.port,
                        "tcp sport %d numgen random mod 100 < 30" % s.port)
    run.sleep_ms(3000)
    dropped = run.netns.heal()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    run.fo_master_note()  # FO: whether the loss failed the master over (both SAFE)
    # wait + command timeout + reconnect + slack, as F11; a SYN lost costs 1 s more
    run.bounded_latency(2000 + 500 + 500 + 1000 + 700)
    run.min_acquisitions(5)


F14_GID = 4114  # F14 FO: worker 1's group, matched by the nft rules


@scenario("F14", "the holder partitioned from its server(s) (nft drop both ways on its routes) for "
          "3 s, in the run's own network namespace",
          "the holder stops at its deadline (a careful holder does not write); the others get "
          "the lock after it expires; every call bounded", ["S", "SW"],
          ext=["F", "R", "FO", "FW", "RW"],
          outcome=dict({m: "SAFE, LIVE: another worker acquires during the 3 s cut, after TTL"
                        for m in "SFR"},
                       FO="SAFE, LIVE as S (worker 1 alone cut from every data node; the "
                       "sentinels still see the master: no failover, asserted)",
                       **{m: WATCHDOG_SAFE for m in ["SW", "FW", "RW"]}))
def f14(run):
    netns_setup(run, wait_ms=2000, hold_ms=600, poll_ms=30, duration_ms=8000)
    # FO: a data node's proxy route is everyone's (fo_setup), so a cut of its port would cut
    # the replicas and sentinels too (a failover: F11 FO). Worker 1 runs in a group of its
    # own instead, and only its packets to the data nodes' routes are dropped (nft sees the
    # sending socket's group on the output hook; with its requests and acknowledgements gone,
    # nothing comes back to it but retransmissions of replies sent before the cut).
    if run.fo_proxied():
        run.workers[0].gid = F14_GID
    # Worker 1 starts alone and is cut while it holds its first lock; the others follow. (Had
    # all three started together, worker 1 could lose the race for seconds, and a cut that
    # begins late in the workers' 8 s leaves them no time to acquire during it or to outlive a
    # request retransmitted after the heal.)
    cut = {}
    t = mono_ns()

    def arm(_w1):
        run.wait_for(lambda: run.acquired_since(t, workers=[1]), 8, "worker 1 holding")
        ports = [run.proxy.ports[run.route(1, i)] for i in range(len(run.lock_servers))]
        for p in ports:
            if run.fo_proxied():
                run.netns.rules("meta skgid %d tcp dport %d" % (F14_GID, p))
            else:
                run.netns.rules("tcp dport %d" % p, "tcp sport %d" % p)
        cut["t0"] = mono_ns()

    run.start_workers(arm=arm)
    t0 = cut["t0"]
    run.sleep_ms(max(0, 3000 - (mono_ns() - t0) / 1_000_000))
    dropped = run.netns.heal()
    t1 = mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    run.fo_no_failover()
    # The others start after the cut, so any grant of theirs before the heal came while worker
    # 1 was cut off (MUTEX judges whether it came too early). Not from t0 + TTL: worker 1's key
    # can expire before that (it was granted before t0), and a watchdog hold that takes it then
    # lasts past the heal, leaving nothing inside a window that starts at t0 + TTL.
    others = [e for w in run.workers[1:] for e in w.events() if e.get("f") == "acquire"
              and e["type"] == "ok" and t0 <= e["t"] <= t1]
    run.probe("others acquired while the holder was cut off", others,
              "%d acquisitions" % len(others))
    run.bounded_latency(2000 + 500 + 500 + 1000 + 700)
    run.min_acquisitions(5)
    # SW/FW/RW: worker 1 was cut right after its acquisition and holds for longer than a
    # lease, so its renewals fail and it must be told before its deadline (+ tolerance).
    run.watchdog_probes(lost_by=(1, t0))


def cut_masters(run, n):
    """F13 on n Redlock masters: worker 1 cut (nft) from 1 master, then 2, ... for 2.5 s each,
    up to one more than a quorum allows; it must still acquire while a quorum is reachable,
    never after."""
    quorum = n // 2 + 1
    netns_setup(run, wait_ms=1000, poll_ms=30, duration_ms=4500 + 2500 * (n - quorum + 1),
                masters=n)
    run.start_workers()
    run.sleep_ms(500)
    ports = [run.proxy.ports[run.route(1, i)] for i in range(len(run.lock_servers))]
    windows = []
    for k in range(1, n - quorum + 2):
        for p in ports[len(windows):k]:
            run.netns.rules("tcp dport %d" % p, "tcp sport %d" % p)
        t0 = mono_ns()
        run.sleep_ms(2500)
        windows.append((t0, mono_ns()))
    dropped = run.netns.heal()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    inv = {(e["w"], e["op"]): e["t"] for e in run.workers[0].events() if e["type"] == "invoke"}
    oks = [(inv.get((e["w"], e["op"]), 0), e["t"]) for e in run.workers[0].events()
           if e.get("f") == "acquire" and e["type"] == "ok"]
    for k, (b, e) in enumerate(windows, 1):
        got = [o for o in oks if b <= o[0] and o[1] <= e]
        if k <= n - quorum:
            run.probe("worker 1 still acquires with %d of %d masters cut" % (k, n), got,
                      "%d" % len(got))
        else:
            run.probe("worker 1 never acquires with %d of %d masters cut" % (k, n), not got,
                      "%d" % len(got))
    run.min_acquisitions(5)


@scenario("F13", "Redlock client cut (nft) from 1 of 3 masters for 2.5 s, then from 2 of 3 for "
          "2.5 s, in the run's own network namespace",
          "success iff a quorum is reachable: it still acquires with 1 cut, never with 2 cut",
          "R", outcome={"R": "SAFE, LIVE with 1 cut"})
def f13(run):
    cut_masters(run, 3)


@scenario("F13N5", "F13 on 5 Redlock masters: the client cut (nft) from 1, 2, then 3 of them, "
          "2.5 s each, in the run's own network namespace",
          "success iff a quorum (3 of 5) is reachable: it still acquires with 1 and 2 cut, "
          "never with 3 cut", "", ext=["R"], outcome={"R": "SAFE, LIVE with 1 and 2 cut"})
def f13n5(run):
    cut_masters(run, 5)


def kleppmann1(run, n):
    """F17 on n Redlock masters: worker 1, cut from the masters after the first quorum, holds
    that quorum; the last master of it has its clock stepped past the TTL; worker 2, cut from
    the masters before it, then acquires it and the rest. Both believe at once."""
    quorum = n // 2 + 1
    shared = quorum - 1
    run.netns = Netns(run)
    run.netns.enter()
    run.setup(workers=2, ttl_ms=2000, hold_ms=1500, poll_ms=30, lock_skew={shared: "0 1.0"},
              duration_ms=8000, masters=n,
              worker_extra={w: ["--expire-pct", "100"] for w in (1, 2)})
    for w, cut in ((1, range(quorum, n)), (2, range(0, shared))):
        for i in cut:
            p = run.proxy.ports[run.route(w, i)]
            run.netns.rules("tcp dport %d" % p, "tcp sport %d" % p)
    t = mono_ns()
    run.start_workers(arm=lambda _: run.wait_for(lambda: run.acquired_since(t, workers=[1]), 8,
                                                 "worker 1 holding the first quorum"),
                      others_after_ms=0)
    run.lock_servers[shared].set_skew(3000)
    run.wait_for(lambda: run.acquired_since(t, workers=[2]), 8, "worker 2 holding the last quorum")
    dropped = run.netns.heal()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()


@scenario("F17", "Kleppmann #1 composite on 3 Redlock masters A, B, C: worker 1 cut from C "
          "(nft) acquires A and B; B's clock is stepped past the TTL; worker 2, cut from A, "
          "acquires B and C",
          "two workers believe they hold the lock at once: the checker must see it", "R",
          expect={"R": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"R": "EXPECT-VIOL"})
def f17(run):
    kleppmann1(run, 3)


@scenario("F17N5", "F17 on 5 Redlock masters A-E: worker 1 cut from D and E acquires A, B, C; C's "
          "clock is stepped past the TTL; worker 2, cut from A and B, acquires C, D, E",
          "two workers believe they hold the lock at once: the checker must see it", "",
          ext=["R"],
          expect={"R": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"R": "EXPECT-VIOL"})
def f17n5(run):
    kleppmann1(run, 5)


# ---------------------------------------------------------------------------------------------
# mode FO: a Sentinel-managed master (1 master, 2 replicas, 3 sentinels, as the C++ fixture
# tests/support/redis_fixture.cpp builds it); the workers use a redis-sentinel:// URL.
#
# The fault proxy stands in front of every data node (routes l0, l1, l2), and the topology
# announces the proxies' addresses: `sentinel monitor` names the master's route, every node
# has replica-announce-ip/-port set to its own route (the master too, for when it is
# demoted). So everything Sentinel hands out (the master, after a failover the promoted
# replica) is a proxy address, and every connection to a data node goes through its proxy:
# the workers', the replicas' replication links and the sentinels' own (sentinels learn the
# replicas from the master's INFO, which lists the announced addresses). A fault on a node's
# route therefore hits that node for everyone: a blackhole of l0 is a real partition of the
# master, which fails over after down-after-milliseconds (1 s), as in production. Only the
# sentinels themselves are reached directly (the clients' discovery and +switch-master).
# F27 (split) keeps direct links: it cuts by source address with nft instead.


class Sentinel(Redis):
    def __init__(self, run, name, master_port, extra=None):
        super().__init__(run, name, extra=extra)
        self.master_port = master_port
        self.args = ["--sentinel"]

    def conf(self):
        return "\n".join([
            "port %d" % self.port, "bind 127.0.0.1", "daemonize no", "dir %s" % self.dir,
            "logfile %s" % os.path.join(self.dir, "sentinel.log"),
            "sentinel monitor mymaster 127.0.0.1 %d 2" % self.master_port,
            "sentinel down-after-milliseconds mymaster 1000",
            "sentinel failover-timeout mymaster 3000",
            "sentinel parallel-syncs mymaster 1"] + self.extra) + "\n"

    def master_port_now(self):
        r = self.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
        return int(r[1]) if isinstance(r, list) and len(r) == 2 else None


def fo_setup(run, query="", lock_extra=None, split=False, persistence="none",
             resource_via_proxy=False, workers=3, lock_skew=None, lock_auth="", **kw):
    """Master lock0, replicas lock1 and lock2, sentinels s0-s2, each data node behind its
    proxy route (above); ready when both replicas are linked and every sentinel sees 2
    replicas and 2 other sentinels. With `split`, no node proxies: replicas and sentinels
    connect from 127.0.0.2 (announcing 127.0.0.1), so that nft can cut the master from them
    and not from the workers (F27); worker 1 then reaches the sentinels through proxy routes
    w1-s0..2. `persistence` applies to every data node; with resource_via_proxy the
    resource server gets its per-worker routes w1-res.. on the same proxy. `lock_skew` as in
    Run.setup: node i's clock shim (F15b, F16, F18 move the master's, lock0). `lock_auth`
    ("user:password@") goes into the workers' URL, for the data nodes only (F34: the replicas
    and sentinels connect as the default user)."""
    sync = ["repl-diskless-sync yes", "repl-diskless-sync-delay 0"] + (lock_extra or [])
    src = ["bind-source-addr 127.0.0.2"] if split else []
    nodes = [Redis(run, "lock%d" % i, persistence=persistence, skew=(lock_skew or {}).get(i))
             for i in range(3)]
    if not split:
        routes = {"l%d" % i: n.port for i, n in enumerate(nodes)}
        if resource_via_proxy:
            run.resource = Redis(run, "resource", persistence="aof")
            routes.update({"w%d-res" % w: run.resource.port for w in range(1, workers + 1)})
        run.proxy = Proxy(run, routes)
    for i, n in enumerate(nodes):
        n.extra = sync + src
        if split:
            n.extra += ["replica-announce-ip 127.0.0.1"] if i else []
        else:
            n.extra += ["replica-announce-ip 127.0.0.1",
                        "replica-announce-port %d" % run.proxy.ports["l%d" % i]]
        if i:
            n.extra += ["replicaof 127.0.0.1 %d" % run.announced(nodes[0])]
        n.start()
        run.lock_servers.append(n)
    master_port = run.announced(nodes[0])
    for i in range(3):
        s = Sentinel(run, "s%d" % i, master_port,
                     extra=src + ["sentinel announce-ip 127.0.0.1"] if split else None)
        s.start()
        run.extra_servers.append(s)

    def ready():
        for r in run.lock_servers[1:]:
            if info_field(r, "replication", "master_link_status") != "up":
                return False
        for s in run.extra_servers:
            m = s.call("SENTINEL", "MASTER", "mymaster")
            kv = dict(zip(m[0::2], m[1::2])) if isinstance(m, list) else {}
            if kv.get("num-slaves") != "2" or kv.get("num-other-sentinels") != "2":
                return False
        return True
    run.wait_for(ready, 30, "the sentinel group")
    if not split:  # the probe of the wiring: Sentinel names proxy addresses only
        names = set()
        for s in run.extra_servers:
            names.add(s.master_port_now())
            for r in s.call("SENTINEL", "REPLICAS", "mymaster") or []:
                names.add(int(dict(zip(r[0::2], r[1::2])).get("port", 0)))
        run.probe("Sentinel names only the nodes' proxy routes",
                  names == {run.proxy.ports["l%d" % i] for i in range(3)}, "%r" % sorted(names))

    def url(ports):
        return "redis-sentinel://%s%s/mymaster%s" % (
            lock_auth, ",".join("127.0.0.1:%d" % p for p in ports), "?" + query if query else "")
    if split:
        run.proxy = Proxy(run, {"w1-s%d" % i: s.port for i, s in enumerate(run.extra_servers)})
        kw["worker_extra"] = {1: ["--url", url(run.proxy.ports["w1-s%d" % i]
                                              for i in range(3))]}
    run.setup(lock_url=url(s.port for s in run.extra_servers), workers=workers,
              resource_via_proxy=resource_via_proxy, **kw)


def failover(run, victim_after=None):
    """Stops both replicas, waits for a fresh acquisition (a grant no replica has: the master
    drops its replica links first, else the stopped replicas would find the grant in their
    socket buffers), kills the master, resumes the replicas and waits until the sentinels
    name a new master. With victim_after(t), that waits instead and the links stay."""
    master, replicas = run.lock_servers[0], run.lock_servers[1:]
    for r in replicas:
        r.signal(signal.SIGSTOP)
    run.nemesis("sigstop", "lock1,lock2", "replicas")
    t = mono_ns()
    if victim_after:
        victim_after(t)
    else:
        master.call("CLIENT", "KILL", "TYPE", "replica")
        run.nemesis("client-kill", master.name, "replica links")
        t = mono_ns()
        run.wait_for(lambda: run.acquired_since(t), 12, "an acquisition the replicas miss")
    master.kill9()
    run.nemesis("kill-9", master.name, "master")
    for r in replicas:
        r.signal(signal.SIGCONT)
    run.nemesis("sigcont", "lock1,lock2", "replicas")
    s0 = run.extra_servers[0]
    port = run.wait_for(lambda: (lambda p: p if p and p != run.announced(master) else None)(
        s0.master_port_now()), 30, "the sentinels' failover")
    run.nemesis("failover", "sentinels", "new master on port %d" % port)


# Holders keep their lease to its end (expire-pct 100): a lost lease is believed for a whole
# TTL, longer than a failover here (about 2.5 s).
FO_KW = dict(ttl_ms=4000, hold_ms=300, wait_ms=10000, duration_ms=13000,
             worker_extra={w: ["--expire-pct", "100"] for w in (1, 2, 3)})


@scenario("F25", "Sentinel failover with an unreplicated lock (replicas stopped, fresh grant, "
          "master kill -9), lock_delay=0",
          "the new master does not know the lock: a second holder overlaps (why Redis docs "
          "call failover unsafe for locks)", "", ext=["FO"],
          expect={"FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any"}},
          outcome={"FO": "EXPECT-VIOL"}, timeout=110)
def f25(run):
    fo_setup(run, query="lock_delay=0", **FO_KW)
    run.start_workers()
    run.sleep_ms(1000)
    failover(run)
    run.wait_workers()


@scenario("F25L", "F25 with dlock's default lock-delay (no new grant for one lease after the "
          "client sees the master change)",
          "the lock-delay outlasts the lost lease: no overlap in this schedule", "FO",
          expect={"FO": {"ORPHANS": "any"}}, outcome={"FO": "SAFE (LIVE reduced by the delay)"},
          timeout=110)
def f25l(run):
    fo_setup(run, **FO_KW)
    run.start_workers()
    run.sleep_ms(1000)
    failover(run)
    run.wait_workers()
    run.min_acquisitions(3)


@scenario("F26", "F25 with min-replicas-to-write 1 and wait=1 (WAIT after every acquisition), "
          "lock_delay=0",
          "with the replicas stopped an acquisition is undone (not_replicated) or refused "
          "(NOREPLICAS): no hold the failover can lose", "FO",
          expect={"FO": {"ORPHANS": "any"}}, outcome={"FO": "SAFE; LIVE reduced"}, timeout=110)
def f26(run):
    # Short holds, released: the lock is taken again right after the replicas stop.
    fo_setup(run, query="lock_delay=0&wait=1:200", ttl_ms=4000, hold_ms=300, wait_ms=10000,
             duration_ms=9500,
             lock_extra=["min-replicas-to-write 1", "min-replicas-max-lag 2"])
    run.start_workers()
    run.sleep_ms(1000)

    def refused(t):
        run.wait_for(lambda: [e for e in worker_events(run, "acquire") if e["t"] >= t and
                              "replica" in e.get("err", "").lower()], 12,
                     "an acquisition undone for want of a replica")
        # past min-replicas-max-lag (whole seconds, checked once a second)
        r = run.wait_for(lambda: (lambda x: x if str(x).startswith("NOREPLICAS") else None)(
            run.lock_servers[0].call("SET", "probe", "x")), 8, "NOREPLICAS")
        run.nemesis("noreplicas", "lock0", r)
    failover(run, victim_after=refused)
    run.wait_workers()
    held = [e for e in worker_events(run, "acquire") if e["type"] == "ok"]
    run.probe("acquisitions before and after the failover", len(held) >= 3, "%d" % len(held))



@scenario("F27", "split brain: the Sentinel master isolated (nft) from its replicas and "
          "sentinels, with worker 1, which is also cut from the sentinels; the others follow "
          "the failover", "two masters grant the lock at once: the checker must see it", "FO",
          expect={"FO": {"MUTEX": "violated", "RESOURCE": "any", "USE_WITHIN_HOLD": "any",
                         "ORPHANS": "any"}},
          outcome={"FO": "EXPECT-VIOL"}, timeout=110)
def f27(run):
    split_brain(run)


def split_brain(run, lag_s=None):
    """F27's split; with lag_s, every node has min-replicas-to-write 1 and min-replicas-max-lag
    lag_s, and the old master's refusal (NOREPLICAS, to a direct SET from this host, which the
    cut spares) is timed from the cut: returns (t_cut, t_refused, t_heal)."""
    run.netns = Netns(run)
    run.netns.enter()
    extra = ["min-replicas-to-write 1", "min-replicas-max-lag %d" % lag_s] if lag_s else None
    fo_setup(run, split=True, poll_ms=30, duration_ms=12000, lock_extra=extra)
    run.start_workers()
    run.sleep_ms(1000)
    master = run.lock_servers[0]
    run.netns.rules("ip saddr 127.0.0.2 tcp dport %d" % master.port,
                    "ip daddr 127.0.0.2 tcp sport %d" % master.port)
    for i in range(3):
        p = run.proxy.ports["w1-s%d" % i]
        run.netns.rules("tcp dport %d" % p, "tcp sport %d" % p)
    t_cut = mono_ns()
    run.nemesis("split", "lock0 + w1", "cut from replicas and sentinels")
    t_refused = None
    if lag_s:
        r = run.wait_for(lambda: (lambda x: x if str(x).startswith("NOREPLICAS") else None)(
            master.call("SET", "probe", "x")), lag_s + 5, "NOREPLICAS on the old master")
        t_refused = mono_ns()
        run.nemesis("noreplicas", master.name, r)
    s0 = run.extra_servers[0]
    port = run.wait_for(lambda: (lambda p: p if p and p != run.announced(master) else None)(
        s0.master_port_now()), 30, "the sentinels' failover")
    run.nemesis("failover", "sentinels", "new master on port %d" % port)
    t = mono_ns()
    run.wait_for(lambda: run.acquired_since(t, workers=[2, 3]), 10, "a grant by the new master")
    run.sleep_ms(2000)
    dropped = run.netns.heal()
    t_heal = mono_ns()
    run.probe("packets were dropped", dropped > 0, "%d packets" % dropped)
    run.wait_workers()
    return t_cut, t_refused, t_heal


F27W_LAG_S = 2


@scenario("F27w", "F27 with min-replicas-to-write 1 and min-replicas-max-lag 2 on every node: "
          "the isolated master's window of grants, measured",
          "the old master refuses writes (NOREPLICAS) within the lag + 2 s of the cut (a "
          "replica acks once a second, the lag is counted in whole seconds, and the count of "
          "good replicas is refreshed once a second): worker 1's grants there end with "
          "that window; whether the window overlaps the new master's first grants depends on "
          "how fast the failover is (MUTEX reported, not asserted)", "", ext=["FO"],
          expect={"FO": {"MUTEX": "any", "RESOURCE": "any", "USE_WITHIN_HOLD": "any",
                         "ORPHANS": "any"}},
          outcome={"FO": "the split-brain window is bounded by min-replicas-max-lag + 2 s "
                   "(asserted); MUTEX reported"}, timeout=110)
def f27w(run):
    t_cut, t_refused, t_heal = split_brain(run, lag_s=F27W_LAG_S)
    window_ms = (t_refused - t_cut) / 1e6
    # The last ack came up to 1 s before the cut; the replica is late once the whole seconds
    # since it exceed the lag (at most lag + 1 s after it); the master recounts its good
    # replicas once a second (+1 s); + 500 ms for this host's polling and the SET.
    bound_ms = (F27W_LAG_S + 2) * 1000 + 500
    run.probe("the old master refused writes within %d ms of the cut" % bound_ms,
              window_ms <= bound_ms, "NOREPLICAS %.0f ms after the cut" % window_ms)
    w1 = [e["t"] for e in worker_events(run, "acquire", workers=[1]) if e["type"] == "ok"]
    inside = [t for t in w1 if t_cut <= t <= t_refused]
    # 100 ms: a grant the old master applied just before refusing reaches worker 1 after it
    late = [t for t in w1 if t_refused + 100_000_000 < t < t_heal]
    run.probe("worker 1 acquired from the isolated master inside the window", inside,
              "%d grants" % len(inside))
    run.probe("worker 1 acquired nothing after the window, until the heal", not late,
              "%d grants" % len(late))


# Cluster (F28): 3 masters without replicas (resharding needs no failover), made by
# redis-cli --cluster create as the C++ fixture does; workers take the reentrant lock with
# its fencing token through a redis-cluster:// URL.


def cluster_setup(run, replicas=0, query="", owner_first=False, **kw):
    """3 masters (lock0-lock2) and, with `replicas`, that many replicas of each (lock3..; which
    master a replica follows is redis-cli's choice: cluster_replicas_of() asks the nodes).
    The workers' URL names the masters as seeds; with owner_first the lock's master first (the
    seed a client loads its first slot map from and keeps its map connection on)."""
    nodes = []
    for i in range(3 * (1 + replicas)):
        n = Redis(run, "lock%d" % i, extra=["cluster-enabled yes",
                                            "cluster-config-file nodes.conf",
                                            "cluster-node-timeout 2000",
                                            "cluster-require-full-coverage yes"] +
                  (["repl-diskless-sync yes", "repl-diskless-sync-delay 0"] if replicas else []),
                  below=55536)
        n.start()
        run.lock_servers.append(n)
        nodes.append(n)
    cli = shutil.which("redis-cli")
    if not cli:
        raise Skipped("needs redis-cli (redis-tools) to create the cluster")
    p = subprocess.run([cli, "--cluster", "create"] + ["127.0.0.1:%d" % n.port for n in nodes] +
                       ["--cluster-replicas", str(replicas), "--cluster-yes"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    if p.returncode != 0:
        raise HarnessError("redis-cli --cluster create: %s" % p.stdout.decode()[-500:])
    known = "cluster_known_nodes:%d" % len(nodes)
    run.wait_for(lambda: all("cluster_state:ok" in str(n.call("CLUSTER", "INFO")) and
                             known in str(n.call("CLUSTER", "INFO")) for n in nodes), 30,
                 "cluster_state:ok")
    if replicas:
        run.wait_for(lambda: all(info_field(n, "replication", "master_link_status") == "up"
                                 for n in nodes[3:]), 30, "the replicas' links")
    seeds = nodes[:3]
    if owner_first:
        owner = cluster_owner(run, nodes[0].call("CLUSTER", "KEYSLOT", run.lock))
        seeds = [owner] + [n for n in seeds if n is not owner]
    url = "redis-cluster://" + ",".join("127.0.0.1:%d" % n.port for n in seeds)
    run.setup(lock_url=url + ("?" + query if query else ""), lock_mode="F", resource="fenced",
              **kw)


def cluster_owner(run, slot):
    """The lock server that is the master serving `slot` now (in its own view)."""
    return next(n for n in run.lock_servers
                if any("myself" in line and "master" in line and slot_in(line, slot)
                       for line in str(n.call("CLUSTER", "NODES")).splitlines()))


def cluster_replicas_of(run, master):
    """The lock servers that replicate `master` (by its node id)."""
    mid = master.call("CLUSTER", "MYID")
    return [n for n in run.lock_servers
            if n is not master and any("myself" in line and mid in line.split()[3:4]
                                       for line in str(n.call("CLUSTER", "NODES")).splitlines())]


def migrate_slot(run, slot, src, dst, pause_ms=300):
    """Moves `slot` with its keys from src to dst (IMPORTING, MIGRATING, a pause in which
    clients meet ASK, MIGRATE of every key with its TTL, SETSLOT NODE on every master)."""
    sid, did = src.call("CLUSTER", "MYID"), dst.call("CLUSTER", "MYID")
    dst.call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", sid)
    src.call("CLUSTER", "SETSLOT", str(slot), "MIGRATING", did)
    run.nemesis("slot-migrating", "%s->%s" % (src.name, dst.name), slot)
    run.sleep_ms(pause_ms)
    moved = 0
    for _ in range(100):
        keys = src.call("CLUSTER", "GETKEYSINSLOT", str(slot), "100") or []
        if not keys:
            break
        r = src.call("MIGRATE", "127.0.0.1", str(dst.port), "", "0", "5000", "KEYS", *keys)
        if isinstance(r, RedisReplyError) and not r.startswith("NOKEY"):
            raise HarnessError("MIGRATE: %s" % r)
        moved += len(keys)
    for n in run.lock_servers:
        n.call("CLUSTER", "SETSLOT", str(slot), "NODE", did)
    run.nemesis("slot-moved", "%s->%s" % (src.name, dst.name), "slot %d, %d keys" % (slot, moved))
    return moved


@scenario("F28", "Cluster resharding while the lock is held: its slot (lock hash and fence "
          "counter) migrated to another master and back, with a 300 ms ASK window each way",
          "MOVED/ASK followed, TTL and fence counter move with the slot: no overlap, fences "
          "increase, the fenced resource stays consistent", "FO",
          outcome={"FO": "SAFE"}, timeout=110)
def f28(run):
    cluster_setup(run, poll_ms=30, ttl_ms=2000, hold_ms=600)
    slot = run.lock_servers[0].call("CLUSTER", "KEYSLOT", run.lock)
    owner = next(n for n in run.lock_servers
                 if any("myself" in line and slot_in(line, slot)
                        for line in str(n.call("CLUSTER", "NODES")).splitlines()))
    other = next(n for n in run.lock_servers if n is not owner)
    run.start_workers()
    run.sleep_ms(800)
    for src, dst in ((owner, other), (other, owner)):
        t = mono_ns()
        run.wait_for(lambda: run.acquired_since(t), 8, "an acquisition")
        moved = migrate_slot(run, slot, src, dst)
        run.probe("the held lock's keys moved %s -> %s" % (src.name, dst.name), moved >= 1,
                  "%d keys" % moved)
        run.sleep_ms(1500)
    run.wait_workers()
    run.min_acquisitions(5)


# F25 on a Cluster: a lease of 10 s held whole, so that the promoted replica (about 4 s after
# the kill: cluster-node-timeout 2 s, then the replica's election) can grant the lock while
# the lost holder still believes it.
F25C_KW = dict(FO_KW, ttl_ms=10000, wait_ms=15000, duration_ms=30000)


@scenario("F25C", "F25 on a Cluster: 3 masters with a replica each; the lock's replica stopped, "
          "a fresh grant it misses, its master kill -9, the replica promoted, lock_delay=0",
          "the promoted replica does not know the lock: a second holder overlaps (as F25 on "
          "Sentinel)", "", ext=["FO"],
          expect={"FO": {"MUTEX": "violated", "FENCE": "any", "RESOURCE": "any",
                         "USE_WITHIN_HOLD": "any"}},
          outcome={"FO": "EXPECT-VIOL"}, timeout=150)
def f25c(run):
    cluster_setup(run, replicas=1, query="lock_delay=0", owner_first=True, **F25C_KW)
    slot = run.lock_servers[0].call("CLUSTER", "KEYSLOT", run.lock)
    master = cluster_owner(run, slot)
    replicas = cluster_replicas_of(run, master)
    run.probe("the lock's master has a replica", replicas,
              "%s: %s" % (master.name, ",".join(r.name for r in replicas)))
    if not replicas:
        raise HarnessError("no replica of %s" % master.name)
    names = ",".join(r.name for r in replicas)
    run.start_workers()
    run.sleep_ms(1000)
    for r in replicas:
        r.signal(signal.SIGSTOP)
    run.nemesis("sigstop", names, "the lock's replica")
    # The master drops its replica links: else the grant would wait in the socket buffers.
    master.call("CLIENT", "KILL", "TYPE", "replica")
    run.nemesis("client-kill", master.name, "replica links")
    t = mono_ns()
    run.wait_for(lambda: run.acquired_since(t), 14, "an acquisition the replica misses")
    master.kill9()
    t_kill = mono_ns()
    run.nemesis("kill-9", master.name, "the lock's master")
    for r in replicas:
        r.signal(signal.SIGCONT)
    run.nemesis("sigcont", names, "the lock's replica")

    def promoted():
        for r in replicas:
            role = r.call("ROLE")
            if isinstance(role, list) and role and role[0] == "master" and \
                    "cluster_state:ok" in str(r.call("CLUSTER", "INFO")):
                return r
        return None
    new = run.wait_for(promoted, 30, "the replica's promotion")
    # The promoted replica's fence counter: the lost grant's INCR never reached it, so its next
    # grant repeats the lost holder's fence (FENCE is reported, not asserted).
    run.nemesis("failover", new.name, "promoted %.0f ms after the kill, fence counter %s" % (
        (mono_ns() - t_kill) / 1e6, new.call("GET", "redisson_lock_token:{%s}" % run.lock)))
    t_new = mono_ns()
    first = run.wait_for(lambda: run.acquired_since(t_new), 25, "a grant by the new master")
    run.nemesis("first-grant", "worker %d" % first[0].id, "%.0f ms after the kill, fence %s" % (
        (first[1]["t"] - t_kill) / 1e6, first[1].get("fence")))
    run.wait_workers()


def slot_in(nodes_line, slot):
    """Whether a CLUSTER NODES line's slot ranges contain `slot`."""
    for r in nodes_line.split()[8:]:
        if r.startswith("["):
            continue
        lo, _, hi = r.partition("-")
        if int(lo) <= slot <= int(hi or lo):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# the proxy's own test: every fault against a real redis-server, through raw sockets.


def proxy_selftest(env):
    base = tempfile.mkdtemp(prefix="dlock-fault-proxy-")
    sc = Scenario("PROXY", "fault proxy self-test", "", "S", None)
    run = Run(env, sc, "S", 1, base)
    failures = []

    def expect(name, cond, detail=""):
        print("%s %s %s" % ("ok  " if cond else "FAIL", name, detail))
        if not cond:
            failures.append(name)

    def conn():
        s = socket.create_connection(("127.0.0.1", run.proxy.ports["p"]), timeout=3)
        return s, RespReader(s)

    def timed(s, rd, *cmd):
        t = time.monotonic()
        s.sendall(resp_encode(cmd))
        r = rd.read()
        return r, (time.monotonic() - t) * 1000

    def silent(s, ms):
        s.settimeout(ms / 1000.0)
        try:
            return s.recv(1) is None
        except socket.timeout:
            return True
        except OSError:
            return False
        finally:
            s.settimeout(3)

    def dead(s):
        try:
            return s.recv(1) == b""
        except OSError:
            return True

    sleeper = None
    try:
        srv = Redis(run, "server")
        srv.start()
        run.lock_servers.append(srv)
        run.proxy = Proxy(run, {"p": srv.port})
        s, rd = conn()
        r, _ = timed(s, rd, "PING")
        expect("pass forwards", r == "PONG", repr(r))
        run.proxy.ctl("rule p delay-req 300 cmd PING count 1")
        r, ms = timed(s, rd, "PING")
        expect("delay-req delays the matched request", r == "PONG" and ms >= 290, "%.0f ms" % ms)
        r, ms = timed(s, rd, "PING")
        expect("count 1 triggers once", r == "PONG" and ms < 200, "%.0f ms" % ms)
        run.proxy.ctl("rule p delay-down 200")
        r, ms = timed(s, rd, "PING")
        expect("delay-down delays replies", r == "PONG" and ms >= 190, "%.0f ms" % ms)
        run.proxy.ctl("rule p hold cmd SET arg no-such-key")
        r, ms = timed(s, rd, "SET", "k0", "v")
        expect("arg must match", r == "OK" and ms < 200, "%.0f ms" % ms)
        run.proxy.ctl("rule p hold cmd SET count 1")
        s.sendall(resp_encode(["SET", "k1", "v"]))
        expect("hold holds the reply", silent(s, 300))
        expect("held request was applied", srv.call("GET", "k1") == "v")
        run.proxy.ctl("release p")
        expect("release lets it go", rd.read() == "OK")
        run.proxy.ctl("rule p drop cmd SET count 1")
        s.sendall(resp_encode(["SET", "k2", "v"]))
        expect("drop discards the reply", silent(s, 300))
        expect("dropped request was applied", srv.call("GET", "k2") == "v")
        run.proxy.ctl("clear p")
        expect("clear resets a connection that lost bytes", dead(s))
        s, rd = conn()
        run.proxy.ctl("rule p reset cmd SET count 1")
        s.sendall(resp_encode(["SET", "k3", "v"]))
        expect("reset after the request", dead(s))
        time.sleep(0.05)
        expect("reset request was applied", srv.call("GET", "k3") == "v")
        run.proxy.ctl("rule p blackhole")
        s, rd = conn()
        s.sendall(resp_encode(["SET", "k4", "v"]))
        expect("blackhole answers nothing", silent(s, 300))
        expect("blackhole forwards nothing", srv.call("GET", "k4") is None)
        run.proxy.ctl("clear p")
        expect("clear ends blackholed connections", dead(s))
        s, rd = conn()
        srv.call("SET", "big", "x" * 50)
        run.proxy.ctl("rule p drip 40")
        r, ms = timed(s, rd, "GET", "big")
        expect("drip trickles replies", r == "x" * 50 and ms >= 900, "%.0f ms" % ms)
        run.proxy.ctl("clear p")
        sleeper = subprocess.Popen(["sleep", "30"])
        run.proxy.ctl("rule p stop %d cmd PING count 1" % sleeper.pid)
        r, _ = timed(s, rd, "PING")
        time.sleep(0.1)
        expect("stop forwards and stops the process", r == "PONG" and run.stopped(sleeper.pid))
        expect("stats counts triggers", run.proxy.triggered("p") == 1)
        s.close()
    except (HarnessError, OSError) as e:
        expect("harness", False, "%s: %s" % (type(e).__name__, e))
    finally:
        if sleeper:
            sleeper.kill()
            sleeper.wait()
        run.close()
    if failures:
        print("proxy self-test: %d FAILED; artifacts in %s" % (len(failures), base))
        return 1
    shutil.rmtree(base, ignore_errors=True)
    print("proxy self-test: all passed")
    return 0


# ---------------------------------------------------------------------------------------------
# driver


# The ZooKeeper, PostgreSQL and etcd scenarios (Z.., P.., E..; every mode extended).
import backends  # noqa: E402 (tests/fault/backends.py; registers through `scenario` above)
backends.register(sys.modules[__name__])
import random_tier  # noqa: E402 (tests/fault/random_tier.py: `random`'s schedule)


class Env:
    def __init__(self, a):
        self.worker, self.proxy, self.check, self.skew = a.worker, a.proxy, a.check, a.skew
        self.redis_server = a.redis_server or shutil.which("redis-server") or "redis-server"


def run_one(env, sc, mode, seed, results, keep, body=None):
    base = tempfile.mkdtemp(prefix="dlock-fault-%s-%s-" % (sc.id, mode))
    run = Run(env, sc, mode, seed, base)
    start = time.monotonic()
    expect = dict(sc.expect.get(mode, {})) if sc.expect else {}
    verdict, out, measured, error = "NOT as expected", "", {}, None
    skipped = None
    try:
        (body or sc.body)(run)
        code, out, measured = run.check(expect, sc.max_gap_ms)
        ok = code == 0 and all(p["passed"] for p in run.probes)
        verdict = "as expected" if ok else "NOT as expected"
    except Skipped as e:
        skipped, verdict, ok = str(e), "skipped", True
    except (HarnessError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        error = "%s: %s" % (type(e).__name__, e)
        ok = False
    finally:
        run.close()
    duration = time.monotonic() - start
    res = {
        "id": sc.id, "mode": mode, "title": sc.title, "checks": sc.checks,
        "expected": sc.outcome.get(mode, ""),
        "expect": {c: expect.get(c, "ok") for c in CHECKS},
        "measured": measured, "probes": run.probes, "verdict": verdict, "error": error,
        "skipped": skipped,
        "seed": seed, "duration_s": round(duration, 1), "max_gap_ms": sc.max_gap_ms,
        "artifacts": base, "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "report": out,
    }
    res.update(getattr(run, "summary", {}))  # the randomised tier: commit, faults, liveness
    print(out)
    for p in run.probes:
        print("PROBE %s: %s %s" % ("ok" if p["passed"] else "FAILED", p["name"], p["detail"]))
    if error:
        print("HARNESS ERROR: %s" % error)
    if skipped:
        print("SKIPPED: %s" % skipped)
    print("%s %s seed=%d duration=%.1fs: %s" % (sc.id, mode, seed, duration, verdict))
    if results:
        os.makedirs(results, exist_ok=True)
        with open(os.path.join(results, "%s-%s.json" % (sc.id, mode)), "w") as f:
            json.dump(res, f, indent=1)
    if ok and not keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("artifacts kept in %s" % base)
    return 77 if skipped else 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", default="dlock_fault_worker")
    ap.add_argument("--proxy", default="dlock_fault_proxy")
    ap.add_argument("--check", default="dlock_check")
    ap.add_argument("--redis-server")
    ap.add_argument("--skew", default="libdlock_skew.so", help="the LD_PRELOAD clock shim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    r = sub.add_parser("run")
    r.add_argument("id")
    r.add_argument("mode", choices=["S", "F", "R", "FO"] + WATCHDOG_MODES + backends.MODES +
                   PG_WATCHDOG_MODES)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--results")
    r.add_argument("--keep", action="store_true")
    rr = sub.add_parser("random")
    rr.add_argument("--seconds", type=float, default=180)
    rr.add_argument("--seed", type=int, required=True)
    rr.add_argument("--mode", choices=["S", "F", "R", "FO"], default="F")
    rr.add_argument("--results")
    rr.add_argument("--keep", action="store_true")
    sub.add_parser("proxy-selftest")
    import safety_doc
    safety_doc.add_arguments(sub.add_parser("safety-doc"))
    a = ap.parse_args()
    if a.cmd == "list":
        for sc in SCENARIOS.values():
            print("%-5s %-6s ext:%-5s %s" % (sc.id, ",".join(sc.modes),
                                             ",".join(sc.ext_modes) or "-", sc.title))
        return 0
    if a.cmd == "safety-doc":
        sys.stdout.write(safety_doc.render(a.results, SCENARIOS, a.random, a.tests))
        return 0
    env = Env(a)
    if not shutil.which(env.redis_server):
        print("redis-server not found: skipped", file=sys.stderr)
        return 77  # ctest SKIP_RETURN_CODE, as the integration tests skip without servers
    if a.cmd == "proxy-selftest":
        return proxy_selftest(env)
    if a.cmd == "run":
        sc = SCENARIOS.get(a.id)
        if not sc or a.mode not in sc.modes + sc.ext_modes:
            print("unknown scenario/mode %s %s (see list)" % (a.id, a.mode), file=sys.stderr)
            return 64
        return run_one(env, sc, a.mode, a.seed, a.results, a.keep)
    if a.cmd == "random":
        sc = Scenario("RND", "randomised nemesis schedule (%.0f s)" % a.seconds,
                      "SAFE under faults that keep the model", a.mode, None,
                      outcome={a.mode: "SAFE"}, timeout=int(a.seconds) + 120)
        return run_one(env, sc, a.mode, a.seed, a.results, a.keep,
                       body=lambda run: random_tier.random_run(sys.modules[__name__], run,
                                                               a.seconds))
    return 64


if __name__ == "__main__":
    sys.exit(main())
