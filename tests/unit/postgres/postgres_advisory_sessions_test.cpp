// The choice of a holding session for a try and the names of holding sessions
// (postgres/advisory_sessions.hpp), without a server.
#include "postgres/advisory_sessions.hpp"

#include <gtest/gtest.h>

namespace dlock::detail::pg {
namespace {

session_load load(bool has_key, std::size_t in_flight, std::size_t keys, bool excl = false) {
    return {has_key, excl, in_flight, keys};
}

constexpr session_choice open{session_choice::action::open, 0};
constexpr session_choice wait{session_choice::action::wait, 0};
constexpr session_choice use(std::size_t i) {
    return {session_choice::action::use, i};
}

TEST(postgres_advisory_sessions, no_session_opens_one) {
    EXPECT_EQ(choose_session({}, 8, 0), open);
    // A burst of first tries opens the pool, then waits for those sessions.
    EXPECT_EQ(choose_session({}, 2, 1), open);
    EXPECT_EQ(choose_session({}, 2, 2), wait);
}

TEST(postgres_advisory_sessions, an_idle_session_without_the_key_is_taken) {
    EXPECT_EQ(choose_session({load(false, 0, 500)}, 8, 0), use(0));
    // The least loaded: fewest batches in flight, then fewest keys.
    EXPECT_EQ(choose_session({load(false, 0, 9), load(false, 0, 3), load(false, 0, 3)}, 8, 0),
              use(1));
}

TEST(postgres_advisory_sessions, a_session_with_the_key_is_never_taken) {
    EXPECT_EQ(choose_session({load(true, 0, 1)}, 8, 0), open);
    // Even when the pool is full: another session is opened.
    EXPECT_EQ(choose_session({load(true, 0, 1), load(true, 0, 1)}, 2, 0), open);
    EXPECT_EQ(choose_session({load(true, 0, 1), load(false, 0, 9)}, 2, 0), use(1));
    // Unless one is being opened: it frees up after its first try.
    EXPECT_EQ(choose_session({load(true, 0, 1)}, 2, 1), wait);
}

TEST(postgres_advisory_sessions, exclusive_sessions_take_no_try_and_do_not_count) {
    EXPECT_EQ(choose_session({load(false, 0, 1, true)}, 8, 0), open);
    EXPECT_EQ(choose_session({load(false, 0, 1, true), load(false, 2, 1)}, 2, 0), open);
    EXPECT_EQ(choose_session({load(false, 0, 1, true), load(false, 2, 1)}, 1, 0), wait);
    EXPECT_EQ(choose_session({load(false, 0, 1, true), load(false, 1, 1)}, 1, 0), use(1));
}

// A try goes behind one batch at most: the set grows up to the pool, then a try goes behind
// the single batch of the least busy session, or waits on the client for a session to finish.
TEST(postgres_advisory_sessions, busy_sessions_grow_the_set_up_to_the_pool_then_tries_wait) {
    EXPECT_EQ(choose_session({load(false, 1, 1)}, 2, 0), open);
    // One more already being opened fills the pool: behind the one batch in flight.
    EXPECT_EQ(choose_session({load(false, 1, 1)}, 2, 1), use(0));
    EXPECT_EQ(choose_session({load(false, 3, 1), load(false, 1, 7)}, 2, 0), use(1));
    EXPECT_EQ(choose_session({load(false, 3, 1), load(false, 2, 7)}, 2, 0), wait);
    EXPECT_EQ(choose_session({load(false, 3, 1), load(false, 0, 7)}, 2, 0), use(1));
}

TEST(postgres_advisory_sessions, key_ids_ignore_the_kind_and_tell_forms_apart) {
    std::error_code ec;
    const auto a = make_key("orders:1", key_scheme::sha256_le64, ec);
    const auto b = make_key("orders:2", key_scheme::sha256_le64, ec);
    EXPECT_EQ(key_id(a), key_id(a));
    EXPECT_NE(key_id(a), key_id(b));
    advisory_key big{false, false, 5, {}}, pair{true, false, 5, {}};
    EXPECT_NE(key_id(big), key_id(pair));
    const auto h1 = make_key("x", key_scheme::hashtext, ec);
    const auto h2 = make_key("y", key_scheme::hashtext, ec);
    EXPECT_NE(key_id(h1), key_id(h2));
}

TEST(postgres_advisory_sessions, holding_sessions_are_named_by_their_one_lock_or_count) {
    EXPECT_EQ(holding_app_name("jobs:nightly", 1), "dlock:jobs:nightly");
    EXPECT_EQ(holding_app_name("jobs:nightly", 2), "dlock2");
    EXPECT_EQ(holding_app_name("x", 1000), "dlock1000");
}

} // namespace
} // namespace dlock::detail::pg
