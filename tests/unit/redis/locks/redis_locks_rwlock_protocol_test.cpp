// Socket-free tests of the read-write lock's two kinds: key names (Redisson's layout plus our
// companion keys), the commands they build, and how every reply is read. A malformed reply is
// errc::protocol_error, never an acquisition, a release or a loss.
#include "redis/locks/names.hpp"
#include "redis/locks/protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::lock_kind;
using dlock::detail::attempt_outcome;
using dlock::detail::protocol_of;
using rk = dlock::detail::release_outcome::kind;
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
resp3::value bulk(std::string s) {
    resp3::value x;
    x.kind = resp3::type::bulk_string;
    x.str = std::move(s);
    return x;
}
resp3::value pair(std::int64_t a, std::int64_t b) {
    return array({integer(a), integer(b)});
}
const resp3::value null_reply{};

const dlock::detail::lock_protocol& read_kind() {
    return protocol_of(lock_kind::read);
}
const dlock::detail::lock_protocol& write_kind() {
    return protocol_of(lock_kind::write);
}

dlock::detail::lock_keys keys_of(const dlock::detail::lock_protocol& p, const std::string& name) {
    std::error_code ec;
    auto k = p.keys(name, ec);
    EXPECT_FALSE(ec) << name;
    return k;
}

std::vector<std::string> args_of(const dlock::detail::command& c) {
    return {c.args().begin(), c.args().end()};
}

} // namespace

TEST(rwlock_names, both_sides_use_redissons_channel_and_only_the_writer_has_a_fencing_counter) {
    const auto r = keys_of(read_kind(), "catalog");
    const auto w = keys_of(write_kind(), "catalog");
    EXPECT_EQ(r.key, "catalog");
    EXPECT_EQ(r.channel, "redisson_rwlock:{catalog}");
    EXPECT_EQ(w.channel, r.channel);
    EXPECT_TRUE(r.token_key.empty());
    EXPECT_EQ(w.token_key, "dlock_rwlock_token:{catalog}");
    EXPECT_FALSE(read_kind().has_fencing_token());
    EXPECT_TRUE(write_kind().has_fencing_token());
    EXPECT_TRUE(read_kind().shared_holds());
    EXPECT_FALSE(write_kind().shared_holds());
    for (const char* name : {"a{b}c", "{x}", "with:colons"}) {
        const auto k = keys_of(write_kind(), name);
        EXPECT_EQ(dlock::detail::key_slot(k.channel), k.slot) << name;
        EXPECT_EQ(dlock::detail::key_slot(k.token_key), k.slot) << name;
    }
}

TEST(rwlock_commands, a_read_attempt_names_the_owners_timeout_keys_and_the_writer_marker) {
    dlock::detail::command c;
    const auto k = keys_of(read_kind(), "catalog");
    read_kind().attempt(c, k, "uuid:7", 30s);
    const auto a = args_of(c);
    ASSERT_EQ(a.size(), 8u);
    EXPECT_EQ(a[2], "3");
    EXPECT_EQ(a[3], "catalog");
    EXPECT_EQ(a[4], "{catalog}:uuid:7:rwlock_timeout");
    EXPECT_EQ(a[5], "dlock_rwlock_writer:{catalog}");
    EXPECT_EQ(a[6], "30000");
    EXPECT_EQ(a[7], "uuid:7");
    // A name with a hash tag keeps it (Redisson's suffixName), so every key stays in N's slot.
    const auto tagged = keys_of(read_kind(), "a{b}c");
    read_kind().attempt(c, tagged, "uuid:7", 30s);
    EXPECT_EQ(args_of(c)[4], "a{b}c:uuid:7:rwlock_timeout");
    EXPECT_EQ(dlock::detail::key_slot(args_of(c)[4]), dlock::detail::key_slot("a{b}c"));
}

TEST(rwlock_commands, only_a_writer_that_will_wait_announces_itself) {
    const auto k = keys_of(write_kind(), "catalog");
    dlock::detail::command c;
    write_kind().attempt(c, k, "uuid:7", 30s);
    auto a = args_of(c);
    ASSERT_EQ(a.size(), 9u);
    EXPECT_EQ(a[4], "dlock_rwlock_token:{catalog}");
    EXPECT_EQ(a[5], "dlock_rwlock_writer:{catalog}");
    EXPECT_EQ(a[8], "0");
    write_kind().waiting_attempt(c, k, "uuid:7", 30s, 5s);
    a = args_of(c);
    EXPECT_EQ(a[8], "2000");
}

TEST(rwlock_commands, a_read_renewal_names_each_lock_and_its_key_prefix) {
    dlock::detail::lock_holder h1, h2;
    h1.keys = keys_of(read_kind(), "one");
    h1.owner = "uuid:1";
    h2.keys = keys_of(read_kind(), "t{wo}");
    h2.owner = "uuid:2";
    const dlock::detail::lock_holder* holds[] = {&h1, &h2};
    dlock::detail::command c;
    read_kind().renew(c, holds, 300ms);
    const auto a = args_of(c);
    const std::vector<std::string> want = {"4",     "one", "{one}",  "t{wo}",
                                           "t{wo}", "300", "uuid:1", "uuid:2"};
    EXPECT_EQ(std::vector<std::string>(a.begin() + 2, a.end()), want);
}

TEST(rwlock_commands, the_write_hold_count_asks_for_the_write_field) {
    dlock::detail::command c;
    const auto k = keys_of(write_kind(), "catalog");
    write_kind().hold_count(c, k, "uuid:7");
    EXPECT_EQ(args_of(c), (std::vector<std::string>{"HGET", "catalog", "uuid:7:write"}));
    read_kind().hold_count(c, k, "uuid:7");
    EXPECT_EQ(args_of(c), (std::vector<std::string>{"HGET", "catalog", "uuid:7"}));
}

TEST(rwlock_replies, a_first_read_hold_is_acquired_without_a_token) {
    const auto out = read_kind().read_attempt({}, pair(1, 0));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    EXPECT_EQ(out.token, 0u);
    EXPECT_EQ(read_kind().read_attempt({}, pair(2, 3)).count, 3);
    EXPECT_EQ(read_kind().read_attempt({}, pair(2, 3)).what, attempt_outcome::kind::reentered);
    EXPECT_EQ(read_kind().read_attempt({}, pair(0, 1500)).ttl_ms, 1500);
}

TEST(rwlock_replies, a_fresh_write_hold_carries_its_token_and_an_upgrade_is_refused) {
    auto out = write_kind().read_attempt({}, pair(1, 42));
    EXPECT_EQ(out.what, attempt_outcome::kind::acquired);
    EXPECT_EQ(out.token, 42u);
    out = write_kind().read_attempt({}, pair(3, 0));
    EXPECT_EQ(out.what, attempt_outcome::kind::error);
    EXPECT_EQ(out.ec, errc::invalid_argument);
    out = write_kind().read_attempt({}, pair(0, -1));
    EXPECT_EQ(out.what, attempt_outcome::kind::held);
    EXPECT_EQ(out.ttl_ms, -1);
}

TEST(rwlock_replies, unexpected_attempt_replies_are_protocol_errors_never_success) {
    const resp3::value bad[] = {
        integer(1),                     // not an array
        null_reply,                     // Redisson's nil means nothing to us
        array({integer(1)}),            // wrong arity
        array({bulk("1"), integer(0)}), // status not an integer
        pair(7, 1),                     // unknown status
        pair(2, 1),                     // a re-entry with count 1
    };
    for (const auto* p : {&read_kind(), &write_kind()})
        for (const auto& r : bad) {
            const auto out = p->read_attempt({}, r);
            EXPECT_EQ(out.what, attempt_outcome::kind::error) << p->name();
            EXPECT_EQ(out.ec, errc::protocol_error) << p->name();
        }
    EXPECT_EQ(read_kind().read_attempt({}, pair(1, 5)).ec, errc::protocol_error);  // no token
    EXPECT_EQ(read_kind().read_attempt({}, pair(3, 0)).ec, errc::protocol_error);  // not a reader's
    EXPECT_EQ(write_kind().read_attempt({}, pair(1, 0)).ec, errc::protocol_error); // INCR >= 1
    EXPECT_EQ(write_kind().read_attempt({}, pair(3, 1)).ec, errc::protocol_error);
    EXPECT_EQ(write_kind().read_attempt(dlock::make_error_code(errc::ambiguous), null_reply).ec,
              errc::ambiguous);
}

TEST(rwlock_replies, a_release_is_read_as_released_still_held_or_not_owner_and_nothing_else) {
    for (const auto* p : {&read_kind(), &write_kind()}) {
        EXPECT_EQ(p->read_release({}, integer(1)).what, rk::released) << p->name();
        EXPECT_EQ(p->read_release({}, integer(0)).what, rk::still_held) << p->name();
        EXPECT_EQ(p->read_release({}, null_reply).what, rk::not_owner) << p->name();
        // A final write release answers 1 + receivers (the polite release reads it).
        EXPECT_EQ(p->read_release({}, integer(4)).receivers, 3) << p->name();
        EXPECT_EQ(p->read_release({}, integer(1)).receivers, 0) << p->name();
        for (const auto& r : {integer(-1), bulk("1"), pair(2, 0), pair(1, 3)}) {
            const auto out = p->read_release({}, r);
            EXPECT_EQ(out.what, rk::error) << p->name();
            EXPECT_EQ(out.ec, errc::protocol_error) << p->name();
        }
    }
}

TEST(rwlock_replies, a_hold_count_must_be_a_count) {
    std::error_code ec;
    EXPECT_EQ(read_kind().read_hold_count(bulk("3"), "o", ec), 3);
    EXPECT_FALSE(ec);
    EXPECT_EQ(write_kind().read_hold_count(null_reply, "o", ec), 0);
    EXPECT_FALSE(ec);
    for (const auto& r : {bulk("x"), bulk("-1"), pair(1, 1)}) {
        EXPECT_EQ(write_kind().read_hold_count(r, "o", ec), 0);
        EXPECT_EQ(ec, errc::protocol_error);
        ec.clear();
    }
}

TEST(rwlock_replies, a_write_unlock_wakes_every_waiter_and_a_read_unlock_one) {
    EXPECT_EQ(read_kind().wake_rule()("1"), dlock::pubsub::wake::all);
    EXPECT_EQ(write_kind().wake_rule()("0"), dlock::pubsub::wake::one);
}

TEST(rwlock_commands, a_writer_that_gives_up_withdraws_its_own_marker_and_other_kinds_do_nothing) {
    const auto k = keys_of(write_kind(), "catalog");
    dlock::detail::command c;
    ASSERT_TRUE(write_kind().abandon(c, k, "uuid:7", dlock::pubsub::mode::classic));
    const auto a = args_of(c);
    EXPECT_EQ(std::vector<std::string>(a.begin() + 2, a.end()),
              (std::vector<std::string>{"2", "dlock_rwlock_writer:{catalog}",
                                        "redisson_rwlock:{catalog}", "uuid:7", "PUBLISH"}));
    dlock::detail::command none;
    EXPECT_FALSE(read_kind().abandon(none, k, "uuid:7", dlock::pubsub::mode::classic));
    EXPECT_FALSE(
        protocol_of(lock_kind::reentrant).abandon(none, k, "uuid:7", dlock::pubsub::mode::classic));
    EXPECT_TRUE(none.empty());
}
