// Leases and the watchdog against a real redis-server: a fixed lease, try_lock_for/until
// deadlines, watchdog renewal (also in batches), renewal stopping, a killed holder.
#include "lock_test_util.hpp"
#include "redis/client.hpp"
#include "redis/renewal.hpp"

#include <cstdint>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::watchdog_options;

TEST(lock, a_fixed_lease_expires_and_frees_the_lock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("lease");
    ma.lock(dlock::fixed_lease{200ms});
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
    // The slack past the wait: 50 ms plus two refused attempts, as long as one takes here (a
    // sanitizer build is slow). A wait that ignored its deadline would take the holder's 30 s.
    const auto r0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(mb.try_lock());
    const auto slack = 50ms + 2 * (std::chrono::steady_clock::now() - r0);
    for (auto wait : {50ms, 200ms}) {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_FALSE(mb.try_lock_for(wait));
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(took, wait);
        EXPECT_LT(took, wait + slack);
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

/// (ticks, batches sent), read on the I/O thread between two renewal rounds, so that a round is
/// never split between two readings.
std::pair<std::uint64_t, std::uint64_t> between_rounds(dlock::detail::renewal_service& r) {
    auto v = r.between_rounds(5s);
    if (!v) ADD_FAILURE() << "no moment between two renewal rounds within 5 s";
    return v.value_or(std::pair(r.ticks(), r.batches_sent()));
}

TEST(lock, the_watchdog_renews_many_locks_in_batches_of_one_hundred) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    // A longer lease than watchdog_options' 300 ms: taking 250 locks one by one and a stall of
    // a loaded machine must not outlast the first leases before their first renewal.
    auto o = watchdog_options(s.url());
    o.watchdog_lease = 900ms; // renewed every 300 ms
    dlock::client c(o);
    std::vector<dlock::lease> held;
    for (int i = 0; i < 250; ++i)
        held.push_back(c.acquire("batch:" + std::to_string(i)));
    auto& renewal = dlock::detail::access::impl(c)->renewal();
    const auto before = between_rounds(renewal);
    ASSERT_TRUE(eventually([&] { return renewal.ticks() >= before.first + 3; }, 5s));
    const auto after = between_rounds(renewal);
    const auto ticks = after.first - before.first;
    const auto batches = after.second - before.second;
    // 250 locks = 3 scripts per period (100 + 100 + 50), not 250 round trips.
    EXPECT_LE(batches, 3 * ticks);
    EXPECT_GE(batches, 3 * (ticks - 1));
    for (auto& l : held)
        EXPECT_FALSE(l.lost());
    EXPECT_GT(std::stoll(s.cli({"PTTL", "batch:0"})), 0);
}

TEST(lock, a_round_of_more_batches_than_its_window_renews_every_lock_once) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    // 1,000 locks = 10 scripts per round, more than the 8 a round keeps in flight: the last
    // two go as answers come back. A 3 s lease (renewed every second) outlasts taking them.
    auto o = watchdog_options(s.url());
    o.watchdog_lease = 3s;
    dlock::client c(o);
    std::vector<dlock::lease> held;
    for (int i = 0; i < 1000; ++i)
        held.push_back(c.acquire("window:" + std::to_string(i)));
    auto& renewal = dlock::detail::access::impl(c)->renewal();
    static_assert(1000 / dlock::detail::renewal_service::batch_size >
                  dlock::detail::renewal_service::max_inflight);
    const auto before = between_rounds(renewal);
    // Four ticks: past the first leases, which only the renewals can have kept.
    ASSERT_TRUE(eventually([&] { return renewal.ticks() >= before.first + 4; }, 10s));
    const auto after = between_rounds(renewal);
    const auto ticks = after.first - before.first;
    const auto batches = after.second - before.second;
    // 10 per round; a tick that found the round before still open (a stalled machine) sends
    // none, so up to one round may be missing, but never part of one.
    EXPECT_EQ(batches % 10, 0u) << batches;
    EXPECT_LE(batches, 10 * ticks);
    EXPECT_GE(batches, 10 * (ticks - 1));
    for (auto& l : held)
        EXPECT_FALSE(l.lost());
    for (const char* key : {"window:0", "window:499", "window:999"})
        EXPECT_GT(std::stoll(s.cli({"PTTL", key})), 1000) << key;
}
