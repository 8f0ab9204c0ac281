// Socket-free tests of the lock family's decisions: key names and slots, attempt replies,
// sleep bounds, validity drift.
#include "redis/client_impl.hpp"
#include "redis/locks/acquire_logic.hpp"
#include "redis/locks/names.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::lock_kind;
using dlock::detail::attempt_outcome;
using dlock::detail::interpret_attempt;
namespace resp3 = dlock::resp3;

namespace {

resp3::value integer(std::int64_t v) {
    resp3::value x;
    x.kind = resp3::type::integer;
    x.integer = v;
    return x;
}
resp3::value array(std::vector<resp3::value> els) {
    resp3::value x;
    x.kind = resp3::type::array;
    x.elements = std::move(els);
    return x;
}
resp3::value simple(std::string s) {
    resp3::value x;
    x.kind = resp3::type::simple_string;
    x.str = std::move(s);
    return x;
}
resp3::value error_reply(std::string s) {
    resp3::value x;
    x.kind = resp3::type::error;
    x.str = std::move(s);
    return x;
}
const resp3::value null_reply{};

} // namespace

TEST(lock_names, companion_keys_follow_redissons_prefix_rule) {
    EXPECT_EQ(dlock::detail::prefix_name("redisson_lock__channel", "orders"),
              "redisson_lock__channel:{orders}");
    EXPECT_EQ(dlock::detail::prefix_name("redisson_lock_token", "{tag}orders"),
              "redisson_lock_token:{tag}orders");
}

TEST(lock_names, key_slot_matches_redis_cluster_keyslot) {
    // Values from CLUSTER KEYSLOT on Redis 7.0 (and the Redis Cluster specification).
    EXPECT_EQ(dlock::detail::key_slot("foo"), 12182);
    EXPECT_EQ(dlock::detail::key_slot("{lock:a}"), 6035);
    EXPECT_EQ(dlock::detail::key_slot("{lock:a}:fence"), 6035);
    EXPECT_EQ(dlock::detail::key_slot("{}x"), dlock::detail::key_slot("{}x")); // whole key
}

TEST(lock_names, every_key_of_a_lock_shares_the_lock_slot) {
    std::error_code ec;
    for (const char* name : {"orders", "a{b}c", "{x}", "with:colons", "}x{y}"}) {
        const auto k = dlock::detail::make_keys(name, lock_kind::reentrant, ec);
        ASSERT_FALSE(ec) << name;
        EXPECT_EQ(dlock::detail::key_slot(k.channel), dlock::detail::key_slot(k.key)) << name;
        EXPECT_EQ(dlock::detail::key_slot(k.token_key), dlock::detail::key_slot(k.key)) << name;
    }
}

TEST(lock_names, rejects_empty_names_oversized_names_and_empty_hash_tags) {
    std::error_code ec;
    dlock::detail::make_keys("", lock_kind::reentrant, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    dlock::detail::make_keys(std::string(4097, 'x'), lock_kind::simple, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    // Names for which Redisson's prefix rule would put companion keys in another cluster slot.
    for (const char* name : {"a{}b", "}{", "a{b"}) {
        dlock::detail::make_keys(name, lock_kind::reentrant, ec);
        EXPECT_EQ(ec, errc::invalid_argument) << name;
    }
}

TEST(acquire_logic, a_fresh_reentrant_acquisition_carries_its_fencing_token) {
    const auto out =
        interpret_attempt(lock_kind::reentrant, {}, array({integer(1), integer(42)}), {}, {});
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    EXPECT_EQ(out.token, 42u);
}

TEST(acquire_logic, a_reentry_reports_the_new_hold_count) {
    const auto out =
        interpret_attempt(lock_kind::reentrant, {}, array({integer(2), integer(3)}), {}, {});
    EXPECT_EQ(out.what, attempt_outcome::kind::reentered);
    EXPECT_EQ(out.count, 3);
}

TEST(acquire_logic, a_held_lock_reports_the_holders_ttl) {
    const auto out =
        interpret_attempt(lock_kind::reentrant, {}, array({integer(0), integer(2500)}), {}, {});
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, 2500);
}

TEST(acquire_logic, unexpected_replies_are_protocol_errors_never_success) {
    const resp3::value bad[] = {
        integer(1),                       // not an array
        array({integer(1)}),              // wrong arity
        array({integer(7), integer(1)}),  // unknown status
        array({integer(1), integer(0)}),  // token 0 cannot come from INCR
        array({integer(2), integer(1)}),  // re-entry with count 1
        array({simple("1"), integer(1)}), // status not an integer
        null_reply,                       // Redisson's nil means nothing to us
    };
    for (const auto& r : bad) {
        const auto out = interpret_attempt(lock_kind::reentrant, {}, r, {}, {});
        EXPECT_EQ(out.what, attempt_outcome::kind::error);
        EXPECT_EQ(out.ec, errc::protocol_error);
    }
    const auto out = interpret_attempt(lock_kind::simple, {}, simple("QUEUED"), {}, integer(5));
    EXPECT_EQ(out.ec, errc::protocol_error);
}

TEST(acquire_logic, server_error_replies_are_classified) {
    auto out = interpret_attempt(lock_kind::reentrant, {},
                                 error_reply("OOM command not allowed when used memory"), {}, {});
    EXPECT_EQ(out.ec, errc::out_of_memory);
    out = interpret_attempt(lock_kind::simple, {}, error_reply("READONLY You can't write"), {},
                            integer(1));
    EXPECT_EQ(out.ec, errc::readonly);
    out = interpret_attempt(lock_kind::simple, dlock::make_error_code(errc::ambiguous), null_reply,
                            {}, integer(1));
    EXPECT_EQ(out.ec, errc::ambiguous);
}

TEST(acquire_logic, simple_lock_uses_ok_for_success_and_the_pipelined_pttl_otherwise) {
    auto out = interpret_attempt(lock_kind::simple, {}, simple("OK"), {}, integer(-2));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    out = interpret_attempt(lock_kind::simple, {}, null_reply, {}, integer(900));
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, 900);
    out = interpret_attempt(lock_kind::simple, {}, null_reply,
                            dlock::make_error_code(errc::ambiguous), null_reply);
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, -1);
}

TEST(acquire_logic, a_waiter_sleeps_until_the_holders_expiry_but_never_past_its_deadline) {
    const auto now = std::chrono::steady_clock::now();
    EXPECT_EQ(dlock::detail::sleep_until(now, now + 10s, 200), now + 200ms);
    EXPECT_EQ(dlock::detail::sleep_until(now, now + 100ms, 200), now + 100ms);
    EXPECT_EQ(dlock::detail::sleep_until(now, now + 100ms, -1), now + 100ms);
    EXPECT_EQ(dlock::detail::sleep_until(now, now + 100ms, 0), now);
}

TEST(validity, drift_is_one_percent_of_the_lease_plus_two_milliseconds) {
    EXPECT_EQ(dlock::detail::drift_for(30s), 302ms);
    EXPECT_EQ(dlock::detail::drift_for(100ms), 3ms);
}
