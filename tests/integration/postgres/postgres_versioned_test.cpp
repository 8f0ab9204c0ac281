// The versioned lease (lock_kind::versioned, postgres/rows.hpp): cirello.io/pglock's `locks`
// table, no clock in the table (exclusion among 8 processes: postgres_exclusion_test.cpp). Strictly
// increasing tokens, the heartbeat replacing the version, takeover only after a version stayed
// unchanged for a whole lease, and pglock's own statements (transcribed from its client.go) against
// dlock's rows.
#include "postgres_test_util.hpp"

#include <cstdio>
#include <future>
#include <thread>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class pg_versioned : public pg_suite {};

acquire_options versioned(std::chrono::milliseconds wait,
                          std::optional<std::chrono::milliseconds> lease = std::nullopt) {
    auto o = wait_for(wait, lock_kind::versioned);
    o.lease = lease;
    return o;
}

std::string rvn_of(const std::string& name) {
    return pg_suite::server().psql("SELECT coalesce(record_version_number::text, 'null') FROM "
                                   "locks WHERE name = '" +
                                   name + "'");
}

TEST_F(pg_versioned, tokens_strictly_increase_and_heartbeats_replace_the_version) {
    auto b = backend();
    std::error_code ec;
    std::uint64_t last = 0;
    for (int i = 0; i < 4; ++i) {
        auto h = b->acquire("v:tok", versioned(0ms), ec);
        ASSERT_TRUE(h) << ec.message() << " " << b->last_error_detail();
        ASSERT_TRUE(h->fencing_token());
        const auto token = *h->fencing_token();
        EXPECT_GT(token, last);
        last = token;
        EXPECT_EQ(rvn_of("v:tok"), std::to_string(token));
        EXPECT_FALSE(backend()->acquire("v:tok", versioned(0ms), ec));
        // A heartbeat draws a new version; the token stays the acquisition's.
        h->extend(20s, ec);
        ASSERT_FALSE(ec) << ec.message();
        const auto now = std::stoull(rvn_of("v:tok"));
        EXPECT_GT(now, token);
        EXPECT_EQ(*h->fencing_token(), token);
        last = now; // the next holder's token is larger than every version drawn before
        h->release_blocking(ec);
        EXPECT_FALSE(ec);
        EXPECT_EQ(server().psql("SELECT count(*) FROM locks WHERE name = 'v:tok'"), "0");
    }
    EXPECT_EQ(server().psql("SELECT count(*) FROM pg_class WHERE relname = 'locks_rvn'"), "1");
}

// A holder that heartbeats (extends) within the lease is never taken over; once it stops, a
// waiter takes the row over one lease after it first saw the last version, not before.
TEST_F(pg_versioned, takeover_only_after_the_holder_stops_heartbeating) {
    constexpr auto lease = 600ms;
    auto a = backend();
    std::error_code ec;
    auto first = a->acquire("v:take", versioned(0ms, lease), ec); // fixed: no watchdog
    ASSERT_TRUE(first) << ec.message();
    std::atomic<bool> beat{true};
    std::thread heart([&] {
        while (beat) {
            std::error_code e;
            first->extend(lease, e);
            std::this_thread::sleep_for(lease / 4);
        }
    });
    auto b = backend();
    const auto t0 = clock::now();
    auto refused = b->acquire("v:take", versioned(1500ms, lease), ec);
    EXPECT_FALSE(refused) << "taken over while the holder heartbeats";
    EXPECT_FALSE(ec);
    EXPECT_GE(clock::now() - t0, 1500ms);
    EXPECT_FALSE(first->lost());
    beat = false;
    heart.join();
    const auto stopped = clock::now();
    auto second = b->acquire("v:take", versioned(5s, lease), ec);
    ASSERT_TRUE(second) << ec.message();
    const auto took = clock::now() - stopped;
    EXPECT_GE(took, lease - 150ms); // a whole lease of one unchanged version (minus the last
                                    // heartbeat's age when the waiter first saw it)
    EXPECT_LT(took, 3 * lease);
    EXPECT_GT(*second->fencing_token(), *first->fencing_token());
    EXPECT_TRUE(first->lost() || eventually([&] { return first->lost(); }, 1s));
    first->release_blocking(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_FALSE(second->lost());
    std::cout << "[ measure  ] takeover " << std::chrono::duration<double>(took).count()
              << " s after the last heartbeat, lease 0.6 s\n";
}

// pglock's own statements (client.go of cirello.io/pglock, newest stored version: the upsert
// with COALESCE, the heartbeat, the release) sent through psql against dlock's rows, both ways.
TEST_F(pg_versioned, pglock_statements_and_dlock_exclude_each_other) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("v:interop", versioned(0ms), ec);
    ASSERT_TRUE(h) << ec.message();
    const auto ours = rvn_of("v:interop");
    // pglock's storeAcquire: rvn = nextval, then its upsert with $1 name, $2 rvn, $3 data
    // (NULL), $4 the version it observed last (0 at first), $5 replaceData (false), $6 owner.
    const auto upsert = [](const std::string& name, const std::string& observed) {
        const auto rvn = server().psql("SELECT nextval('locks_rvn')");
        return server().psql(
            "INSERT INTO locks (\"name\", \"record_version_number\", \"data\", \"owner\") "
            "VALUES ('" +
            name + "', " + rvn +
            ", NULL, 'pglock-1') ON CONFLICT (\"name\") DO UPDATE SET "
            "\"record_version_number\" = CASE WHEN COALESCE(locks.\"record_version_number\" = " +
            observed + ", TRUE) THEN " + rvn +
            " ELSE locks.\"record_version_number\" END, \"data\" = CASE WHEN "
            "COALESCE(locks.\"record_version_number\" = " +
            observed +
            ", TRUE) THEN CASE WHEN false THEN NULL ELSE locks.\"data\" END ELSE "
            "locks.\"data\" END, \"owner\" = CASE WHEN COALESCE(locks.\"record_version_number\" "
            "= " +
            observed +
            ", TRUE) THEN 'pglock-1' ELSE locks.\"owner\" END RETURNING "
            "\"record_version_number\"::text || ' ' || \"owner\"");
    };
    // pglock's first try (observed 0): not acquired, it sees dlock's version and owner.
    const auto seen = upsert("v:interop", "0");
    EXPECT_EQ(seen.substr(0, seen.find(' ')), ours) << seen;
    EXPECT_EQ(seen.find("pglock-1"), std::string::npos) << seen;
    h->release_blocking(ec);
    ASSERT_FALSE(ec);
    // Released (row deleted): pglock acquires; dlock is refused while pglock holds.
    const auto got = upsert("v:interop", "0");
    EXPECT_NE(got.find("pglock-1"), std::string::npos) << got;
    const auto pg_rvn = got.substr(0, got.find(' '));
    EXPECT_FALSE(b->acquire("v:interop", versioned(0ms), ec));
    // pglock's heartbeat and release: the row is free for dlock at once.
    server().psql("UPDATE locks SET \"record_version_number\" = nextval('locks_rvn') WHERE "
                  "\"name\" = 'v:interop' AND \"record_version_number\" = " +
                  pg_rvn);
    const auto beat = rvn_of("v:interop");
    EXPECT_NE(beat, pg_rvn);
    server().psql(
        "DELETE FROM locks WHERE \"name\" = 'v:interop' AND \"record_version_number\" = " + beat);
    auto again = b->acquire("v:interop", versioned(0ms), ec);
    ASSERT_TRUE(again) << ec.message();
    EXPECT_GT(*again->fencing_token(), std::stoull(beat));
    // A pglock holder that stops heartbeating is taken over after dlock's lease.
    again->release_blocking(ec);
    EXPECT_NE(upsert("v:interop", "0").find("pglock-1"), std::string::npos);
    const auto t0 = clock::now();
    auto stolen = b->acquire("v:interop", versioned(5s, 500ms), ec);
    ASSERT_TRUE(stolen) << ec.message();
    EXPECT_GE(clock::now() - t0, 450ms);
}

TEST_F(pg_versioned, status_list_and_force_unlock) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("v:force", versioned(0ms), ec);
    ASSERT_TRUE(h);
    auto st = b->inspect("v:force", lock_kind::versioned, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(st.kind, "versioned");
    EXPECT_FALSE(st.remaining_lease); // no clock in the table
    EXPECT_NE(st.detail.find("record_version_number"), std::string::npos) << st.detail;
    ASSERT_TRUE(st.fencing_counter);
    EXPECT_GE(*st.fencing_counter, *h->fencing_token());
    EXPECT_EQ(b->list("v:forc?", ec).size(), 1U);
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        return backend()->acquire("v:force", versioned(20s), e) != nullptr;
    });
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout);
    EXPECT_TRUE(b->force_unlock("v:force", lock_kind::versioned, ec));
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready); // woken by the notification
    EXPECT_TRUE(got.get());
    h->extend(20s, ec); // the old holder learns it at its next heartbeat
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_FALSE(b->force_unlock("v:none", lock_kind::versioned, ec));
    EXPECT_FALSE(ec);
}

} // namespace
} // namespace dlock::test
