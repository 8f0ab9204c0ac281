// Socket-free tests of the lock kinds' protocols: key names and slots, how each reply is
// read (attempt, release, hand-over, renewal), sleep bounds, validity drift.
#include "redis/hold.hpp"
#include "redis/locks/names.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/resp3/parser.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::lock_kind;
using dlock::detail::attempt_outcome;
using dlock::detail::protocol_of;
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
        const auto k = protocol_of(lock_kind::reentrant).keys(name, ec);
        ASSERT_FALSE(ec) << name;
        EXPECT_EQ(dlock::detail::key_slot(k.channel), dlock::detail::key_slot(k.key)) << name;
        EXPECT_EQ(dlock::detail::key_slot(k.token_key), dlock::detail::key_slot(k.key)) << name;
    }
}

TEST(lock_names, rejects_empty_names_oversized_names_and_empty_hash_tags) {
    std::error_code ec;
    protocol_of(lock_kind::reentrant).keys("", ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    protocol_of(lock_kind::simple).keys(std::string(4097, 'x'), ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    // Names for which Redisson's prefix rule would put companion keys in another cluster slot.
    for (const char* name : {"a{}b", "}{", "a{b"}) {
        protocol_of(lock_kind::reentrant).keys(name, ec);
        EXPECT_EQ(ec, errc::invalid_argument) << name;
    }
}

TEST(acquire_reading, a_fresh_reentrant_acquisition_carries_its_fencing_token) {
    const auto out =
        protocol_of(lock_kind::reentrant).read_attempt({}, array({integer(1), integer(42)}));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    EXPECT_EQ(out.token, 42u);
}

TEST(acquire_reading, a_reentry_reports_the_new_hold_count) {
    const auto out =
        protocol_of(lock_kind::reentrant).read_attempt({}, array({integer(2), integer(3)}));
    EXPECT_EQ(out.what, attempt_outcome::kind::reentered);
    EXPECT_EQ(out.count, 3);
}

TEST(acquire_reading, a_held_lock_reports_the_holders_ttl) {
    const auto out =
        protocol_of(lock_kind::reentrant).read_attempt({}, array({integer(0), integer(2500)}));
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, 2500);
}

TEST(acquire_reading, unexpected_replies_are_protocol_errors_never_success) {
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
        const auto out = protocol_of(lock_kind::reentrant).read_attempt({}, r);
        EXPECT_EQ(out.what, attempt_outcome::kind::error);
        EXPECT_EQ(out.ec, errc::protocol_error);
    }
    const auto out = protocol_of(lock_kind::simple).read_attempt({}, simple("QUEUED"));
    EXPECT_EQ(out.ec, errc::protocol_error);
    // A semaphore permit is never re-entered: its script never answers {2, count}.
    for (const auto& r : bad) {
        const auto sem = protocol_of(lock_kind::semaphore).read_attempt({}, r);
        EXPECT_EQ(sem.ec, errc::protocol_error);
    }
    const auto sem =
        protocol_of(lock_kind::semaphore).read_attempt({}, array({integer(2), integer(3)}));
    EXPECT_EQ(sem.what, attempt_outcome::kind::error);
    EXPECT_EQ(sem.ec, errc::protocol_error);
}

TEST(acquire_reading, a_semaphore_reads_a_permit_and_a_full_semaphores_wait) {
    const auto& p = protocol_of(lock_kind::semaphore);
    auto out = p.read_attempt({}, array({integer(1), integer(9)}));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    EXPECT_EQ(out.token, 9U);
    out = p.read_attempt({}, array({integer(0), integer(750)}));
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, 750);
}

TEST(acquire_reading, a_double_or_boolean_where_an_integer_is_expected_is_never_success) {
    // RESP3 doubles (`,nan`, `,inf`, even `,1`), booleans and big numbers are valid replies of
    // their own types; where a lock reply has an integer they are protocol errors, never a
    // grant, a token or a TTL. Parsed from the wire, so the parser's reading of them is used.
    using rk = dlock::detail::release_outcome::kind;
    const auto parse = [](std::string_view bytes) {
        resp3::parser p;
        std::size_t used = 0;
        std::error_code ec;
        auto v = p.consume(bytes, used, ec);
        EXPECT_FALSE(ec) << bytes;
        EXPECT_EQ(used, bytes.size()) << bytes;
        return v.value_or(resp3::value{});
    };
    const char* const replies[] = {
        ",nan\r\n",
        ",inf\r\n",
        ",1\r\n",
        "#t\r\n",
        "(1\r\n",
        "*2\r\n,nan\r\n:1\r\n",
        "*2\r\n:1\r\n,nan\r\n",
        "*2\r\n:1\r\n,inf\r\n",
        "*2\r\n,1\r\n,7\r\n",
        "*2\r\n#t\r\n:7\r\n",
        "*2\r\n:1\r\n#t\r\n",
        "*2\r\n(1\r\n(7\r\n",
        "*2\r\n:0\r\n,nan\r\n",
        "*2\r\n:2\r\n,inf\r\n",
    };
    for (const auto kind : {lock_kind::reentrant, lock_kind::simple, lock_kind::fair,
                            lock_kind::read, lock_kind::write, lock_kind::semaphore}) {
        const auto& p = protocol_of(kind);
        for (const char* bytes : replies) {
            const auto v = parse(bytes);
            const auto out = p.read_attempt({}, v);
            EXPECT_EQ(out.what, attempt_outcome::kind::error) << p.name() << " " << bytes;
            EXPECT_EQ(out.ec, errc::protocol_error) << p.name() << " " << bytes;
            const auto rel = p.read_release({}, v);
            EXPECT_EQ(rel.what, rk::error) << p.name() << " " << bytes;
            EXPECT_EQ(rel.ec, errc::protocol_error) << p.name() << " " << bytes;
            EXPECT_EQ(dlock::detail::lock_protocol::read_ttl({}, v), -1) << bytes;
        }
    }
    // A renewal batch answered with doubles or booleans renews nothing.
    std::vector<char> ok;
    ASSERT_TRUE(
        dlock::detail::lock_protocol::read_renew({}, parse("*3\r\n,1\r\n#t\r\n,nan\r\n"), 3, ok));
    EXPECT_EQ(ok, std::vector<char>(3, 0));
}

TEST(acquire_reading, server_error_replies_are_classified) {
    auto out = protocol_of(lock_kind::reentrant)
                   .read_attempt({}, error_reply("OOM command not allowed when used memory"));
    EXPECT_EQ(out.ec, errc::out_of_memory);
    out = protocol_of(lock_kind::simple).read_attempt({}, error_reply("READONLY You can't write"));
    EXPECT_EQ(out.ec, errc::readonly);
    out = protocol_of(lock_kind::simple)
              .read_attempt(dlock::make_error_code(errc::ambiguous), null_reply);
    EXPECT_EQ(out.ec, errc::ambiguous);
}

TEST(acquire_reading, simple_lock_uses_ok_for_success_and_asks_the_pttl_after_a_refusal) {
    const auto& p = protocol_of(lock_kind::simple);
    auto out = p.read_attempt({}, simple("OK"));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    out = p.read_attempt({}, null_reply);
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_TRUE(p.ttl_after_refusal());
    EXPECT_EQ(p.read_ttl({}, integer(900)), 900);
    EXPECT_EQ(p.read_ttl(dlock::make_error_code(errc::ambiguous), null_reply), -1);
    EXPECT_FALSE(protocol_of(lock_kind::reentrant).ttl_after_refusal()); // its refusal has it
}

TEST(acquire_reading, a_waiter_sleeps_until_the_holders_expiry_but_never_past_its_deadline) {
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

TEST(release_reading, every_kind_reads_a_malformed_release_reply_as_a_protocol_error) {
    using rk = dlock::detail::release_outcome::kind;
    for (const auto kind : {lock_kind::reentrant, lock_kind::simple}) {
        const auto& p = protocol_of(kind);
        // The released reply is one integer, 1 + receivers; the {1, n} of before 2026-11-26 is
        // not accepted (each client runs its own script by SHA, so none meets the other's).
        for (const auto& r : {simple("OK"), integer(-1), array({integer(1)}),
                              array({integer(1), integer(3)}), simple("4")}) {
            const auto out = p.read_release({}, r);
            EXPECT_EQ(out.what, rk::error) << p.name();
            EXPECT_EQ(out.ec, errc::protocol_error) << p.name();
        }
        const auto published = p.read_release({}, integer(4));
        EXPECT_EQ(published.what, rk::released) << p.name();
        EXPECT_EQ(published.receivers, 3) << p.name();
        EXPECT_EQ(p.read_release({}, integer(1)).receivers, 0) << p.name();
        const auto failed = p.read_release(dlock::make_error_code(errc::ambiguous), null_reply);
        EXPECT_EQ(failed.what, rk::error);
        EXPECT_EQ(failed.ec, errc::ambiguous);
        EXPECT_EQ(p.read_release({}, error_reply("READONLY x")).ec, errc::readonly);
    }
    // Only the server's own "not yours" is not_owner: nil for the reentrant script, 0 for the
    // simple lock's compare-and-delete; the reentrant 0 is a decrement.
    EXPECT_EQ(protocol_of(lock_kind::reentrant).read_release({}, null_reply).what, rk::not_owner);
    // A retried reentrant release answered from its latch: released, receivers unknown (0).
    EXPECT_EQ(protocol_of(lock_kind::reentrant).read_release({}, integer(1)).what, rk::released);
    EXPECT_EQ(protocol_of(lock_kind::simple).read_release({}, integer(1)).what, rk::released);
    EXPECT_EQ(protocol_of(lock_kind::reentrant).read_release({}, integer(0)).what, rk::still_held);
    EXPECT_EQ(protocol_of(lock_kind::simple).read_release({}, integer(0)).what, rk::not_owner);
    EXPECT_EQ(protocol_of(lock_kind::simple).read_release({}, null_reply).what, rk::error);
}

TEST(release_reading, a_handover_reply_is_read_for_the_releaser_and_for_the_waiter) {
    using rk = dlock::detail::release_outcome::kind;
    using hr = dlock::detail::handover_result;
    // The reentrant lock and the write side share the reply: {2, token}, 1 or nil.
    dlock::detail::handover_reading h;
    for (const auto kind : {lock_kind::reentrant, lock_kind::write}) {
        SCOPED_TRACE(std::string(dlock::kind_name(kind)));
        const auto& r = protocol_of(kind);
        EXPECT_TRUE(r.has_handover());
        h = r.read_handover({}, array({integer(2), integer(11)}));
        EXPECT_EQ(h.releaser.what, rk::released);
        EXPECT_EQ(h.waiter, hr::handed_over);
        EXPECT_EQ(h.token, 11u);
        h = r.read_handover({}, integer(1));
        EXPECT_EQ(h.releaser.what, rk::released);
        EXPECT_EQ(h.waiter, hr::published);
        h = r.read_handover({}, null_reply);
        EXPECT_EQ(h.releaser.what, rk::not_owner);
        EXPECT_EQ(h.waiter, hr::unknown);
        h = r.read_handover({}, integer(0)); // never sent by the script: malformed
        EXPECT_EQ(h.releaser.ec, errc::protocol_error);
        h = r.read_handover({}, array({integer(2), integer(0)})); // a token is never 0
        EXPECT_EQ(h.releaser.ec, errc::protocol_error);
        h = r.read_handover(dlock::make_error_code(errc::ambiguous), null_reply);
        EXPECT_EQ(h.releaser.ec, errc::ambiguous);
        EXPECT_EQ(h.waiter, hr::ambiguous);
    }
    // A read release has no hand-over (the write hold appears only when the last reader
    // leaves, which one client cannot tell without the server).
    EXPECT_FALSE(protocol_of(lock_kind::read).has_handover());

    // The fair lock hands over only to its head; when the head was another waiter, ours is
    // told to try again (no message is coming to its own channel), not "published".
    const auto& f = protocol_of(lock_kind::fair);
    h = f.read_handover({}, array({integer(2), integer(12)}));
    EXPECT_EQ(h.waiter, hr::handed_over);
    EXPECT_EQ(h.token, 12u);
    h = f.read_handover({}, integer(1));
    EXPECT_EQ(h.releaser.what, rk::released);
    EXPECT_EQ(h.waiter, hr::unknown);
    EXPECT_EQ(f.read_handover({}, null_reply).releaser.what, rk::not_owner);

    const auto& s = protocol_of(lock_kind::simple);
    h = s.read_handover({}, integer(2));
    EXPECT_EQ(h.releaser.what, rk::released);
    EXPECT_EQ(h.waiter, hr::handed_over);
    EXPECT_EQ(s.read_handover({}, integer(1)).waiter, hr::published);
    EXPECT_EQ(s.read_handover({}, integer(0)).releaser.what, rk::not_owner);
    EXPECT_EQ(s.read_handover({}, simple("OK")).releaser.ec, errc::protocol_error);
}

TEST(renew_reading, a_batch_reply_must_answer_every_hold) {
    std::vector<char> ok;
    EXPECT_TRUE(
        dlock::detail::lock_protocol::read_renew({}, array({integer(1), integer(0)}), 2, ok));
    EXPECT_EQ(ok, (std::vector<char>{1, 0}));
    EXPECT_FALSE(dlock::detail::lock_protocol::read_renew({}, array({integer(1)}), 2, ok));
    EXPECT_FALSE(dlock::detail::lock_protocol::read_renew({}, integer(1), 1, ok));
    EXPECT_FALSE(dlock::detail::lock_protocol::read_renew(dlock::make_error_code(errc::ambiguous),
                                                          array({integer(1)}), 1, ok));
}
