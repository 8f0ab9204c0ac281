// ShedLock-compatible rows (lock_kind::shedlock, postgres/shedlock.hpp) on a real PostgreSQL:
// the table and rows as ShedLock keeps them, exclusion against ShedLock's own database-time
// SQL run verbatim through psql (the statements the Java library sends), expiry and takeover,
// never deleting rows, typed errors.
#include "postgres_test_util.hpp"

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class pg_shedlock : public pg_suite {};

acquire_options shed(std::chrono::milliseconds wait) {
    auto o = wait_for(wait, lock_kind::shedlock);
    return o;
}

// ShedLock's PostgresSqlServerTimeStatementsSource, with the values inlined as JDBC binds them.
std::string java_insert(const std::string& name, const std::string& by, double secs) {
    const std::string now = "timezone('utc', CURRENT_TIMESTAMP)";
    const std::string until = now + " + make_interval(secs => " + std::to_string(secs) + ")";
    return "INSERT INTO shedlock(name, lock_until, locked_at, locked_by) VALUES('" + name + "', " +
           until + ", " + now + ", '" + by + "') ON CONFLICT (name) DO UPDATE SET " +
           "lock_until = " + until + ", locked_at = " + now + ", locked_by = '" + by +
           "' WHERE shedlock.name = '" + name + "' AND shedlock.lock_until <= " + now +
           " RETURNING 1";
}

TEST_F(pg_shedlock, rows_are_shedlocks_and_are_never_deleted) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("report", shed(0ms), ec);
    ASSERT_TRUE(h) << ec.message() << " " << b->last_error_detail();
    EXPECT_FALSE(h->fencing_token());
    EXPECT_EQ(server().psql("SELECT pg_typeof(lock_until) FROM shedlock WHERE name = 'report'"),
              "timestamp without time zone");
    const auto by = server().psql("SELECT locked_by FROM shedlock WHERE name = 'report'");
    EXPECT_NE(by.find('/'), std::string::npos) << by; // <hostname>/<uuid>
    // lockAtMostFor = the 30 s watchdog lease, in database time.
    EXPECT_EQ(server().psql("SELECT round(extract(epoch FROM lock_until - locked_at)) FROM "
                            "shedlock WHERE name = 'report'"),
              "30");
    EXPECT_FALSE(backend()->acquire("report", shed(0ms), ec));
    EXPECT_FALSE(ec);
    h->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(server().psql("SELECT count(*) FROM shedlock WHERE name = 'report' AND lock_until "
                            "<= timezone('utc', CURRENT_TIMESTAMP)"),
              "1"); // the row stays, expired
    EXPECT_TRUE(backend()->acquire("report", shed(0ms), ec));
}

TEST_F(pg_shedlock, excludes_shedlocks_own_statements_both_ways) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("job", shed(0ms), ec);
    ASSERT_TRUE(h) << ec.message();
    // The Java side while dlock holds: INSERT 0 0.
    EXPECT_EQ(server().psql(java_insert("job", "java-host", 10)), "");
    h->release_blocking(ec);
    // After dlock's release: the Java side gets it (INSERT 0 1), for 0.4 s.
    EXPECT_EQ(server().psql(java_insert("job", "java-host", 0.4)), "1");
    const auto t0 = clock::now();
    EXPECT_FALSE(b->acquire("job", shed(0ms), ec));
    // dlock waits (polling within its wait) and takes over when the Java lease expires.
    auto taken = b->acquire("job", shed(5s), ec);
    ASSERT_TRUE(taken) << ec.message();
    EXPECT_GE(clock::now() - t0, 300ms);
    EXPECT_NE(server().psql("SELECT locked_by FROM shedlock WHERE name = 'job'"), "java-host");
}

TEST_F(pg_shedlock, fixed_lease_expires_and_is_taken_over) {
    auto b = backend();
    std::error_code ec;
    auto o = shed(0ms);
    o.lease = 300ms;
    auto h = b->acquire("short", o, ec);
    ASSERT_TRUE(h);
    EXPECT_LE(h->valid_until(), clock::now() + 300ms);
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 3s));
    auto other = backend()->acquire("short", shed(2s), ec);
    ASSERT_TRUE(other) << ec.message();
    // The old holder's late extend and release find the row taken.
    h->extend(1s, ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST_F(pg_shedlock, force_unlock_ends_the_lease_and_keeps_the_row) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("stuck", shed(0ms), ec);
    ASSERT_TRUE(h);
    auto st = b->inspect("stuck", lock_kind::shedlock, ec);
    ASSERT_FALSE(ec);
    EXPECT_TRUE(st.exists);
    ASSERT_EQ(st.contenders.size(), 1U);
    EXPECT_TRUE(st.remaining_lease && *st.remaining_lease > 25s);
    EXPECT_EQ(b->list("stu*", ec).size(), 1U);
    EXPECT_TRUE(b->force_unlock("stuck", lock_kind::shedlock, ec));
    EXPECT_FALSE(b->is_locked("stuck", lock_kind::shedlock, ec));
    EXPECT_EQ(server().psql("SELECT count(*) FROM shedlock WHERE name = 'stuck'"), "1");
    h->extend(30s, ec); // the holder learns it at its next extend
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_TRUE(h->lost());
}

TEST_F(pg_shedlock, bad_input_is_typed) {
    std::error_code ec;
    auto b = backend();
    EXPECT_FALSE(b->acquire(std::string(65, 'n'), shed(0ms), ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto limited = backend_at(
        server().url_as("limited", pg_server::limited_password(), "dlock_table=jobs_lock"));
    EXPECT_FALSE(limited->acquire("x", shed(0ms), ec));
    EXPECT_EQ(ec, errc::permission_denied);
    EXPECT_NE(limited->last_error_detail().find("jobs_lock"), std::string::npos)
        << limited->last_error_detail();
}

} // namespace
} // namespace dlock::test
