// The PostgreSQL backend behind the public types: dlock::client("postgresql://..."), lease
// handles, thread-bound lock objects with local re-entry, inspect/list, Redis-only calls.
#include "postgres_test_util.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>
#include <dlock/redis.hpp>

#include <filesystem>
#include <future>
#include <optional>
#include <thread>

namespace dlock::test {
namespace {

class pg_client : public pg_suite {};

TEST_F(pg_client, leases_through_dlock_client) {
    dlock::client c(server().url());
    EXPECT_EQ(c.backend_name(), "postgresql");
    auto l = c.acquire("client:lease", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.token());
    EXPECT_GT(l.valid_until(), std::chrono::steady_clock::now());
    dlock::client other(server().url());
    EXPECT_FALSE(other.acquire("client:lease", {.wait = 0ms}));
    std::error_code ec;
    auto st = other.inspect("client:lease", lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(other.list("client:*", ec).size(), 1U);
    const auto token = *l.token();
    l.release();
    auto next = other.acquire("client:lease", {.wait = 0ms});
    ASSERT_TRUE(next);
    EXPECT_GT(*next.token(), token);
    auto shed = other.acquire("client-shed", {.wait = 0ms, .kind = lock_kind::shedlock});
    EXPECT_TRUE(shed);
}

TEST_F(pg_client, mutex_counts_reentry_locally_and_excludes_other_clients) {
    dlock::client a(server().url()), b(server().url());
    auto m = a.make_mutex("client:mutex");
    m.lock();
    m.lock(); // re-entry: counted here, one session on the server
    EXPECT_EQ(granted(), 1);
    auto n = b.make_mutex("client:mutex");
    auto other = std::async(std::launch::async, [&] { return n.try_lock_for(200ms); });
    EXPECT_FALSE(other.get());
    m.unlock();
    EXPECT_EQ(granted(), 1); // still held once
    m.unlock();
    auto again = std::async(std::launch::async, [&] {
        const bool ok = n.try_lock_for(5s);
        if (ok) n.unlock();
        return ok;
    });
    EXPECT_TRUE(again.get());
}

// client::force_unlock(name, kind) on every PostgreSQL kind: it ends a held lock (another
// client takes it at once), says false for a lock nobody holds, and the holder learns it.
TEST_F(pg_client, force_unlock_ends_every_kind) {
    dlock::client a(server().url()), b(server().url());
    for (const auto kind : {lock_kind::reentrant, lock_kind::write, lock_kind::shedlock,
                            lock_kind::lease, lock_kind::versioned, lock_kind::semaphore}) {
        const std::string name = "client:force:" + std::to_string(static_cast<int>(kind));
        acquire_options o{.wait = 2s, .kind = kind};
        if (kind >= lock_kind::shedlock) o.lease = 60s; // no watchdog: nothing renews the row
        auto held = a.acquire(name, o);
        ASSERT_TRUE(held) << name;
        EXPECT_FALSE(b.acquire(name, {.wait = 0ms, .kind = kind}));
        std::error_code ec;
        EXPECT_TRUE(b.force_unlock(name, kind, ec)) << name << ": " << ec.message();
        EXPECT_FALSE(ec);
        auto next = b.acquire(name, {.wait = 2s, .kind = kind});
        EXPECT_TRUE(next) << name;
        if (kind < lock_kind::shedlock) // the holder's session was terminated
            EXPECT_TRUE(eventually([&] { return held.lost(); }, 5s)) << name;
        else
            EXPECT_THROW(held.extend(60s), dlock::error) << name; // at its next renewal
        next.release();
        EXPECT_FALSE(b.force_unlock(name, kind, ec)) << name;
        EXPECT_FALSE(ec);
    }
}

TEST_F(pg_client, redis_only_calls_are_unsupported) {
    dlock::client c(server().url());
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    dlock::redis::command(c, ping, ec);
    EXPECT_EQ(ec, errc::unsupported);
}

TEST_F(pg_client, bad_urls_are_configuration_errors) {
    try {
        dlock::client c(server().url("dlock_key=nope"));
        FAIL() << "accepted a bad dlock_key";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::configuration_error);
        EXPECT_EQ(std::string(e.what()).find(pg_server::password()), std::string::npos);
    }
}

// Threads of this process now (the backend's I/O thread is one of them).
std::size_t threads_now() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
        ++n;
    return n;
}

// The last references to the client and its lease dropped in the async completion handler,
// which runs on the backend's own I/O thread: the engine must not be destroyed under its own
// run() (it was, before: the thread detached and the io_context went away under it). The
// session ends (the lock is freed) and the I/O thread exits by itself.
TEST_F(pg_client, last_references_dropped_in_completion_handler_on_io_thread) {
    const auto before = threads_now();
    auto c = std::make_shared<dlock::client>(server().url());
    std::promise<bool> got;
    auto* cp = c.get();
    cp->async_acquire("client:last-ref", {.wait = 5s},
                      [c = std::move(c), &got](std::error_code ec, dlock::lease l) mutable {
                          const bool ok = !ec && l;
                          c.reset(); // the client (its backend) goes here, on the I/O thread
                          l = dlock::lease(); // and the lease, with the engine's last reference
                          got.set_value(ok);
                      });
    ASSERT_TRUE(got.get_future().get());
    EXPECT_TRUE(eventually([] { return granted() == 0; }, 5s)) << "the session did not end";
    EXPECT_TRUE(eventually([&] { return threads_now() <= before; }, 5s))
        << "the I/O thread did not exit";
    // The server is still usable by a new client (nothing wedged).
    dlock::client again(server().url());
    EXPECT_TRUE(again.acquire("client:last-ref", {.wait = 2s}));
}

// The same from a loss callback: the holder's session is terminated by the server, and the
// on_lost callback (I/O thread) drops the client and the lease.
TEST_F(pg_client, last_references_dropped_in_loss_callback_on_io_thread) {
    const auto before = threads_now();
    struct box {
        std::shared_ptr<dlock::client> c;
        dlock::lease l;
    };
    auto b = std::make_shared<std::optional<box>>(box{});
    (*b)->c = std::make_shared<dlock::client>(server().url());
    (*b)->l = (*b)->c->acquire("client:last-ref-loss", {.wait = 5s});
    ASSERT_TRUE((*b)->l);
    std::promise<bool> lost;
    (*b)->l.on_lost([b, &lost] {
        auto mine = std::move(**b); // the only references: they go when this returns
        b->reset();
        lost.set_value(mine.c->backend_name() == "postgresql");
    });
    std::weak_ptr<std::optional<box>> watch = b;
    b.reset(); // the callback's copy is now the last one
    server().psql("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'");
    auto f = lost.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "no loss signalled";
    EXPECT_TRUE(f.get());
    EXPECT_TRUE(eventually([&] { return threads_now() <= before; }, 5s))
        << "the I/O thread did not exit";
}

} // namespace
} // namespace dlock::test
