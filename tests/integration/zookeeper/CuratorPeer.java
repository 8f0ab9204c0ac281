// A real Apache Curator 5.4.0 client (Debian's libcurator-recipes-java) for the interop test,
// run with Java 17's single-file launcher:
//   java -cp <curator jars> CuratorPeer.java <connect> <path> mutex|read|write|semaphore:<N>
//        hold|try <ms>
// (semaphore:<N>: one lease of an InterProcessSemaphoreV2 with N permits)
// hold: acquire (waiting up to <ms>), print ACQUIRED (or NOT_ACQUIRED and exit), wait for a
//       line or EOF on stdin, release, print RELEASED.
// try:  acquire(<ms>), print ACQUIRED or NOT_ACQUIRED, release, exit.
// latch:<id> run 0: a LeaderLatch participant with id <id> on <path>, started at once, then
//       driven by lines on stdin: "await <ms>" prints LEADER or NOT_LEADER (latch.await),
//       "leader" prints "LEADER_IS <id>" (getLeader().getId(); empty when vacant), "close" or
//       EOF closes the latch and prints CLOSED.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorPeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], kind = args[2], action = args[3];
        long ms = Long.parseLong(args[4]);
        try (CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 5000, new RetryOneTime(100))) {
            c.start();
            c.blockUntilConnected(10, TimeUnit.SECONDS);
            if (kind.startsWith("latch:")) {
                LeaderLatch latch = new LeaderLatch(c, path, kind.substring("latch:".length()));
                latch.start();
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                for (String line; (line = in.readLine()) != null && !line.equals("close"); ) {
                    if (line.startsWith("await ")) {
                        long wait = Long.parseLong(line.substring("await ".length()));
                        System.out.println(latch.await(wait, TimeUnit.MILLISECONDS) ? "LEADER" : "NOT_LEADER");
                    } else if (line.equals("leader")) {
                        System.out.println("LEADER_IS " + latch.getLeader().getId());
                    }
                    System.out.flush();
                }
                latch.close();
                System.out.println("CLOSED");
                System.out.flush();
                return;
            }
            if (kind.startsWith("semaphore:")) {
                int permits = Integer.parseInt(kind.substring("semaphore:".length()));
                InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c, path, permits);
                Lease lease = sem.acquire(ms, TimeUnit.MILLISECONDS);
                System.out.println(lease != null ? "ACQUIRED" : "NOT_ACQUIRED");
                System.out.flush();
                if (lease == null) return;
                if (action.equals("hold")) {
                    new BufferedReader(new InputStreamReader(System.in)).readLine();
                }
                lease.close();
                System.out.println("RELEASED");
                System.out.flush();
                return;
            }
            InterProcessLock lock;
            if (kind.equals("mutex")) {
                lock = new InterProcessMutex(c, path);
            } else {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
                lock = kind.equals("read") ? rw.readLock() : rw.writeLock();
            }
            boolean got = lock.acquire(ms, TimeUnit.MILLISECONDS);
            System.out.println(got ? "ACQUIRED" : "NOT_ACQUIRED");
            System.out.flush();
            if (!got) return;
            if (action.equals("hold")) {
                new BufferedReader(new InputStreamReader(System.in)).readLine();
            }
            lock.release();
            System.out.println("RELEASED");
            System.out.flush();
        }
    }
}
