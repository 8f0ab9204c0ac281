// A real Apache Curator 5.4.0 client (Debian's libcurator-recipes-java) for the interop test,
// run with Java 17's single-file launcher:
//   java -cp <curator jars> CuratorPeer.java <connect> <path> mutex|read|write|semaphore:<N>
//        hold|try <ms>
// (semaphore:<N>: one lease of an InterProcessSemaphoreV2 with N permits)
// hold: acquire (waiting up to <ms>), print ACQUIRED (or NOT_ACQUIRED and exit), wait for a
//       line or EOF on stdin, release, print RELEASED.
// try:  acquire(<ms>), print ACQUIRED or NOT_ACQUIRED, release, exit.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
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
