// dlock::mutex and dlock::simple_mutex against a real redis-server: exclusion, reentrancy,
// ownership, leases, the watchdog, loss signals, waiting without polling, TimedLockable.
#include "redis/client_impl.hpp"
#include "redis/renewal.hpp"
#include "redis/scripts.hpp"
#include "test_util.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::one_subscriber;
using dlock::test::redis_server;

namespace {

dlock::client_options watchdog_options(const std::string& url) {
    auto o = fast_options(url);
    o.watchdog_lease = 300ms; // renewed every 100 ms
    return o;
}

std::int64_t commands_processed(const redis_server& s) {
    const auto info = s.cli({"INFO", "stats"});
    const auto at = info.find("total_commands_processed:");
    return std::stoll(info.substr(at + 25));
}

/// How many waiters of `c` sleep on `channel` (asked on c's I/O thread).
std::size_t sleeping_waiters(dlock::client& c, const std::string& channel) {
    auto impl = c.impl();
    std::promise<std::size_t> p;
    asio::post(impl->io(), [&] { p.set_value(impl->subscriber().sleeping_count(channel)); });
    return p.get_future().get();
}

std::int64_t command_calls(const redis_server& s, const std::string& cmd) {
    const auto stats = s.cli({"INFO", "commandstats"});
    const auto tag = "cmdstat_" + cmd + ":calls=";
    const auto at = stats.find(tag);
    return at == std::string::npos ? 0 : std::stoll(stats.substr(at + tag.size()));
}

/// A mutex or a simple_mutex, used through their common base.
class either_mutex {
public:
    either_mutex(dlock::client& c, const std::string& name, dlock::lock_kind kind) {
        if (kind == dlock::lock_kind::reentrant)
            r_.emplace(c.make_mutex(name));
        else
            s_.emplace(c.make_simple_mutex(name));
    }
    dlock::basic_mutex* operator->() { return r_ ? static_cast<dlock::basic_mutex*>(&*r_) : &*s_; }

private:
    std::optional<dlock::mutex> r_;
    std::optional<dlock::simple_mutex> s_;
};

std::string channel_of(dlock::lock_kind kind, const std::string& name) {
    return (kind == dlock::lock_kind::reentrant ? "redisson_lock__channel:{"
                                                : "dlock_simple__channel:{") +
           name + "}";
}

} // namespace

TEST(lock, excludes_threads_of_one_process) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    for (auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
        std::atomic<int> inside{0}, max_inside{0};
        int counter = 0;
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                auto run = [&](dlock::basic_mutex& m) {
                    for (int i = 0; i < 100; ++i) {
                        std::scoped_lock g(m);
                        const int now = ++inside;
                        int seen = max_inside.load();
                        while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
                        }
                        ++counter;
                        --inside;
                    }
                };
                if (kind == dlock::lock_kind::reentrant) {
                    dlock::mutex m = c.make_mutex("excl");
                    run(m);
                } else {
                    dlock::simple_mutex m = c.make_simple_mutex("excl-simple");
                    run(m);
                }
            });
        for (auto& th : threads)
            th.join();
        EXPECT_EQ(max_inside.load(), 1);
        EXPECT_EQ(counter, 800);
    }
}

TEST(lock, excludes_processes_that_share_a_counter_in_redis) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto* shared = static_cast<std::atomic<int>*>(::mmap(nullptr, 2 * sizeof(std::atomic<int>),
                                                         PROT_READ | PROT_WRITE,
                                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(shared, MAP_FAILED);
    new (&shared[0]) std::atomic<int>(0); // inside
    new (&shared[1]) std::atomic<int>(0); // violations
    s.cli({"SET", "counter", "0"});
    std::vector<pid_t> children;
    for (int p = 0; p < 3; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 0;
            try {
                dlock::client c(fast_options(s.url()));
                dlock::mutex m = c.make_mutex("proc-lock");
                for (int i = 0; i < 50; ++i) {
                    std::scoped_lock g(m);
                    if (shared[0].fetch_add(1) != 0) shared[1].fetch_add(1);
                    const auto v = std::stoll(c.command({"GET", "counter"}).str);
                    c.command({"SET", "counter", std::to_string(v + 1)});
                    shared[0].fetch_sub(1);
                }
            } catch (...) {
                rc = 1;
            }
            ::_exit(rc);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(shared[1].load(), 0);
    EXPECT_EQ(s.cli({"GET", "counter"}), "150");
    ::munmap(shared, 2 * sizeof(std::atomic<int>));
}

TEST(lock, is_reentrant_with_hold_counts_and_one_fencing_token) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("reentrant");
    m.lock();
    const auto token = m.fencing_token();
    ASSERT_TRUE(token.has_value());
    m.lock();
    EXPECT_EQ(m.hold_count(), 2);
    EXPECT_EQ(m.fencing_token(), token);
    EXPECT_TRUE(m.is_held_by_this_thread());
    m.unlock();
    EXPECT_EQ(m.hold_count(), 1);
    EXPECT_TRUE(m.is_locked());
    m.unlock();
    EXPECT_EQ(m.hold_count(), 0);
    EXPECT_FALSE(m.is_locked());
    EXPECT_FALSE(m.fencing_token().has_value());
}

TEST(lock, fencing_tokens_strictly_increase_across_acquisitions_and_clients) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    std::uint64_t last = 0;
    for (int i = 0; i < 10; ++i) {
        auto& c = i % 2 ? a : b;
        dlock::mutex m = c.make_mutex("fenced");
        std::scoped_lock g(m);
        const auto t = m.fencing_token().value();
        EXPECT_GT(t, last);
        last = t;
    }
}

TEST(lock, unlock_by_a_non_owner_is_not_owner_and_leaves_the_lock_held) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("owned");
    ma.lock();
    std::thread other([&] {
        dlock::mutex m = a.make_mutex("owned");
        std::error_code ec;
        m.unlock(ec);
        EXPECT_EQ(ec, errc::not_owner);
    });
    other.join();
    dlock::mutex mb = b.make_mutex("owned");
    try {
        mb.unlock();
        ADD_FAILURE() << "expected not_owner";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::not_owner);
    }
    EXPECT_TRUE(ma.is_held_by_this_thread());
    EXPECT_FALSE(mb.try_lock());
    ma.unlock();
}

TEST(lock, a_fixed_lease_expires_and_frees_the_lock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("lease");
    ma.lock(200ms);
    dlock::mutex mb = b.make_mutex("lease");
    EXPECT_FALSE(mb.try_lock());
    EXPECT_TRUE(mb.try_lock_for(2s)); // woken by the holder's expiry (TTL-bounded sleep)
    mb.unlock();
    std::error_code ec;
    ma.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST(lock, try_lock_for_and_until_honour_the_wait_deadline) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("deadline");
    ma.lock();
    dlock::mutex mb = b.make_mutex("deadline");
    for (auto wait : {50ms, 200ms}) {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_FALSE(mb.try_lock_for(wait));
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(took, wait);
        EXPECT_LT(took, wait + 50ms);
    }
    const auto t0 = std::chrono::system_clock::now();
    EXPECT_FALSE(mb.try_lock_until(t0 + 100ms));
    EXPECT_GE(std::chrono::system_clock::now() - t0, 100ms);
    ma.unlock();
}

TEST(lock, the_watchdog_keeps_a_lock_alive_past_several_leases) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("watched");
    ma.lock();
    dlock::mutex mb = b.make_mutex("watched");
    const auto until = std::chrono::steady_clock::now() + 1500ms; // five leases
    while (std::chrono::steady_clock::now() < until) {
        EXPECT_FALSE(mb.try_lock());
        EXPECT_GT(std::stoll(s.cli({"PTTL", "watched"})), 0);
        std::this_thread::sleep_for(100ms); // scenario pacing, not synchronisation
    }
    EXPECT_FALSE(ma.stop_token().stop_requested());
    EXPECT_GT(ma.valid_until(), std::chrono::steady_clock::now());
    ma.unlock();
    EXPECT_EQ(s.cli({"EXISTS", "watched"}), "0");
}

TEST(lock, renewal_stops_when_the_owning_mutex_object_dies) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    {
        dlock::mutex ma = a.make_mutex("orphan");
        ma.lock();
    } // destroyed while holding: renewal stops, the key expires within a lease
    EXPECT_TRUE(eventually([&] { return s.cli({"EXISTS", "orphan"}) == "0"; }, 2s));
}

TEST(lock, a_killed_holder_process_frees_the_lock_within_one_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        dlock::client c(watchdog_options(s.url()));
        dlock::mutex m = c.make_mutex("killed");
        m.lock();
        const char x = 'x';
        (void)!::write(ready[1], &x, 1);
        for (;;)
            ::pause();
    }
    char x = 0;
    ASSERT_EQ(::read(ready[0], &x, 1), 1);
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("killed");
    EXPECT_FALSE(m.try_lock());
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    EXPECT_TRUE(m.try_lock_for(3s));
    EXPECT_LE(std::chrono::steady_clock::now() - t0, 300ms + 150ms);
    m.unlock();
    ::close(ready[0]);
    ::close(ready[1]);
}

TEST(lock, loss_by_deletion_requests_stop_runs_callbacks_and_ends_validity) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    dlock::mutex m = a.make_mutex("deleted");
    m.lock();
    std::atomic<bool> called{false};
    m.on_lost([&] { called = true; });
    const auto token = m.stop_token();
    s.cli({"DEL", "deleted"});
    EXPECT_TRUE(eventually([&] { return token.stop_requested(); }, 1s));
    EXPECT_TRUE(called.load());
    EXPECT_LT(m.valid_until(), std::chrono::steady_clock::now());
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_EQ(s.cli({"EXISTS", "deleted"}), "0"); // never silently re-acquired
}

TEST(lock, loss_to_another_owner_is_signalled) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    dlock::mutex m = a.make_mutex("stolen");
    m.lock();
    const auto token = m.stop_token();
    s.cli({"DEL", "stolen"});
    s.cli({"HSET", "stolen", "00000000-0000-0000-0000-000000000000:1", "1"});
    EXPECT_TRUE(eventually([&] { return token.stop_requested(); }, 1s));
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_EQ(s.cli({"HGET", "stolen", "00000000-0000-0000-0000-000000000000:1"}), "1");
}

TEST(lock, loss_by_deadline_when_the_server_stalls_past_the_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto o = watchdog_options(s.url());
    o.command_timeout = 3s; // renewals stay in flight; only the validity deadline can fire
    dlock::client a(o);
    dlock::lease l = a.acquire("stalled");
    ASSERT_TRUE(l);
    std::thread sleeper([&] { s.cli({"DEBUG", "SLEEP", "1"}); });
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(eventually([&] { return l.stop_token().stop_requested(); }, 2s));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
    sleeper.join();
    EXPECT_TRUE(l.lost());
}

TEST(lock, a_fixed_lease_that_ends_unreleased_is_signalled_as_lost) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    auto l = a.acquire("fixed", {.lease = 150ms});
    ASSERT_TRUE(l);
    EXPECT_TRUE(eventually([&] { return l.lost(); }, 1s));
    EXPECT_TRUE(l.stop_token().stop_requested());
    std::error_code ec;
    l.release(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST(lock, a_waiter_is_woken_by_the_unlock_message_without_polling) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("wake");
    ma.lock(30s);
    dlock::test::blocked_waiter waiter(b, "wake");
    // The waiter subscribes; while the holder keeps a 30 s lease it must not poll.
    ASSERT_TRUE(eventually([&] { return one_subscriber(s, "redisson_lock__channel:{wake}"); }, 2s));
    const auto before = commands_processed(s);
    std::this_thread::sleep_for(500ms); // a window in which a poller would send commands
    const auto during = commands_processed(s) - before;
    EXPECT_LE(during, 3); // INFO itself and at most a health check
    const auto released = std::chrono::steady_clock::now();
    ma.unlock();
    waiter.join();
    EXPECT_TRUE(waiter.acquired.load());
    EXPECT_LT(waiter.acquired_at - released, 200ms);
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
}

TEST(lock, a_second_local_waiter_reuses_the_active_subscription_with_one_attempt) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    { // load the scripts into the server's cache, then count from zero
        dlock::mutex warm = holder.make_mutex("warm");
        warm.lock(30s);
        warm.unlock();
    }
    s.cli({"CONFIG", "RESETSTAT"});
    const auto evalsha_calls = [&] { return command_calls(s, "evalsha"); };
    dlock::mutex m = holder.make_mutex("shared-sub");
    m.lock(30s);                                        // 1 script
    dlock::test::blocked_waiter first(c, "shared-sub"); // attempt, subscribe, last attempt: 2
    ASSERT_TRUE(
        eventually([&] { return one_subscriber(s, "redisson_lock__channel:{shared-sub}"); }, 2s));
    ASSERT_TRUE(eventually([&] { return evalsha_calls() == 3; }, 2s));
    // The subscription of `first` was confirmed before this waiter's attempt was sent: that
    // attempt is its last one before sleeping.
    dlock::test::blocked_waiter second(c, "shared-sub");
    ASSERT_TRUE(eventually([&] { return evalsha_calls() == 4; }, 2s));
    m.unlock();    // 1: wakes `first`
    first.join();  // 1 attempt + 1 hand-over to `second` (a waiter of the same client)
    second.join(); // 1 release
    EXPECT_TRUE(first.acquired.load());
    EXPECT_TRUE(second.acquired.load());
    EXPECT_EQ(evalsha_calls(), 8); // 9 if the second waiter had tried twice before sleeping
}

TEST(lock, a_release_hands_the_lock_to_a_sleeping_waiter_of_the_same_client) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (const bool handover : {true, false})
        for (auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
            SCOPED_TRACE(std::string(handover ? "handover " : "no handover ") +
                         (kind == dlock::lock_kind::reentrant ? "lock" : "simple"));
            auto o = fast_options(s.url());
            o.handover = handover;
            dlock::client c(o);
            const std::string name = std::string("ho-") + (handover ? "on-" : "off-") +
                                     (kind == dlock::lock_kind::reentrant ? "r" : "s");
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
            EXPECT_TRUE(waiter_owns); // the server names the waiter as the owner
            EXPECT_FALSE(holder->is_locked());
            if (kind == dlock::lock_kind::reentrant) {
                ASSERT_TRUE(holder_token && waiter_token);
                EXPECT_EQ(*waiter_token, *holder_token + 1); // a fresh acquisition
            }
            // Hand-over: the holder's release publishes nothing and the waiter makes no
            // attempt (scripts: hand-over + waiter's release). Without: publish, attempt.
            EXPECT_EQ(command_calls(s, "publish"), handover ? 1 : 2);
            if (kind == dlock::lock_kind::reentrant) { // holder's script, waiter's release
                EXPECT_EQ(command_calls(s, "evalsha"), handover ? 2 : 3);
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

TEST(lock, a_subscription_outlives_its_last_waiter_briefly_and_then_goes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    const std::string channel = "redisson_lock__channel:{linger}";
    dlock::mutex m = holder.make_mutex("linger");
    m.lock();
    dlock::test::blocked_waiter first(c, "linger");
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    m.unlock();
    first.join();
    // No waiter is left, but the subscription stays for subscriber::linger (100 ms)...
    EXPECT_TRUE(one_subscriber(s, channel));
    // ... so a waiter that comes back at once reuses it: no second SUBSCRIBE, one attempt.
    m.lock();
    s.cli({"CONFIG", "RESETSTAT"});
    dlock::test::blocked_waiter second(c, "linger");
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    EXPECT_EQ(command_calls(s, "subscribe"), 0);
    EXPECT_EQ(command_calls(s, "evalsha"), 1);
    m.unlock();
    second.join();
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
}

TEST(lock, a_release_publishes_instead_when_another_client_waits_too) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
        dlock::client c(fast_options(s.url()));
        dlock::client other(fast_options(s.url()));
        const std::string name =
            std::string("ho-shared-") + (kind == dlock::lock_kind::reentrant ? "r" : "s");
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

TEST(lock, waiters_that_give_up_leave_no_subscription_behind) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("giveup");
    ma.lock();
    std::vector<std::thread> ws;
    for (int i = 0; i < 4; ++i)
        ws.emplace_back([&] {
            dlock::mutex m = b.make_mutex("giveup");
            EXPECT_FALSE(m.try_lock_for(100ms));
        });
    for (auto& w : ws)
        w.join();
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
    ma.unlock();
}

TEST(lock, every_script_is_named_by_the_sha1_redis_computes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    // A wrong digest would still work (NOSCRIPT, then EVAL) but resend every script's text.
    for (int i = 0; i < static_cast<int>(dlock::detail::script_id::count_); ++i) {
        const auto& sc = dlock::detail::get_script(static_cast<dlock::detail::script_id>(i));
        const auto v = c.command({"SCRIPT", "LOAD", std::string(sc.text)});
        EXPECT_EQ(v.str, sc.sha) << "script " << i;
    }
}

TEST(lock, script_flush_mid_run_is_survived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("flush");
    for (int i = 0; i < 20; ++i) {
        if (i % 5 == 0) s.cli({"SCRIPT", "FLUSH"});
        std::scoped_lock g(m);
    }
    EXPECT_FALSE(m.is_locked());
}

TEST(lock, works_with_standard_lock_helpers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex a = c.make_mutex("std-a");
    dlock::mutex b = c.make_mutex("std-b");
    {
        std::unique_lock<dlock::mutex> u(a, std::defer_lock);
        EXPECT_TRUE(u.try_lock_for(100ms));
        EXPECT_TRUE(u.owns_lock());
    }
    {
        std::scoped_lock both(a, b);
        EXPECT_TRUE(a.is_held_by_this_thread());
        EXPECT_TRUE(b.is_held_by_this_thread());
    }
    std::lock(a, b);
    a.unlock();
    b.unlock();
    {
        std::unique_lock<dlock::mutex> u(a, std::chrono::system_clock::now() + 100ms);
        EXPECT_TRUE(u.owns_lock());
    }
    EXPECT_FALSE(a.is_locked());
    EXPECT_FALSE(b.is_locked());
}

TEST(lock, a_simple_mutex_is_not_reentrant_and_says_so) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::simple_mutex m = c.make_simple_mutex("simple");
    m.lock();
    EXPECT_FALSE(m.fencing_token().has_value());
    EXPECT_EQ(s.cli({"TYPE", "simple"}), "string");
    EXPECT_EQ(s.cli({"GET", "simple"}).size(), 32u); // 128-bit token in hex
    std::error_code ec;
    EXPECT_FALSE(m.try_lock_for(0ms, std::nullopt, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    m.unlock();
    EXPECT_EQ(s.cli({"EXISTS", "simple"}), "0");
}

TEST(lock, invalid_names_and_leases_are_rejected) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    for (const char* bad : {"", "a{}b"}) {
        try {
            auto m = c.make_mutex(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::invalid_argument);
        }
    }
    dlock::mutex m = c.make_mutex("ok");
    std::error_code ec;
    EXPECT_FALSE(m.try_lock_for(10ms, 0ms, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    c.acquire("ok", {.lease = -5ms}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    c.acquire("ok", {.retry = dlock::retry_policy{.attempts = 0}}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(lock, an_unreachable_server_fails_lock_within_bounds) {
    const auto port = dlock::test::free_port();
    auto o = fast_options("redis://127.0.0.1:" + std::to_string(port));
    o.command_timeout = 300ms;
    dlock::client c(o);
    dlock::mutex m = c.make_mutex("nowhere");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    m.lock(ec);
    EXPECT_TRUE(ec == errc::timeout || ec == errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(lock, a_waiter_resubscribes_after_its_pubsub_connection_is_killed) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("resub");
    ma.lock(30s);
    dlock::test::blocked_waiter waiter(b, "resub");
    const auto subscribed = [&] { return one_subscriber(s, "redisson_lock__channel:{resub}"); };
    ASSERT_TRUE(eventually(subscribed, 2s));
    const auto before = s.cli({"CLIENT", "LIST", "TYPE", "pubsub"});
    ASSERT_FALSE(before.empty());
    s.cli({"CLIENT", "KILL", "TYPE", "pubsub"});
    // The subscriber reconnects (a new client id) and subscribes again by itself.
    ASSERT_TRUE(eventually(
        [&] {
            const auto now = s.cli({"CLIENT", "LIST", "TYPE", "pubsub"});
            return !now.empty() &&
                   now.substr(0, now.find(' ')) != before.substr(0, before.find(' ')) &&
                   subscribed();
        },
        3s));
    const auto released = std::chrono::steady_clock::now();
    ma.unlock();
    waiter.join();
    EXPECT_TRUE(waiter.acquired.load());
    EXPECT_LT(waiter.acquired_at - released, 500ms); // woken by the message, not the 30 s TTL
}

TEST(lock, the_watchdog_renews_many_locks_in_batches_of_one_hundred) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    std::vector<dlock::lease> held;
    for (int i = 0; i < 250; ++i)
        held.push_back(c.acquire("batch:" + std::to_string(i)));
    auto& renewal = c.impl()->renewal();
    // (ticks, batches) read on the I/O thread, between two ticks: a tick counts itself first
    // and then sends its batches, so two plain reads from here could split one tick.
    const auto snapshot = [&] {
        std::promise<std::pair<std::uint64_t, std::uint64_t>> p;
        asio::post(c.impl()->io(), [&] { p.set_value({renewal.ticks(), renewal.batches_sent()}); });
        return p.get_future().get();
    };
    const auto [ticks0, batches0] = snapshot();
    ASSERT_TRUE(eventually([&] { return renewal.ticks() >= ticks0 + 3; }, 2s));
    const auto [ticks1, batches1] = snapshot();
    const auto ticks = ticks1 - ticks0;
    const auto batches = batches1 - batches0;
    // 250 locks = 3 scripts per period (100 + 100 + 50), not 250 round trips.
    EXPECT_LE(batches, 3 * ticks);
    EXPECT_GE(batches, 3 * (ticks - 1));
    for (auto& l : held)
        EXPECT_FALSE(l.lost());
    EXPECT_GT(std::stoll(s.cli({"PTTL", "batch:0"})), 0);
}

TEST(lock, a_waiter_ends_with_cancelled_when_its_client_shuts_down) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("shutdown");
    ma.lock(30s);
    auto b = std::make_unique<dlock::client>(fast_options(s.url()));
    dlock::mutex mb = b->make_mutex("shutdown"); // keeps b's internals alive past b
    std::error_code ec;
    std::thread waiter([&] { mb.lock(ec); });
    ASSERT_TRUE(
        eventually([&] { return one_subscriber(s, "redisson_lock__channel:{shutdown}"); }, 2s));
    b.reset(); // the waiter must not sleep for the holder's 30 s lease
    waiter.join();
    EXPECT_EQ(ec, errc::cancelled);
    ma.unlock();
}

TEST(lock, the_release_script_with_an_unlock_latch_answers_a_repeated_request_the_same) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string text(
        dlock::detail::get_script(dlock::detail::script_id::reentrant_release).text);
    c.command({"HSET", "latched", "owner:1", "2"});
    const auto release = [&](const std::string& latch) {
        return c.command({"EVAL", text, "3", "latched", "redisson_lock__channel:{latched}", latch,
                          "0", "30000", "owner:1", "PUBLISH", "30000"});
    };
    const std::string l1 = "redisson_unlock_latch:{latched}:1";
    const std::string l2 = "redisson_unlock_latch:{latched}:2";
    EXPECT_EQ(release(l1).integer, 0); // 2 -> 1, still held
    EXPECT_EQ(c.command({"HGET", "latched", "owner:1"}).str, "1");
    EXPECT_EQ(release(l1).integer, 0); // the same request again: latched answer, no decrement
    EXPECT_EQ(c.command({"HGET", "latched", "owner:1"}).str, "1");
    EXPECT_EQ(release(l2).integer, 1); // 1 -> 0: deleted and published
    EXPECT_EQ(c.command({"EXISTS", "latched"}).integer, 0);
    EXPECT_EQ(release(l2).integer, 1); // repeated: still "released", nothing else happens
    EXPECT_GT(std::stoll(s.cli({"PTTL", l2})), 0);
    EXPECT_TRUE(release("redisson_unlock_latch:{latched}:3").is_null()); // not the owner
}
