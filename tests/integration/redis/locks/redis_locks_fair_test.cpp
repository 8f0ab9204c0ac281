// The fair lock (Redisson RFairLock layout): arrival order is service order across processes
// and threads, the head is woken on its own channel, a killed waiter is dropped after the place
// timeout, a waiter that gives up leaves at once, and Redisson's own scripts share the queue.
#include "lock_test_util.hpp"
#include "redis/renewal.hpp"

#include <asio/use_future.hpp>

#include <csignal>
#include <future>
#include <sstream>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dlock::test;

namespace {

const std::string queue_of(const std::string& n) {
    return "redisson_lock_queue:{" + n + "}";
}
const std::string timeouts_of(const std::string& n) {
    return "redisson_lock_timeout:{" + n + "}";
}

std::int64_t queue_length(const redis_server& s, const std::string& name) {
    return std::stoll(s.cli({"LLEN", queue_of(name)}));
}

/// Holds `name` as a foreign owner straight through redis-cli (no client in this process, so
/// the test can fork afterwards).
void hold_from_outside(const redis_server& s, const std::string& name) {
    s.cli({"HSET", name, "outside:1", "1"});
    s.cli({"PEXPIRE", name, "60000"});
}

/// Redisson's RFairLock acquire script (redisson.md §2.1), verbatim: ARGV = lease, owner,
/// wait, the client's epoch ms. nil: acquired; a number: queued (or already queued), its TTL.
constexpr const char* redisson_fair_acquire = R"(
while true do
local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
if firstThreadId2 == false then break; end;
local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]);
else break; end;
end;
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2]);
local keys = redis.call('zrange', KEYS[3], 0, -1);
for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end;
redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]);
return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
redis.call('hincrby', KEYS[1], ARGV[2],1); redis.call('pexpire', KEYS[1], ARGV[1]);
return nil;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
local ttl = redis.call('pttl', KEYS[1]); return math.max(0, ttl);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then
ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
)";

/// Redisson's RFairLock unlock script (redisson.md §2.4), verbatim: KEYS = N, queue,
/// timeouts, channel prefix, latch; ARGV = "0", lease, owner, epoch ms, publish, latch TTL.
constexpr const char* redisson_fair_unlock = R"(
local val = redis.call('get', KEYS[5]);
if val ~= false then return tonumber(val); end;
while true do
local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
if firstThreadId2 == false then break; end;
local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]);
else break; end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end;
redis.call('set', KEYS[5], 1, 'px', ARGV[6]); return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[5], 0, 'px', ARGV[6]); return 0;
end;
redis.call('del', KEYS[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end;
return 1;
)";

/// A thread that waits up to 20 s for the fair lock `name` and releases it at once.
std::future<bool> fair_waiter(dlock::client& c, const std::string& name) {
    return std::async(std::launch::async, [&c, name] {
        dlock::fair_mutex m = c.make_fair_mutex(name);
        const bool got = m.try_lock_for(20s);
        if (got) m.unlock();
        return got;
    });
}

std::string epoch_ms() {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
}

std::string redisson_acquire(const redis_server& s, const std::string& name,
                             const std::string& owner) {
    return s.cli({"EVAL", redisson_fair_acquire, "3", name, queue_of(name), timeouts_of(name),
                  "30000", owner, "300000", epoch_ms()});
}

std::string redisson_unlock(const redis_server& s, const std::string& name,
                            const std::string& owner) {
    static int request = 0; // Redisson's latch key is per unlock request
    return s.cli({"EVAL", redisson_fair_unlock, "5", name, queue_of(name), timeouts_of(name),
                  "redisson_lock__channel:{" + name + "}",
                  "redisson_unlock_latch:{" + name + "}:" + std::to_string(++request), "0", "30000",
                  owner, epoch_ms(), "PUBLISH", "3000"});
}

} // namespace

TEST(lock, a_fair_lock_serves_eight_processes_in_the_order_they_arrived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-procs";
    hold_from_outside(s, name); // no client in this process before the forks
    std::vector<pid_t> children;
    for (int i = 0; i < 8; ++i) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 1;
            try {
                dlock::client c(fast_options(s.url()));
                dlock::fair_mutex m = c.make_fair_mutex(name);
                if (m.try_lock_for(20s)) {
                    dlock::redis::command(c, {"RPUSH", "served", std::to_string(i)});
                    m.unlock();
                    rc = 0;
                }
            } catch (...) {
            }
            ::_exit(rc);
        }
        children.push_back(pid);
        // The next process starts only once this one has its place in the queue.
        ASSERT_TRUE(eventually([&] { return queue_length(s, name) == i + 1; }, 10s)) << i;
    }
    dlock::client c(fast_options(s.url()));
    EXPECT_TRUE(c.make_fair_mutex(name).force_unlock()); // wakes the head only
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(s.cli({"LRANGE", "served", "0", "-1"}), "0\n1\n2\n3\n4\n5\n6\n7");
    EXPECT_EQ(queue_length(s, name), 0);
    EXPECT_EQ(s.cli({"ZCARD", timeouts_of(name)}), "0");
}

TEST(lock, a_fair_lock_serves_the_threads_of_one_client_in_the_order_they_arrived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-threads";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock();
    std::mutex order_mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i) {
        threads.emplace_back([&, i] {
            dlock::fair_mutex m = c.make_fair_mutex(name);
            if (!m.try_lock_for(20s)) return;
            {
                std::scoped_lock g(order_mu);
                order.push_back(i);
            }
            m.unlock();
        });
        ASSERT_TRUE(eventually([&] { return queue_length(s, name) == i + 1; }, 10s)) << i;
    }
    holder.unlock(); // no local hand-over: the head of the server's queue is woken
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(lock, a_killed_fair_waiter_stalls_the_queue_only_until_its_place_times_out) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-killed";
    hold_from_outside(s, name);
    const pid_t pid = ::fork();
    if (pid == 0) {
        try {
            auto o = fast_options(s.url());
            o.fair_waiter_timeout = 600ms;
            dlock::client c(o);
            (void)c.make_fair_mutex(name).try_lock_for(60s);
        } catch (...) {
        }
        ::_exit(0);
    }
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 10s));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);

    auto o = fast_options(s.url());
    o.fair_waiter_timeout = 600ms;
    dlock::client c(o);
    auto second = std::async(std::launch::async, [&] {
        dlock::fair_mutex m = c.make_fair_mutex(name);
        const bool got = m.try_lock_for(20s);
        const auto at = std::chrono::steady_clock::now();
        if (got) m.unlock();
        return std::make_pair(got, at);
    });
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 2; }, 10s));
    const auto freed = std::chrono::steady_clock::now();
    s.cli({"DEL", name}); // the dead head is "woken" by nobody; its place must time out
    const auto [got, at] = second.get();
    EXPECT_TRUE(got);
    // The dead waiter's place lasts 600 ms after its last attempt; the live one tries every
    // 200 ms and drops that head once its place has expired: far below the 60 s the dead
    // waiter asked to wait (the bound has slack for a loaded machine).
    EXPECT_LT(at - freed, 3s);
    EXPECT_EQ(queue_length(s, name), 0);
}

TEST(lock, a_fair_waiter_that_gives_up_leaves_the_queue_at_once_and_wakes_the_next) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-leave";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock();
    dlock::fair_mutex quitter = c.make_fair_mutex(name);
    std::atomic<bool> quitter_done{false};
    // The quitter waits 2 s: long enough for the next waiter to queue behind it even under
    // ASan on a busy machine (with 300 ms it had given up before, once).
    std::thread q([&] {
        EXPECT_FALSE(quitter.try_lock_for(2s));
        quitter_done = true;
    });
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 5s));
    auto next = fair_waiter(c, name);
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 2; }, 5s));
    q.join();
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 2s));
    holder.unlock();
    EXPECT_TRUE(next.get());
    EXPECT_EQ(queue_length(s, name), 0);
}

TEST(lock, try_lock_on_a_fair_lock_does_not_jump_a_live_queue) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-try";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex m = c.make_fair_mutex(name);
    // A live waiter of another client at the head, its place valid for a minute.
    s.cli({"RPUSH", queue_of(name), "other:7"});
    const auto now = std::stoll(s.cli({"TIME"}).substr(0, 10)) * 1000;
    s.cli({"ZADD", timeouts_of(name), std::to_string(now + 60000), "other:7"});
    EXPECT_FALSE(m.try_lock());          // free, but not ours to take
    EXPECT_EQ(queue_length(s, name), 1); // try_lock never queues
    EXPECT_FALSE(m.try_lock_for(50ms));  // a timed try queues and leaves again
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 2s));
    // Once that waiter's place has expired it is dropped, and the lock is free for us.
    s.cli({"ZADD", timeouts_of(name), std::to_string(now - 1), "other:7"});
    EXPECT_TRUE(m.try_lock());
    EXPECT_EQ(queue_length(s, name), 0);
    m.unlock();
}

TEST(lock, a_fair_lock_is_reentrant_fenced_and_renewed_by_the_watchdog) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    auto& impl = *dlock::detail::access::impl(c);
    dlock::fair_mutex m = c.make_fair_mutex("fair-reentrant");
    m.lock();
    const auto first = m.fencing_token();
    ASSERT_TRUE(first);
    m.lock();
    EXPECT_EQ(m.hold_count(), 2);
    EXPECT_EQ(s.cli({"TYPE", "fair-reentrant"}), "hash");
    const auto batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 4; }, 5s));
    EXPECT_TRUE(m.is_locked()); // held past four 300 ms leases
    m.unlock();
    m.unlock();
    EXPECT_FALSE(m.is_locked());
    m.lock();
    EXPECT_GT(*m.fencing_token(), *first);
    m.unlock();
    EXPECT_THROW(m.unlock(), dlock::error); // not_owner
}

TEST(lock, a_fair_lease_handle_and_async_acquire_use_the_queue) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto held = c.acquire("fair-lease", {.wait = 0ms, .kind = dlock::lock_kind::fair});
    ASSERT_TRUE(held);
    const auto first = held.token();
    ASSERT_TRUE(first);
    auto waiting = c.async_acquire("fair-lease", {.wait = 20s, .kind = dlock::lock_kind::fair},
                                   asio::use_future);
    ASSERT_TRUE(eventually([&] { return queue_length(s, "fair-lease") == 1; }, 5s));
    held.release();
    auto got = waiting.get();
    ASSERT_TRUE(got);
    EXPECT_GT(*got.token(), *first);
    EXPECT_EQ(queue_length(s, "fair-lease"), 0);
}

TEST(lock, redisson_fair_waiters_and_ours_share_one_queue_in_both_directions) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-interop";
    const std::string java = "00000000-0000-0000-0000-000000000001:1";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex ours = c.make_fair_mutex(name);

    // Redisson holds; our waiter queues behind it and is woken by Redisson's unlock, which
    // publishes on the head's own channel.
    EXPECT_EQ(redisson_acquire(s, name, java), ""); // nil: acquired
    auto waiter = fair_waiter(c, name);
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 5s));
    ASSERT_TRUE(eventually(
        [&] {
            const auto ch =
                "redisson_lock__channel:{" + name + "}:" + s.cli({"LINDEX", queue_of(name), "0"});
            return one_subscriber(s, ch);
        },
        5s));
    EXPECT_EQ(redisson_unlock(s, name, java), "1");
    EXPECT_TRUE(waiter.get()); // long before the 30 s lease Redisson set

    // We hold; a Redisson waiter queues first, then ours: our release serves Redisson's
    // waiter (the head) and not ours.
    ours.lock();
    EXPECT_NE(redisson_acquire(s, name, java), ""); // queued
    auto second = fair_waiter(c, name);
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 2; }, 5s));
    ours.unlock();
    EXPECT_EQ(redisson_acquire(s, name, java), ""); // the head takes it
    EXPECT_EQ(second.wait_for(300ms), std::future_status::timeout);
    EXPECT_EQ(redisson_unlock(s, name, java), "1");
    EXPECT_TRUE(second.get());
}

// Ports of RedissonFairLockTest behaviours (redisson.md §8.2), as our own tests.

TEST(lock, a_fair_queue_advances_in_order_when_fixed_leases_expire_without_unlocks) {
    // testLeaseTimeout: eight waiters, each taking the lock with a short fixed lease and never
    // unlocking, acquire in the order they queued.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-expiring";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock(dlock::fixed_lease{300ms});
    std::mutex order_mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&, i] {
            dlock::fair_mutex m = c.make_fair_mutex(name);
            if (!m.try_lock_for(20s, dlock::fixed_lease{200ms})) return;
            std::scoped_lock g(order_mu);
            order.push_back(i); // never unlocked: the lease runs out
        });
        // Each has its place before the next starts. Once the holder's lease runs out the
        // first ones are served and leave the queue (a slow machine may get there before all
        // eight queued), so count those queued and those served.
        ASSERT_TRUE(eventually(
            [&] {
                const auto queued = static_cast<std::size_t>(queue_length(s, name));
                std::scoped_lock g(order_mu);
                return queued + order.size() == static_cast<std::size_t>(i) + 1;
            },
            10s))
            << i;
    }
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(lock, after_a_timed_out_fair_waiter_left_a_try_lock_succeeds_at_once) {
    // testTryLockNonDelayed.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-nondelayed";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    ASSERT_TRUE(holder.try_lock());
    std::thread t([&] { EXPECT_FALSE(c.make_fair_mutex(name).try_lock_for(200ms)); });
    t.join();
    holder.unlock();
    std::thread u([&] {
        dlock::fair_mutex m = c.make_fair_mutex(name);
        EXPECT_TRUE(m.try_lock());
        m.unlock();
    });
    u.join();
}

TEST(lock, an_expired_fair_lock_passes_to_the_waiter_and_its_old_owner_hears_not_owner) {
    // testExpire, with dlock's answer: Redisson's fair unlock of an expired lock returns
    // quietly; ours says the hold was lost (as the reentrant lock does).
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-expire";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex m = c.make_fair_mutex(name);
    m.lock(dlock::fixed_lease{300ms});
    auto other = std::async(std::launch::async, [&] {
        dlock::fair_mutex o = c.make_fair_mutex(name);
        const bool got = o.try_lock_for(10s, dlock::fixed_lease{30s});
        return std::make_pair(got, std::chrono::steady_clock::now());
    });
    const auto [got, at] = other.get();
    EXPECT_TRUE(got);
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
    EXPECT_TRUE(m.is_locked()); // the other owner's hold is untouched
}

TEST(lock, a_fair_waiter_that_times_out_while_the_server_is_paused_leaves_the_queue_later) {
    // testAcquireFailedNotCalledOnRedisTimeout (#5019): the give-up reaches the server once it
    // answers again, and the waiter reports "not acquired" or an error, never a hang.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-paused";
    // Commands outlive the pause: a command that timed out could still be executed after a
    // give-up sent on a new connection (then the stale place is dropped after its timeout,
    // as a killed waiter's is).
    auto o = fast_options(s.url());
    o.command_timeout = 5s;
    dlock::client c(o);
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock();
    auto waiter = std::async(std::launch::async, [&] {
        std::error_code ec;
        const bool got = c.make_fair_mutex(name).try_lock_for(1500ms, ec);
        return got;
    });
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 5s));
    s.cli({"CLIENT", "PAUSE", "2500", "WRITE"});
    EXPECT_FALSE(waiter.get());
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 0; }, 10s));
    holder.unlock();
}

TEST(lock, fair_queue_deadlines_stay_within_one_place_timeout_of_the_servers_clock) {
    // testWaitTimeoutDrift: Redisson's deadlines could drift upward by the wait of every
    // waiter before; ours are the server's clock plus one place timeout.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-drift";
    auto o = fast_options(s.url());
    o.fair_waiter_timeout = 2s;
    dlock::client c(o);
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock();
    // The waiters stay queued (refreshing their places) for 3 s, well past the reads below: with
    // 300 ms, under ASan on a busy machine, they had left before the scores were read.
    std::vector<std::future<bool>> waiters;
    for (int i = 0; i < 5; ++i)
        waiters.push_back(std::async(std::launch::async,
                                     [&] { return c.make_fair_mutex(name).try_lock_for(3s); }));
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 5; }, 5s));
    const auto now = std::stoll(s.cli({"TIME"}).substr(0, 10)) * 1000;
    const auto scores = s.cli({"ZRANGE", timeouts_of(name), "0", "-1", "WITHSCORES"});
    std::istringstream in(scores);
    int seen = 0;
    for (std::string owner, score; std::getline(in, owner) && std::getline(in, score); ++seen) {
        EXPECT_LE(std::stoll(score), now + 2000 + 1000) << owner;
        EXPECT_GT(std::stoll(score), now) << owner;
    }
    EXPECT_EQ(seen, 5);
    for (auto& w : waiters)
        EXPECT_FALSE(w.get());
    EXPECT_TRUE(eventually([&] { return queue_length(s, name) == 0; }, 5s));
    holder.unlock();
}

TEST(lock, a_fair_release_hands_the_lock_to_this_clients_waiter_only_when_it_heads_the_queue) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    const std::string name = "fair-handover";
    dlock::client c(fast_options(s.url()));
    dlock::fair_mutex holder = c.make_fair_mutex(name);
    holder.lock();
    auto first = fair_waiter(c, name);
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 5s));
    // The waiter is this client's queued waiter once it subscribes to its own channel (it
    // registers, then subscribes): a release before that cannot hand over to it and publishes.
    ASSERT_TRUE(eventually(
        [&] {
            return one_subscriber(s, "redisson_lock__channel:{" + name +
                                         "}:" + s.cli({"LINDEX", queue_of(name), "0"}));
        },
        5s));
    s.cli({"CONFIG", "RESETSTAT"});
    holder.unlock(); // our waiter is the head: one script passes the lock, no PUBLISH
    EXPECT_TRUE(first.get());
    EXPECT_EQ(command_calls(s, "publish"), 0); // (a release to a waiting head publishes)
    // Another client's waiter at the head: our release wakes it, our waiter keeps its place.
    holder.lock();
    dlock::client other(fast_options(s.url()));
    auto theirs = fair_waiter(other, name);
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 1; }, 5s));
    auto ours = fair_waiter(c, name);
    ASSERT_TRUE(eventually([&] { return queue_length(s, name) == 2; }, 5s));
    holder.unlock();
    EXPECT_TRUE(theirs.get());
    EXPECT_TRUE(ours.get());
}
