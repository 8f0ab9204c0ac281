// Lease handles: not thread-bound, movable, RAII, async forms, fenced writes.
#include "test_util.hpp"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <future>
#include <thread>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;

TEST(lease, an_empty_lease_means_not_acquired) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto a = c.acquire("job");
    ASSERT_TRUE(a);
    EXPECT_TRUE(a.token().has_value());
    auto b = c.acquire("job", {.wait = 0ms});
    EXPECT_FALSE(b);
    EXPECT_FALSE(b.token().has_value());
    auto d = c.acquire("job", {.wait = 50ms, .kind = dlock::lock_kind::reentrant});
    EXPECT_FALSE(d); // another lease is another owner, even in the same thread
}

TEST(lease, moves_releases_on_destruction_and_releases_from_another_thread) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    {
        auto a = c.acquire("moved");
        dlock::lease b = std::move(a);
        EXPECT_FALSE(a);
        EXPECT_TRUE(b);
        EXPECT_EQ(s.cli({"EXISTS", "moved"}), "1");
    }
    EXPECT_EQ(s.cli({"EXISTS", "moved"}), "0");

    auto l = c.acquire("handed");
    std::thread t([l = std::move(l)]() mutable { l.release(); });
    t.join();
    EXPECT_EQ(s.cli({"EXISTS", "handed"}), "0");
    l.release(); // moved-from: no-op
}

TEST(lease, a_released_lease_releases_nothing_twice_and_extend_reports_loss) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto l = c.acquire("ext", {.lease = 500ms});
    ASSERT_TRUE(l);
    l.extend(5s);
    EXPECT_GT(std::stoll(s.cli({"PTTL", "ext"})), 4000);
    EXPECT_GT(l.valid_until(), std::chrono::steady_clock::now() + 4s);
    s.cli({"DEL", "ext"});
    std::error_code ec;
    l.extend(5s, ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_TRUE(l.lost());
}

TEST(lease, simple_leases_carry_no_fencing_token) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto l = c.acquire("plain", {.kind = dlock::lock_kind::simple});
    ASSERT_TRUE(l);
    EXPECT_FALSE(l.token().has_value());
    auto other = c.acquire("plain", {.wait = 20ms, .kind = dlock::lock_kind::simple});
    EXPECT_FALSE(other);
}

TEST(lease, the_spin_policy_retries_a_bounded_number_of_times) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto held = c.acquire("spin", {.kind = dlock::lock_kind::simple});
    const auto t0 = std::chrono::steady_clock::now();
    auto l = c.acquire("spin",
                       {.kind = dlock::lock_kind::simple,
                        .retry = dlock::retry_policy{.attempts = 3, .delay = 20ms, .jitter = 0ms}});
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_FALSE(l);
    EXPECT_GE(took, 40ms);
    EXPECT_LT(took, 400ms);
    held.release();
    auto got = c.acquire(
        "spin", {.kind = dlock::lock_kind::simple, .retry = dlock::retry_policy{.attempts = 2}});
    EXPECT_TRUE(got);
}

TEST(lease, async_acquire_works_with_callbacks_futures_and_coroutines) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));

    std::promise<bool> p;
    c.async_acquire("async-cb", {}, [&](std::error_code ec, dlock::lease l) {
        p.set_value(!ec && static_cast<bool>(l));
    });
    auto f = p.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(f.get());
    EXPECT_TRUE(eventually([&] { return s.cli({"EXISTS", "async-cb"}) == "0"; }, 2s));

    auto fut = c.async_acquire("async-fut", {.wait = 1s}, asio::use_future);
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    auto lf = fut.get();
    EXPECT_TRUE(lf);

    asio::io_context io;
    bool got = false, released = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto l = co_await c.async_acquire("async-co", {.wait = 1s}, asio::use_awaitable);
            got = static_cast<bool>(l) && io.get_executor().running_in_this_thread();
            co_await l.async_release(asio::use_awaitable);
            released = !l;
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    io.run_for(5s);
    EXPECT_TRUE(got);
    EXPECT_TRUE(released);
    EXPECT_EQ(s.cli({"EXISTS", "async-co"}), "0");
}

// max_hold on the async paths that hand a hold out (client::acquire's is the conformance
// suite's): async_acquire and async acquire_all end their leases with loss_cause::max_hold, and
// both refuse a zero max_hold.
TEST(lease, async_acquisitions_take_max_hold) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto l = c.async_acquire("mh-async", {.wait = 1s, .max_hold = 200ms}, asio::use_future).get();
    ASSERT_TRUE(l);
    EXPECT_LE(l.valid_until(), std::chrono::steady_clock::now() + 200ms);
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 5s));
    EXPECT_EQ(l.loss_cause(), dlock::loss_cause::max_hold);
    EXPECT_TRUE(c.acquire("mh-async", {.wait = 5s})) << "released after max_hold";

    const std::vector<dlock::lock_ref> both{{"mh-a", dlock::lock_kind::reentrant},
                                            {"mh-b", dlock::lock_kind::reentrant}};
    auto m = c.async_acquire_all(both, {.wait = 1s, .max_hold = 200ms}, asio::use_future).get();
    ASSERT_TRUE(m);
    ASSERT_TRUE(eventually([&] { return m.lost(); }, 5s));
    EXPECT_TRUE(c.acquire("mh-a", {.wait = 5s}));
    EXPECT_TRUE(c.acquire("mh-b", {.wait = 5s}));

    auto bad = c.async_acquire("mh-bad", {.max_hold = 0ms}, asio::use_future);
    EXPECT_THROW(bad.get(), std::system_error);
    auto bad_all = c.async_acquire_all(both, {.max_hold = 0ms}, asio::use_future);
    EXPECT_THROW(bad_all.get(), std::system_error);
}

TEST(lease, a_fenced_resource_rejects_a_stale_token) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto first = c.acquire("fence-lock", {.lease = 100ms});
    const auto old_token = first.token().value();
    ASSERT_TRUE(eventually([&] { return first.lost(); }, 2s)); // its lease ran out
    auto second = c.acquire("fence-lock");
    const auto new_token = second.token().value();
    EXPECT_GT(new_token, old_token);
    EXPECT_TRUE(dlock::redis::fenced_set(c, "resource", "resource:fence", new_token, "new"));
    EXPECT_FALSE(dlock::redis::fenced_set(c, "resource", "resource:fence", old_token, "stale"));
    EXPECT_EQ(s.cli({"GET", "resource"}), "new");
}

TEST(lease, shortening_a_fixed_lease_moves_its_loss_to_the_new_deadline) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto l = c.acquire("shorten", {.wait = 0ms, .lease = 30s});
    ASSERT_TRUE(l);
    l.extend(300ms); // shorter than before: the loss check must come earlier, not after 30 s
    EXPECT_LT(l.valid_until(), std::chrono::steady_clock::now() + 300ms);
    EXPECT_TRUE(eventually([&] { return l.stop_token().stop_requested(); }, 5s));
    EXPECT_TRUE(l.lost());
}

// client::force_unlock(name, kind) on Redis: the lock object's force_unlock of the kind.
TEST(lease, client_force_unlock_breaks_each_kind) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    using dlock::lock_kind;
    for (const auto kind : {lock_kind::reentrant, lock_kind::simple, lock_kind::fair,
                            lock_kind::write, lock_kind::read}) {
        const std::string name = "force-" + std::to_string(static_cast<int>(kind));
        auto held = c.acquire(name, {.wait = 1s, .kind = kind});
        ASSERT_TRUE(held) << name;
        EXPECT_EQ(s.cli({"EXISTS", name}), "1");
        EXPECT_TRUE(c.force_unlock(name, kind)) << name;
        EXPECT_EQ(s.cli({"EXISTS", name}), "0") << name;
        EXPECT_FALSE(c.force_unlock(name, kind)) << name;
    }
    std::error_code ec;
    EXPECT_FALSE(c.force_unlock("force-x", lock_kind::shedlock, ec));
    EXPECT_EQ(ec, errc::unsupported);
}
