// curator_bench: scenarios A-D of BENCHMARKS.md with Apache Curator 5.4.0's InterProcessMutex
// (Debian's libcurator-recipes-java), the peer of `lock_bench zk://...` in bench/backend_bench.sh;
// with --kind semaphore, its InterProcessSemaphoreV2 (each pair: acquire() one lease of
// --permits, then returnLease), the peer of `lock_bench zk://... --kind semaphore`.
// Not built or run by CI. Compile once, then run (the script does both):
//   javac -cp <curator jars> -d DIR bench/curator_bench.java
//   java -cp DIR:<curator jars> CuratorBench CONNECT A|B|C|D|E [--workers N] [--keys N] [--seconds S]
//        [--ops N] [--warmup S] [--kind lock|semaphore] [--permits N]
// CONNECT: "127.0.0.1:PORT,..." (the ensemble's connect string).
//   A  one client, sequential acquire + release on one path for --seconds
//   B  --workers threads (default 50) on --keys paths (default: as many) over ONE
//      CuratorFramework
//   C  --workers (default 8) threads, each with its own CuratorFramework (as separate processes
//      would be), on one path; inside: read a plain counter, yield, write it + 1; --ops critical
//      sections in total (default 2000) or 10 s; the final count is checked (counter_exact)
//   D  the holder (main client) releases at a random 1-5 ms phase while one waiter (its own
//      CuratorFramework, another thread) is blocked in acquire: release -> waiter holds;
//      --ops samples (default 300) or 8 s
//   E  leader election hand-off with LeaderLatch (the peer of `election_bench zk://... E`): the
//      leader's latch closes while another participant (its own CuratorFramework) waits in
//      await(); --ops samples (default 200) after 20 unrecorded ones
// Before measuring, --warmup seconds (default 1) of A on another path let the JIT compile the
// lock's code paths (a C++ client needs none). Prints one JSON object, with the keys
// lock_bench uses (client_cpu_us_per_op: the whole JVM's CPU time per operation), plus vmhwm_kib:
// this JVM's peak resident set (/proc/self/status VmHWM), and rss_anon_kib: its private memory
// at the end (RssAnon: the heap, the JIT's code, stacks).
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

class CuratorBench {
    static final String BASE = "/dlock-bench-curator";
    static String connect;
    static int workers = 0;
    static int keys = 0;
    static double seconds = 3;
    static long maxOps = 0;
    static double warmup = 1;
    static boolean semaphore = false;
    static int permits = 1;

    /// What a scenario takes and releases: an InterProcessMutex, or one lease of an
    /// InterProcessSemaphoreV2 of `permits` (--kind semaphore).
    static final class Locker {
        final InterProcessMutex mutex;
        final InterProcessSemaphoreV2 sem;
        Lease lease;

        Locker(CuratorFramework c, String path) {
            mutex = semaphore ? null : new InterProcessMutex(c, path);
            sem = semaphore ? new InterProcessSemaphoreV2(c, path, permits) : null;
        }

        void acquire() throws Exception {
            if (mutex != null) mutex.acquire();
            else lease = sem.acquire();
        }

        void release() throws Exception {
            if (mutex != null) mutex.release();
            else sem.returnLease(lease);
        }
    }

    static CuratorFramework newClient() throws Exception {
        CuratorFramework c =
            CuratorFrameworkFactory.newClient(connect, 30000, 10000, new RetryOneTime(100));
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS)) throw new IllegalStateException("no connection");
        return c;
    }

    static double pct(List<Double> v, double p) {
        if (v.isEmpty()) return 0;
        Collections.sort(v);
        return v.get((int) (p * (v.size() - 1)));
    }

    static long statusKib(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status")))
                if (line.startsWith(field + ":"))
                    return Long.parseLong(line.substring(field.length() + 1).trim().split("\\s+")[0]);
        } catch (Exception e) {
            // no /proc: 0
        }
        return 0;
    }

    /// This JVM's CPU time (all threads: Curator's, ZooKeeper's SendThread and EventThread, the
    /// JIT and the GC) in ns.
    static long cpuNs() {
        return ((com.sun.management.OperatingSystemMXBean)
                    java.lang.management.ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    static double us(long fromNs, long toNs) { return (toNs - fromNs) / 1000.0; }

    /// Sequential acquire + release on `path` for `secs`; fills `pairs` and `acqs` when given.
    static long pairs(CuratorFramework c, String path, double secs, List<Double> acqs, List<Double> pairs)
        throws Exception {
        Locker m = new Locker(c, path);
        long end = System.nanoTime() + (long) (secs * 1e9);
        long n = 0;
        while (System.nanoTime() < end) {
            long a = System.nanoTime();
            m.acquire();
            long b = System.nanoTime();
            m.release();
            if (pairs != null) {
                acqs.add(us(a, b));
                pairs.add(us(a, System.nanoTime()));
            }
            ++n;
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        connect = args[0];
        String which = args[1];
        for (int i = 2; i < args.length; ++i) {
            switch (args[i]) {
                case "--workers" -> workers = Integer.parseInt(args[++i]);
                case "--keys" -> keys = Integer.parseInt(args[++i]);
                case "--seconds" -> seconds = Double.parseDouble(args[++i]);
                case "--ops" -> maxOps = Long.parseLong(args[++i]);
                case "--warmup" -> warmup = Double.parseDouble(args[++i]);
                case "--kind" -> semaphore = args[++i].equals("semaphore");
                case "--permits" -> permits = Integer.parseInt(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        org.apache.zookeeper.Watcher.Event.KeeperState.values(); // load ZooKeeper's classes early
        CuratorFramework main = newClient();
        if (warmup > 0) pairs(main, BASE + "/warmup", warmup, null, null);
        List<Double> acq = Collections.synchronizedList(new ArrayList<>());
        List<Double> pair = Collections.synchronizedList(new ArrayList<>());
        List<Double> handoff = Collections.synchronizedList(new ArrayList<>());
        long ops = 0;
        long perMin = 0, perMax = 0;
        double selfShare = 0;
        String exact = "null";
        long t0 = System.nanoTime();
        long cpu0 = cpuNs();
        switch (which) {
            case "A" -> ops = pairs(main, BASE + "/a", seconds, acq, pair);
            case "B" -> {
                int n = workers > 0 ? workers : 50;
                int paths = keys > 0 ? keys : n;
                long[] per = new long[n];
                List<Thread> ts = new ArrayList<>();
                for (int w = 0; w < n; ++w) {
                    final int id = w;
                    ts.add(new Thread(() -> {
                        try {
                            per[id] = pairs(main, BASE + "/b" + (id % paths), seconds, acq, pair);
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    }));
                }
                ts.forEach(Thread::start);
                for (Thread t : ts) t.join();
                perMin = Long.MAX_VALUE;
                for (long p : per) {
                    ops += p;
                    perMin = Math.min(perMin, p);
                    perMax = Math.max(perMax, p);
                }
            }
            case "C" -> {
                int n = workers > 0 ? workers : 8;
                long total = maxOps > 0 ? maxOps : 2000;
                long end = t0 + 10_000_000_000L;
                List<CuratorFramework> own = new ArrayList<>();
                for (int w = 0; w < n; ++w) own.add(newClient());
                t0 = System.nanoTime();
                cpu0 = cpuNs();
                AtomicLong tickets = new AtomicLong(), selfReacq = new AtomicLong();
                AtomicInteger lastHolder = new AtomicInteger(-1);
                AtomicLong lastReleaseNs = new AtomicLong();
                long[] counter = {0}; // a plain field: only the lock orders the workers
                long[] per = new long[n];
                List<Thread> ts = new ArrayList<>();
                for (int w = 0; w < n; ++w) {
                    final int id = w;
                    ts.add(new Thread(() -> {
                        try {
                            Locker m = new Locker(own.get(id), BASE + "/c");
                            while (System.nanoTime() < end && tickets.getAndIncrement() < total) {
                                long a = System.nanoTime();
                                m.acquire();
                                long got = System.nanoTime();
                                acq.add(us(a, got));
                                int prev = lastHolder.get();
                                if (prev == id) selfReacq.incrementAndGet();
                                else if (prev >= 0) handoff.add(us(lastReleaseNs.get(), got));
                                long v = counter[0];
                                Thread.yield();
                                counter[0] = v + 1;
                                ++per[id];
                                lastHolder.set(id);
                                lastReleaseNs.set(System.nanoTime());
                                m.release();
                            }
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    }));
                }
                ts.forEach(Thread::start);
                for (Thread t : ts) t.join();
                perMin = Long.MAX_VALUE;
                for (long p : per) {
                    ops += p;
                    perMin = Math.min(perMin, p);
                    perMax = Math.max(perMax, p);
                }
                selfShare = ops > 1 ? (double) selfReacq.get() / (ops - 1) : 0;
                exact = counter[0] == ops ? "true" : "false";
                for (CuratorFramework c : own) c.close();
            }
            case "D" -> {
                long samples = maxOps > 0 ? maxOps : 300;
                long end = t0 + 8_000_000_000L;
                CuratorFramework other = newClient();
                t0 = System.nanoTime();
                cpu0 = cpuNs();
                Locker holder = new Locker(main, BASE + "/d");
                Locker waiterLock = new Locker(other, BASE + "/d");
                while (ops < samples && System.nanoTime() < end) {
                    holder.acquire();
                    long[] got = {0};
                    Thread waiter = new Thread(() -> {
                        try {
                            waiterLock.acquire();
                            got[0] = System.nanoTime();
                            waiterLock.release();
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
                    waiter.start();
                    // Pacing (as lock_bench): the waiter blocks, the release comes at a random phase.
                    TimeUnit.MICROSECONDS.sleep(ThreadLocalRandom.current().nextInt(1000, 5001));
                    long released = System.nanoTime();
                    holder.release();
                    waiter.join();
                    handoff.add(us(released, got[0]));
                    TimeUnit.MICROSECONDS.sleep(ThreadLocalRandom.current().nextInt(1000, 5001));
                    ++ops;
                }
                other.close();
            }
            case "E" -> {
                // Leader election hand-off (election_bench E): the leader's LeaderLatch closes at a
                // random phase while another participant (its own CuratorFramework) waits in
                // start() + await(); a sample is close() -> await() returned. Roles swap each
                // sample. The first 20 hand-offs warm the JIT up and are not recorded.
                long samples = maxOps > 0 ? maxOps : 200;
                CuratorFramework other = newClient();
                CuratorFramework[] clients = {main, other};
                LeaderLatch leader = new LeaderLatch(main, BASE + "/e", "a");
                leader.start();
                leader.await();
                int leadIdx = 0;
                for (long i = 0; i < samples + 20; ++i) {
                    if (i == 20) {
                        t0 = System.nanoTime();
                        cpu0 = cpuNs();
                    }
                    LeaderLatch next = new LeaderLatch(clients[1 - leadIdx], BASE + "/e", "w");
                    long[] got = {0};
                    Thread waiter = new Thread(() -> {
                        try {
                            next.start();
                            next.await();
                            got[0] = System.nanoTime();
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
                    waiter.start();
                    TimeUnit.MICROSECONDS.sleep(ThreadLocalRandom.current().nextInt(1000, 5001));
                    long resigned = System.nanoTime();
                    leader.close();
                    waiter.join();
                    if (i >= 20) {
                        handoff.add(us(resigned, got[0]));
                        ++ops;
                    }
                    leader = next;
                    leadIdx = 1 - leadIdx;
                }
                leader.close();
                other.close();
            }
            default -> throw new IllegalArgumentException("unknown scenario " + which);
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpuPerOp = ops > 0 ? (cpuNs() - cpu0) / 1000.0 / ops : 0;
        main.close();
        System.out.printf(java.util.Locale.ROOT,
            "{\"ops\":%d,\"seconds\":%.1f,\"ops_per_s\":%.1f,\"acquire_p50_us\":%.1f,\"acquire_p99_us\":%.1f,"
                + "\"pair_p50_us\":%.1f,\"pair_p99_us\":%.1f,\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f,"
                + "\"handoff_samples\":%d,\"per_worker_min\":%d,\"per_worker_max\":%d,\"self_reacquire_share\":%.3f,"
                + "\"counter_exact\":%s,\"client_cpu_us_per_op\":%.2f,\"vmhwm_kib\":%d,\"rss_anon_kib\":%d}%n",
            ops, secs, ops / secs, pct(acq, 0.5), pct(acq, 0.99), pct(pair, 0.5), pct(pair, 0.99),
            pct(handoff, 0.5), pct(handoff, 0.99), handoff.size(), perMin, perMax, selfShare, exact, cpuPerOp, statusKib("VmHWM"), statusKib("RssAnon"));
    }
}
