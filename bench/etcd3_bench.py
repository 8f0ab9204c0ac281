#!/usr/bin/python3
"""etcd3_bench: scenarios A-D of BENCHMARKS.md with python3-etcd3's Lock (Debian's
python3-etcd3 0.12, etcd's incumbent Python client), the peer of `lock_bench etcd://...` in
bench/backend_bench.sh. Not run by CI.

    /usr/bin/python3 bench/etcd3_bench.py HOST:PORT A|B|C|D [--workers N] [--keys N]
                     [--seconds S] [--ops N]

  A  one client, sequential acquire + release on one name for --seconds
  B  --workers threads (default 50) on --keys names (default: as many) over ONE client
  C  --workers (default 8) threads, each with its own client (as separate processes would be),
     on one name; inside: read a plain counter, yield, write it + 1; --ops critical sections in
     total (default 2000) or 10 s; the final count is checked (counter_exact)
  D  the holder (main client) releases at a random 1-5 ms phase while one waiter (its own
     client, another thread) is blocked in acquire: release -> waiter holds; --ops samples
     (default 300) or 8 s

python3-etcd3's Lock (etcd3/locks.py) is its own layout, not concurrency.Mutex: a key
"/locks/<name>" put under a fresh lease (one LeaseGrant per attempt) when its create revision
is 0, else a watch for the next event on the key; release deletes it when the value is still
ours. Its lease TTL is 60 s here (no expiry during a run).

On Debian 12 its Lock cannot wait: it retries through tenacity with a wait(previous_attempt_number,
delay_since_first_attempt) callback, and Debian's tenacity 8.2 calls wait(retry_state), so
every acquire that finds the lock taken raises TypeError. A and B never wait (one client per
name) and use Lock.acquire itself; C and D use acquire_loop() below, its loop without tenacity:
the same requests in the same order ("acquire_loop": "ported" in the output).

Prints one JSON object with lock_bench's keys (client_cpu_us_per_op: this process's CPU time, all
threads, per operation), vmhwm_kib (this process's peak resident set) and rss_anon_kib (its
private memory at the end)."""
import json
import random
import sys
import threading
import time

import etcd3
import etcd3.exceptions

TTL = 60


def status_kib(field):
    """A field of /proc/self/status in KiB (VmHWM: the peak resident set; RssAnon: private)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[int(p * (len(v) - 1))]


def us(a, b):
    return (b - a) / 1000.0


def client(endpoint):
    host, port = endpoint.rsplit(":", 1)
    return etcd3.client(host=host, port=int(port))


def acquire_loop(lock):
    """python3-etcd3 0.12's Lock.acquire(timeout=None), its requests in its order: a lease, the
    transaction, and when refused a watch_once on the key. watch_once starts at the server's
    current revision, so a release between the refused transaction and the watch is missed
    (the library then waits for the key's next event, for ever without a timeout); the 1 s
    timeout here bounds such a wait, which shows as a 1 s hand-off."""
    c = lock.etcd_client
    while True:
        lock.lease = c.lease(lock.ttl)
        ok, _ = c.transaction(
            compare=[c.transactions.create(lock.key) == 0],
            success=[c.transactions.put(lock.key, lock.uuid, lease=lock.lease)],
            failure=[c.transactions.get(lock.key)])
        if ok:
            return
        lock.lease = None
        try:
            c.watch_once(lock.key, 1.0)
        except etcd3.exceptions.WatchTimedOut:
            pass


def pairs(c, name, secs, acqs, prs):
    """Sequential acquire + release of `name` for `secs`; fills acqs and prs when given."""
    lock = c.lock(name, ttl=TTL)
    end = time.monotonic_ns() + int(secs * 1e9)
    n = 0
    while time.monotonic_ns() < end:
        a = time.monotonic_ns()
        if not lock.acquire(timeout=None):
            raise RuntimeError("not acquired")
        b = time.monotonic_ns()
        lock.release()
        if prs is not None:
            acqs.append(us(a, b))
            prs.append(us(a, time.monotonic_ns()))
        n += 1
    return n


def on_threads(n, work):
    """Runs work(0) .. work(n - 1) on n threads and waits for them."""
    ts = [threading.Thread(target=work, args=(w,)) for w in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    endpoint, which = sys.argv[1], sys.argv[2]
    opts = {"--workers": 0, "--keys": 0, "--seconds": 3.0, "--ops": 0}
    i = 3
    while i < len(sys.argv):
        if sys.argv[i] not in opts:
            raise SystemExit(f"unknown option {sys.argv[i]}")
        opts[sys.argv[i]] = type(opts[sys.argv[i]])(sys.argv[i + 1])
        i += 2
    workers, keys, seconds, max_ops = (opts["--workers"], opts["--keys"], opts["--seconds"],
                                       opts["--ops"])
    base = f"dlock-bench-etcd3-{random.getrandbits(32):08x}"
    main_client = client(endpoint)
    pairs(main_client, base + "-warmup", 0.5, None, None)  # connection and stubs warm
    acq, pair, handoff = [], [], []
    ops = per_min = per_max = 0
    self_share = 0.0
    exact = None
    t0 = time.monotonic_ns()
    cpu0 = time.process_time_ns()
    if which == "A":
        ops = pairs(main_client, base + "-a", seconds, acq, pair)
    elif which == "B":
        n = workers or 50
        paths = keys or n
        per = [0] * n

        def work(w):
            per[w] = pairs(main_client, f"{base}-b{w % paths}", seconds, acq, pair)

        on_threads(n, work)
        ops, per_min, per_max = sum(per), min(per), max(per)
    elif which == "C":
        n = workers or 8
        total = max_ops or 2000
        own = [client(endpoint) for _ in range(n)]
        t0 = time.monotonic_ns()
        cpu0 = time.process_time_ns()
        end = t0 + 10_000_000_000
        mu = threading.Lock()  # guards the bookkeeping only, never the counter
        state = {"tickets": 0, "last": -1, "released": 0, "self": 0}
        counter = [0]
        per = [0] * n

        def work(w):
            lock = own[w].lock(base + "-c", ttl=TTL)
            while time.monotonic_ns() < end:
                with mu:
                    if state["tickets"] >= total:
                        return
                    state["tickets"] += 1
                a = time.monotonic_ns()
                acquire_loop(lock)
                got = time.monotonic_ns()
                with mu:
                    acq.append(us(a, got))
                    if state["last"] == w:
                        state["self"] += 1
                    elif state["last"] >= 0:
                        handoff.append(us(state["released"], got))
                v = counter[0]
                time.sleep(0)
                counter[0] = v + 1
                per[w] += 1
                with mu:
                    state["last"] = w
                    state["released"] = time.monotonic_ns()
                lock.release()

        on_threads(n, work)
        ops, per_min, per_max = sum(per), min(per), max(per)
        self_share = state["self"] / (ops - 1) if ops > 1 else 0.0
        exact = counter[0] == ops
        for c in own:
            c.close()
    elif which == "D":
        samples = max_ops or 300
        other = client(endpoint)
        t0 = time.monotonic_ns()
        cpu0 = time.process_time_ns()
        end = t0 + 8_000_000_000
        holder = main_client.lock(base + "-d", ttl=TTL)
        waiter_lock = other.lock(base + "-d", ttl=TTL)
        while ops < samples and time.monotonic_ns() < end:
            acquire_loop(holder)
            got = [0]

            def wait():
                acquire_loop(waiter_lock)
                got[0] = time.monotonic_ns()
                waiter_lock.release()

            t = threading.Thread(target=wait)
            t.start()
            # Pacing (as lock_bench): the waiter blocks, the release comes at a random phase.
            time.sleep(random.uniform(0.001, 0.005))
            released = time.monotonic_ns()
            holder.release()
            t.join()
            handoff.append(us(released, got[0]))
            time.sleep(random.uniform(0.001, 0.005))
            ops += 1
        other.close()
    else:
        raise SystemExit(f"unknown scenario {which}")
    secs = (time.monotonic_ns() - t0) / 1e9
    cpu_per_op = (time.process_time_ns() - cpu0) / 1000.0 / ops if ops else 0.0
    main_client.close()
    print(json.dumps({
        "ops": ops, "seconds": round(secs, 1), "ops_per_s": ops / secs,
        "acquire_p50_us": pct(acq, 0.5), "acquire_p99_us": pct(acq, 0.99),
        "pair_p50_us": pct(pair, 0.5), "pair_p99_us": pct(pair, 0.99),
        "handoff_p50_us": pct(handoff, 0.5), "handoff_p99_us": pct(handoff, 0.99),
        "handoff_samples": len(handoff), "per_worker_min": per_min, "per_worker_max": per_max,
        "self_reacquire_share": self_share, "counter_exact": exact,
        "client_cpu_us_per_op": cpu_per_op, "vmhwm_kib": status_kib("VmHWM"),
        "rss_anon_kib": status_kib("RssAnon"),
        "acquire_loop": "ported" if which in "CD" else "Lock.acquire"}))


if __name__ == "__main__":
    main()
