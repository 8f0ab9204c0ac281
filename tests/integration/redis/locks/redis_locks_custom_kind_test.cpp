// A third lock kind that only this test knows: a protocol class and one register_protocol()
// call, nothing else. It goes through the same front-end, wait machine, subscriber, renewal
// and release paths as the built-in kinds (docs/design/redis-locks.md, "Adding a kind").
#include "lock_test_util.hpp"
#include "redis/acquire.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <future>

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::redis_server;
using dlock::test::watchdog_options;
namespace d = dlock::detail;

namespace {

/// A string key holding the owner, like the simple lock, but with its own channel prefix, a
/// wake rule that wakes every waiter, and inline EVAL scripts (a real kind keeps .lua files in
/// its folder; a test cannot add to the embedded table).
class test_kind final : public d::lock_protocol {
public:
    std::string_view name() const noexcept override { return "test-kind"; }
    bool reentrant() const noexcept override { return false; }
    bool has_fencing_token() const noexcept override { return false; }
    d::layout_info layout() const noexcept override { return {"string"}; }

    void attempt(d::command& c, const d::lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        c.plain("EVAL").arg(acquire_lua).arg("1").arg(k.key).arg(owner).number(lease.count());
    }
    d::attempt_outcome read_attempt(std::error_code ec,
                                    const dlock::resp3::value& r) const override {
        d::attempt_outcome out;
        if (!ec) ec = d::reply_error(r);
        if (ec) {
            out.ec = ec;
        } else if (r.is_integer() && r.integer == -3) {
            out.what = d::attempt_outcome::kind::acquired;
        } else if (r.is_integer()) {
            out.what = d::attempt_outcome::kind::held;
            out.ttl_ms = r.integer;
        } else {
            out.ec = dlock::make_error_code(dlock::errc::protocol_error);
        }
        return out;
    }
    void release(d::command& c, const d::lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds, dlock::pubsub::mode) const override {
        c.plain("EVAL").arg(release_lua).arg("2").arg(k.key).arg(k.channel).arg(owner);
    }
    d::release_outcome read_release(std::error_code ec,
                                    const dlock::resp3::value& r) const override {
        if (!ec) ec = d::reply_error(r);
        if (ec) return {d::release_outcome::kind::error, ec};
        if (r.is_integer() && r.integer == 1) return {d::release_outcome::kind::released, {}};
        if (r.is_integer() && r.integer == 0) return {d::release_outcome::kind::not_owner, {}};
        return {d::release_outcome::kind::error,
                dlock::make_error_code(dlock::errc::protocol_error)};
    }
    void renew(d::command& c, std::span<const d::lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        c.plain("EVAL").arg(renew_lua).number(static_cast<std::int64_t>(holds.size()));
        for (const auto* h : holds)
            c.arg(h->keys.key);
        c.number(lease.count());
        for (const auto* h : holds)
            c.arg(h->owner);
    }
    void hold_count(d::command& c, const d::lock_keys& k, std::string_view) const override {
        c.plain("GET").arg(k.key);
    }
    std::int64_t read_hold_count(const dlock::resp3::value& r, std::string_view owner,
                                 std::error_code&) const override {
        return r.is_string() && r.str == owner ? 1 : 0;
    }
    void force_unlock(d::command& c, const d::lock_keys& k, dlock::pubsub::mode m) const override {
        force_unlock_script(c, k, m);
    }
    dlock::pubsub::wake_rule wake_rule() const noexcept override {
        return [](std::string_view) noexcept { return dlock::pubsub::wake::all; };
    }

protected:
    std::string_view channel_prefix() const noexcept override { return "test_kind__channel"; }

private:
    static constexpr std::string_view acquire_lua =
        "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return -3 end "
        "return redis.call('pttl', KEYS[1])";
    static constexpr std::string_view release_lua =
        "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) "
        "redis.call('publish', KEYS[2], 'x') return 1 end return 0";
    static constexpr std::string_view renew_lua =
        "local r = {} for i = 1, #KEYS do "
        "if redis.call('get', KEYS[i]) == ARGV[i + 1] then "
        "redis.call('pexpire', KEYS[i], ARGV[1]) r[i] = 1 else r[i] = 0 end end return r";
};

test_kind& the_kind() {
    static test_kind k;
    static const auto registered = d::register_protocol(k); // the "one line"
    (void)registered;
    return k;
}

struct taken {
    d::acquire_request req;
    std::shared_ptr<d::redis_hold> hold;
};

/// Acquires `name` of the test kind through the library's one front-end.
taken acquire(d::redis_client& c, const std::string& name, dlock::acquire_options opts,
              std::error_code& ec) {
    taken t;
    const auto& p = the_kind();
    const auto keys = p.keys(name, ec);
    if (ec) return t;
    if ((ec = d::prepare(c, p, keys, opts, d::new_owner(c, p, false), t.req))) return t;
    const auto res = d::acquire_blocking(c, t.req, ec);
    if (!ec && res.acquired) t.hold = d::make_hold(c, t.req, res);
    return t;
}

} // namespace

TEST(lock, a_kind_registered_by_a_test_waits_renews_and_releases_like_the_built_in_ones) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    auto& impl = *dlock::detail::access::impl(c);
    ASSERT_GE(the_kind().index(), 2u); // after the built-in kinds
    std::error_code ec;

    // Held past several watchdog leases (300 ms) by batched renewal of this kind.
    auto first = acquire(impl, "custom", {.wait = 0ms}, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(first.hold);
    EXPECT_EQ(s.cli({"TYPE", "custom"}), "string");
    EXPECT_FALSE(first.hold->token); // the kind has no fencing token
    // Four renewal batches of the watchdog (every 100 ms): past the 300 ms lease.
    const auto batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 4; }, 5s));
    EXPECT_FALSE(first.hold->lost());
    EXPECT_EQ(s.cli({"GET", "custom"}), first.hold->owner);

    // A second acquisition waits by notification on the kind's own channel...
    auto waiter = std::async(std::launch::async, [&] {
        std::error_code e;
        auto t = acquire(impl, "custom", {.wait = 5s}, e);
        return std::make_pair(e, t.hold);
    });
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(s, "test_kind__channel:{custom}"); }, 5s));
    // ...and takes the lock when the holder's release publishes there.
    first.hold->releasing = true;
    impl.renewal().remove(first.hold);
    const auto out = d::release_blocking(impl, first.hold);
    EXPECT_EQ(out.what, d::release_outcome::kind::released);
    first.hold->end_released();
    const auto [wait_ec, second] = waiter.get();
    ASSERT_FALSE(wait_ec) << wait_ec.message();
    ASSERT_TRUE(second);
    EXPECT_EQ(s.cli({"GET", "custom"}), second->owner);

    // A release by a stale owner is the kind's "not yours".
    EXPECT_EQ(d::release_blocking(impl, first.hold).what, d::release_outcome::kind::not_owner);
    second->releasing = true;
    impl.renewal().remove(second);
    EXPECT_EQ(d::release_blocking(impl, second).what, d::release_outcome::kind::released);
    second->end_released();
    EXPECT_EQ(s.cli({"EXISTS", "custom"}), "0");
}
