// ShedLock's database-time statements for PostgreSQL (net.javacrumbs.shedlock
// PostgresSqlServerTimeStatementsSource, research/zookeeper-sql.md §2b), sent through PgJDBC
// (Debian's libpostgresql-jdbc-java) the way ShedLock's JDBC provider sends them: prepared
// statements, intervals as BigDecimal seconds, autocommit. ShedLock itself is not in Debian;
// this is its SQL and its flow (insert, then update if the row exists), for the interop test.
//
//   java -cp /usr/share/java/postgresql.jar ShedLockJdbc.java lock   URL USER PASS NAME BY SECS
//   java -cp /usr/share/java/postgresql.jar ShedLockJdbc.java unlock URL USER PASS NAME BY
// prints the number of rows the statement changed (1 = acquired / released, 0 = not).
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;

public class ShedLockJdbc {
    static final String NOW = "timezone('utc', CURRENT_TIMESTAMP)";
    static final String INSERT = "INSERT INTO shedlock(name, lock_until, locked_at, locked_by) "
        + "VALUES(?, " + NOW + " + make_interval(secs => ?), " + NOW + ", ?) "
        + "ON CONFLICT (name) DO UPDATE SET lock_until = " + NOW + " + make_interval(secs => ?), "
        + "locked_at = " + NOW + ", locked_by = ? "
        + "WHERE shedlock.name = ? AND shedlock.lock_until <= " + NOW;
    static final String UPDATE = "UPDATE shedlock SET lock_until = " + NOW
        + " + make_interval(secs => ?), locked_at = " + NOW + ", locked_by = ? "
        + "WHERE shedlock.name = ? AND shedlock.lock_until <= " + NOW;
    static final String UNLOCK = "UPDATE shedlock SET lock_until = CASE WHEN locked_at + "
        + "make_interval(secs => ?) > " + NOW + " THEN locked_at + make_interval(secs => ?) "
        + "ELSE " + NOW + " END WHERE name = ? AND locked_by = ?";

    public static void main(String[] a) throws Exception {
        try (Connection c = DriverManager.getConnection(a[1], a[2], a[3])) {
            c.setAutoCommit(true);
            String name = a[4], by = a[5];
            int n;
            if (a[0].equals("lock")) {
                BigDecimal secs = new BigDecimal(a[6]);
                try (PreparedStatement s = c.prepareStatement(INSERT)) {
                    s.setString(1, name);
                    s.setBigDecimal(2, secs);
                    s.setString(3, by);
                    s.setBigDecimal(4, secs);
                    s.setString(5, by);
                    s.setString(6, name);
                    n = s.executeUpdate();
                }
                if (n == 0) {
                    try (PreparedStatement s = c.prepareStatement(UPDATE)) {
                        s.setBigDecimal(1, secs);
                        s.setString(2, by);
                        s.setString(3, name);
                        n = s.executeUpdate();
                    }
                }
            } else {
                try (PreparedStatement s = c.prepareStatement(UNLOCK)) {
                    s.setBigDecimal(1, BigDecimal.ZERO);
                    s.setBigDecimal(2, BigDecimal.ZERO);
                    s.setString(3, name);
                    s.setString(4, by);
                    n = s.executeUpdate();
                }
            }
            System.out.println(n);
        }
    }
}
