// Hand-over against a real redis-server: a release hands the lock to a waiter of the same
// client (reentrant, simple, and the write side to a waiting writer), local waiters queue, a
// release publishes when another client waits, a write release under the releaser's own read
// hold publishes, and a lease handle takes and hands on a handed-over lock.
#include "lock_test_util.hpp"

#include <asio/use_future.hpp>

#include <atomic>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::test::channel_of;
using dlock::test::command_calls;
using dlock::test::either_mutex;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::sleeping_waiters;

namespace {
/// Scripts the server ran since the last CONFIG RESETSTAT: EVALSHA calls that did not fail
/// (NOSCRIPT, the first use of a script on this server, counts as a failed call) plus the EVALs
/// that answered them.
std::int64_t script_runs(const redis_server& s) {
    return command_calls(s, "evalsha") - dlock::test::command_stat(s, "evalsha", "failed_calls") +
           command_calls(s, "eval");
}
} // namespace

TEST(lock, a_release_hands_the_lock_to_a_sleeping_waiter_of_the_same_client) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (const bool handover : {true, false})
        for (auto kind :
             {dlock::lock_kind::reentrant, dlock::lock_kind::simple, dlock::lock_kind::write}) {
            SCOPED_TRACE(std::string(handover ? "handover " : "no handover ") +
                         std::string(dlock::kind_name(kind)));
            auto o = fast_options(s.url());
            o.handover = handover;
            dlock::client c(o);
            const std::string name = std::string("ho-") + (handover ? "on-" : "off-") +
                                     std::string(dlock::kind_name(kind));
            either_mutex holder(c, name, kind);
            holder->lock();
            const auto holder_token = holder->fencing_token();
            std::optional<std::uint64_t> waiter_token;
            bool waiter_owns = false;
            std::thread waiter([&] {
                either_mutex m(c, name, kind);
                m->lock();
                waiter_token = m->fencing_token();
                waiter_owns = m->is_held_by_this_thread();
                m->unlock();
            });
            ASSERT_TRUE(
                eventually([&] { return sleeping_waiters(c, channel_of(kind, name)) == 1; }, 2s));
            s.cli({"CONFIG", "RESETSTAT"});
            holder->unlock();
            waiter.join();
            // Counted before is_locked(), a script of its own on the write side.
            const auto scripts = script_runs(s);
            const auto publishes = command_calls(s, "publish");

            EXPECT_TRUE(waiter_owns); // the server names the waiter as the owner
            EXPECT_FALSE(holder->is_locked());
            if (kind != dlock::lock_kind::simple) {
                ASSERT_TRUE(holder_token && waiter_token);
                EXPECT_EQ(*waiter_token, *holder_token + 1); // a fresh acquisition
            }
            // Hand-over: the holder's release publishes nothing and the waiter makes no
            // attempt (scripts: hand-over + waiter's release). Without: publish, attempt.
            EXPECT_EQ(publishes, handover ? 1 : 2);
            if (kind != dlock::lock_kind::simple) { // holder's script, waiter's release
                EXPECT_EQ(scripts, handover ? 2 : 3);
            }
        }
}

TEST(lock, waiters_of_a_lock_held_by_their_own_client_queue_without_asking_the_server) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string channel = "redisson_lock__channel:{queue}";
    dlock::mutex m = c.make_mutex("queue");
    m.lock(); // 1 script
    s.cli({"CONFIG", "RESETSTAT"});
    std::mutex order_mu;
    std::vector<int> order;
    auto waiter = [&](int id) {
        return std::thread([&, id] {
            dlock::mutex w = c.make_mutex("queue");
            w.lock();
            {
                std::lock_guard lk(order_mu);
                order.push_back(id);
            }
            w.unlock();
        });
    };
    std::thread first = waiter(1); // no subscription yet: attempt, subscribe, last attempt
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    std::thread second = waiter(2); // subscribed here and held here: no attempt, just sleep
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 2; }, 2s));
    EXPECT_EQ(command_calls(s, "evalsha"), 2);
    m.unlock(); // hands over to `first`, which hands over to `second` (FIFO)
    first.join();
    second.join();
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
    EXPECT_EQ(command_calls(s, "evalsha"), 5); // + 2 hand-overs + the last release
    EXPECT_EQ(command_calls(s, "publish"), 1);
}

TEST(lock, a_release_publishes_instead_when_another_client_waits_too) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (auto kind :
         {dlock::lock_kind::reentrant, dlock::lock_kind::simple, dlock::lock_kind::write}) {
        SCOPED_TRACE(std::string(dlock::kind_name(kind)));
        dlock::client c(fast_options(s.url()));
        dlock::client other(fast_options(s.url()));
        const std::string name = "ho-shared-" + std::string(dlock::kind_name(kind));
        const auto channel = channel_of(kind, name);
        either_mutex holder(c, name, kind);
        holder->lock();
        std::atomic<int> acquired{0};
        auto wait_on = [&](dlock::client& cl) {
            return std::thread([&] {
                either_mutex m(cl, name, kind);
                m->lock();
                ++acquired;
                m->unlock();
            });
        };
        std::thread local = wait_on(c);
        std::thread remote = wait_on(other);
        ASSERT_TRUE(eventually(
            [&] {
                return sleeping_waiters(c, channel) == 1 && sleeping_waiters(other, channel) == 1;
            },
            2s));
        s.cli({"CONFIG", "RESETSTAT"});
        holder->unlock();
        local.join();
        remote.join();
        // Another process waits: the holder's release deletes and publishes, so both waiters
        // compete as with Redisson (a hand-over would give the local one the lock every
        // time); then each waiter's release publishes (2 publishes in all after a hand-over).
        EXPECT_EQ(command_calls(s, "publish"), 3);
        EXPECT_EQ(acquired.load(), 2);
        EXPECT_FALSE(holder->is_locked());
    }
}

// The write side hands over to a waiting writer: the hash holds the mode and the waiter's write
// field alone (Redisson's layout of a write hold), and the waiter's announcement, which keeps new
// readers out while a writer waits, is withdrawn as its own acquisition would withdraw it.
TEST(lock, a_write_release_hands_over_to_a_writer_and_withdraws_its_announcement) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string name = "ho-w";
    const std::string marker = "dlock_rwlock_writer:{ho-w}";
    dlock::rw_mutex holder = c.make_rw_mutex(name);
    holder.lock();
    std::promise<void> holds, leave;
    std::thread waiter([&] {
        dlock::rw_mutex m = c.make_rw_mutex(name);
        m.lock();
        holds.set_value();
        leave.get_future().wait();
        m.unlock();
    });
    ASSERT_TRUE(eventually(
        [&] { return sleeping_waiters(c, channel_of(dlock::lock_kind::write, name)) == 1; }, 2s));
    EXPECT_EQ(s.cli({"EXISTS", marker}), "1"); // the waiting writer announced itself
    s.cli({"CONFIG", "RESETSTAT"});
    holder.unlock();
    if (holds.get_future().wait_for(5s) != std::future_status::ready) {
        leave.set_value();
        waiter.join();
        FAIL() << "the waiting writer did not get the lock";
    }
    EXPECT_EQ(command_calls(s, "publish"), 0); // handed over, not published
    EXPECT_EQ(s.cli({"EXISTS", marker}), "0");
    EXPECT_EQ(s.cli({"HGET", name, "mode"}), "write");
    EXPECT_EQ(s.cli({"HLEN", name}), "2");
    // A reader of the same client waits for the writer only, not for a stale announcement.
    leave.set_value();
    waiter.join();
    EXPECT_TRUE(holder.try_lock_shared_for(2s));
    holder.unlock_shared();
}

// A writer that still holds read under its write hold (a downgrade) releases the write side
// as Redisson does, mode read and a published message: the waiting writer must wait for that
// read hold, so nothing is handed over.
TEST(lock, a_write_release_under_the_releasers_read_hold_publishes_instead) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string name = "ho-down";
    dlock::rw_mutex holder = c.make_rw_mutex(name);
    holder.lock();
    holder.lock_shared();
    std::atomic<bool> got{false};
    std::thread waiter([&] {
        dlock::rw_mutex m = c.make_rw_mutex(name);
        m.lock();
        got = true;
        m.unlock();
    });
    ASSERT_TRUE(eventually(
        [&] { return sleeping_waiters(c, channel_of(dlock::lock_kind::write, name)) == 1; }, 2s));
    s.cli({"CONFIG", "RESETSTAT"});
    holder.unlock();
    EXPECT_EQ(s.cli({"HGET", name, "mode"}), "read");
    EXPECT_EQ(command_calls(s, "publish"), 1);
    EXPECT_FALSE(got.load()); // the read hold keeps the writer out
    holder.unlock_shared();
    waiter.join();
    EXPECT_TRUE(got.load());
    EXPECT_EQ(s.cli({"EXISTS", name}), "0");
}

TEST(lock, a_lease_handle_takes_a_handed_over_lock_and_hands_it_on_asynchronously) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string channel = channel_of(dlock::lock_kind::reentrant, "ho-lease");
    dlock::mutex m = c.make_mutex("ho-lease");
    m.lock();
    auto waiting = std::async(std::launch::async, [&] { return c.acquire("ho-lease"); });
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    const auto first = m.fencing_token();
    m.unlock();
    dlock::lease l = waiting.get();
    ASSERT_TRUE(l);
    ASSERT_TRUE(first && l.token());
    EXPECT_EQ(*l.token(), *first + 1);
    // Now the lease hands it back to a thread-bound waiter, through the async release.
    std::optional<std::uint64_t> next;
    std::thread t([&] {
        dlock::mutex m2 = c.make_mutex("ho-lease");
        m2.lock();
        next = m2.fencing_token();
        m2.unlock();
    });
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    s.cli({"CONFIG", "RESETSTAT"});
    const auto second = *l.token();
    l.async_release(asio::use_future).get();
    t.join();
    ASSERT_TRUE(next);
    EXPECT_EQ(*next, second + 1);
    EXPECT_EQ(command_calls(s, "publish"), 1); // only the last release publishes
}
