// The semaphore on PostgreSQL (lock_kind::semaphore, postgres/rows/semaphore.cpp): a lease row
// per permit in dlock_semaphore (slots 0 .. N-1, tokens from dlock_fence), N never exceeded by
// racing clients, a gone holder's permit taken at its expiry (no polling), the watchdog keeping
// a live holder's permit, release waking a waiter by NOTIFY, clients disagreeing about N,
// inspect / list / force_unlock, and bad permit counts.
#include "postgres_test_util.hpp"

#include <climits>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

acquire_options permits(unsigned n, std::chrono::milliseconds wait) {
    auto o = wait_for(wait, lock_kind::semaphore);
    o.permits = n;
    return o;
}

class pg_semaphore : public pg_suite {
public:
    /// "slot:token,..." of the live permits of `name`.
    static std::string rows_of(const std::string& name) {
        return server().psql("SELECT string_agg(slot || ':' || token, ',' ORDER BY slot) FROM "
                             "dlock_semaphore WHERE name = '" +
                             name + "' AND expires_at > now()");
    }
    /// `count` permits of `name` (N = `n`) taken at once through `b`; fewer when refused.
    static std::vector<std::shared_ptr<detail::hold>>
    take(detail::lock_backend& b, const std::string& name, unsigned n, int count) {
        std::vector<std::shared_ptr<detail::hold>> held;
        std::error_code ec;
        for (int i = 0; i < count; ++i)
            if (auto h = b.acquire(name, permits(n, 0ms), ec)) held.push_back(std::move(h));
        return held;
    }
};

TEST_F(pg_semaphore, permits_are_rows_of_the_lowest_free_slots_with_increasing_tokens) {
    auto b = backend();
    std::error_code ec;
    std::vector<std::shared_ptr<detail::hold>> held;
    std::uint64_t last = 0;
    for (int i = 0; i < 3; ++i) {
        auto h = b->acquire("sem:layout", permits(3, 0ms), ec);
        ASSERT_TRUE(h) << ec.message() << " " << b->last_error_detail();
        ASSERT_TRUE(h->fencing_token());
        EXPECT_GT(*h->fencing_token(), last);
        last = *h->fencing_token();
        held.push_back(h);
    }
    EXPECT_EQ(rows_of("sem:layout"), "0:" + std::to_string(*held[0]->fencing_token()) +
                                         ",1:" + std::to_string(*held[1]->fencing_token()) +
                                         ",2:" + std::to_string(*held[2]->fencing_token()));
    // The tokens come from dlock_fence, shared with the lease rows.
    EXPECT_EQ(server().psql("SELECT last_value FROM dlock_fence"), std::to_string(last));
    EXPECT_EQ(server().psql("SELECT string_agg(DISTINCT permits::text, ',') FROM "
                            "dlock_semaphore WHERE name = 'sem:layout'"),
              "3");
    EXPECT_FALSE(backend()->acquire("sem:layout", permits(3, 0ms), ec)) << "full";
    EXPECT_FALSE(ec) << ec.message();
    // A release expires its row (kept: never deleted) and frees that slot for the next.
    held[1]->release_blocking(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server().psql("SELECT count(*) FROM dlock_semaphore WHERE name = 'sem:layout'"), "3");
    auto other = backend(); // kept: a backend's shutdown ends its holds
    auto again = other->acquire("sem:layout", permits(3, 0ms), ec);
    ASSERT_TRUE(again) << ec.message();
    EXPECT_GT(*again->fencing_token(), last);
    EXPECT_EQ(server().psql("SELECT token FROM dlock_semaphore WHERE name = 'sem:layout' AND "
                            "slot = 1"),
              std::to_string(*again->fencing_token()));
    for (auto& h : held)
        h->release_blocking(ec);
    again->release_blocking(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(rows_of("sem:layout"), "");
}

TEST_F(pg_semaphore, racing_clients_never_exceed_n_holders) {
    constexpr unsigned n = 3;
    constexpr int clients = 8;
    constexpr int rounds = 6;
    std::atomic<int> inside{0};
    std::atomic<int> most{0};
    std::atomic<int> failures{0};
    std::mutex mu;
    std::set<std::uint64_t> tokens;
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c)
        ts.emplace_back([&] {
            auto b = backend();
            for (int r = 0; r < rounds; ++r) {
                std::error_code ec;
                auto h = b->acquire("sem:race", permits(n, 30s), ec);
                if (!h) {
                    ++failures;
                    continue;
                }
                const int now = ++inside;
                int seen = most.load();
                while (now > seen && !most.compare_exchange_weak(seen, now)) {
                }
                {
                    std::lock_guard<std::mutex> l(mu);
                    tokens.insert(h->fencing_token().value_or(0));
                }
                std::this_thread::sleep_for(10ms); // the work done while holding
                --inside;
                h->release_blocking(ec);
                if (ec) ++failures;
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_LE(most.load(), static_cast<int>(n));
    EXPECT_GE(most.load(), 2) << "the permits were shared at all";
    EXPECT_EQ(tokens.size(), std::size_t{clients * rounds}) << "every grant its own token";
    EXPECT_EQ(server().psql("SELECT max(slot) < 3 FROM dlock_semaphore WHERE name = 'sem:race'"),
              "t");
}

// A holder whose client is gone (no release, no renewal) keeps its permit until its lease
// ends; a waiter takes it then, woken by its timer at that expiry: between its refused attempt
// and the grant it sends nothing (its session's last query does not change).
TEST_F(pg_semaphore, a_gone_holders_permit_is_taken_at_its_expiry_without_polling) {
    std::error_code ec;
    auto holder = backend();
    auto o = permits(1, 0ms);
    o.lease = 2500ms;
    auto h = holder->acquire("sem:gone", o, ec);
    ASSERT_TRUE(h) << ec.message();
    const auto taken = clock::now();
    holder->shutdown(); // the client is gone: its row stays until it expires
    holder.reset();
    h.reset();
    auto waiter = backend("application_name=sem_waiter");
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        auto w = waiter->acquire("sem:gone", permits(1, 10s), e);
        return std::make_pair(clock::now(), w != nullptr);
    });
    const auto last_query = [] {
        return server().psql("SELECT string_agg(query_start::text, ',') FROM pg_stat_activity "
                             "WHERE application_name = 'sem_waiter' AND query LIKE "
                             "'%dlock_semaphore%'");
    };
    ASSERT_TRUE(eventually([&] { return !last_query().empty(); }, 5s));
    const auto first = last_query();
    ASSERT_EQ(got.wait_for(1s), std::future_status::timeout);
    EXPECT_EQ(last_query(), first) << "the waiter polled";
    ASSERT_EQ(got.wait_for(8s), std::future_status::ready);
    const auto [when, ok] = got.get();
    EXPECT_TRUE(ok);
    EXPECT_GE(when - taken, 2400ms) << "granted before the lease ended";
    EXPECT_LT(when - taken, 3500ms) << "not woken at the expiry";
}

// The watchdog (dlock_lease=600: extended every 200 ms) keeps a live holder's permit across
// several lease lengths: a rival waiting that long gets nothing, and the row keeps its token.
TEST_F(pg_semaphore, the_watchdog_keeps_a_live_permit_across_several_leases) {
    std::error_code ec;
    auto holder = backend("dlock_lease=600");
    auto h = holder->acquire("sem:live", permits(1, 0ms), ec);
    ASSERT_TRUE(h) << ec.message();
    const auto t0 = clock::now();
    auto rival = backend("dlock_lease=600");
    EXPECT_FALSE(rival->acquire("sem:live", permits(1, 3s), ec));
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_GE(clock::now() - t0, 3s);
    EXPECT_FALSE(h->lost());
    EXPECT_EQ(rows_of("sem:live"), "0:" + std::to_string(*h->fencing_token()));
    h->release_blocking(ec);
    EXPECT_FALSE(ec) << ec.message();
}

TEST_F(pg_semaphore, a_release_wakes_a_waiter_by_notification) {
    std::error_code ec;
    auto b = backend();
    const auto held = take(*b, "sem:wake", 2, 2); // 30 s watchdog leases
    ASSERT_EQ(held.size(), 2U);
    auto waiter = backend();
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        auto w = waiter->acquire("sem:wake", permits(2, 20s), e);
        return std::make_pair(clock::now(), w != nullptr);
    });
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout);
    const auto released = clock::now();
    held[1]->release_blocking(ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
    const auto [when, ok] = got.get();
    EXPECT_TRUE(ok);
    EXPECT_LT(when - released, 1s) << "the rows had ~30 s left: only NOTIFY wakes this soon";
}

// N is every acquisition's own: a client asking for 3 may take slot 2 while two others asked
// for 2 hold slots 0 and 1; the one asking for 2 then finds no free slot of its own range. So
// clients that disagree admit up to the largest N holders, and status says they disagree.
TEST_F(pg_semaphore, clients_disagreeing_about_n_admit_up_to_the_largest_n) {
    std::error_code ec;
    auto b = backend();
    const auto held = take(*b, "sem:n", 2, 2);
    ASSERT_EQ(held.size(), 2U);
    EXPECT_FALSE(b->acquire("sem:n", permits(2, 0ms), ec));
    auto c = b->acquire("sem:n", permits(3, 0ms), ec);
    ASSERT_TRUE(c) << ec.message();
    EXPECT_FALSE(b->acquire("sem:n", permits(3, 0ms), ec));
    auto st = b->inspect("sem:n", lock_kind::semaphore, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(st.contenders.size(), 3U);
    EXPECT_EQ(st.details["permits"], "3");
    EXPECT_NE(st.detail.find("3 of 3 permit(s) in use; holders asked for 2 to 3"),
              std::string::npos)
        << st.detail;
    // Slot 2 free again: still nothing for N = 2 (its slots are 0 and 1).
    c->release_blocking(ec);
    EXPECT_FALSE(b->acquire("sem:n", permits(2, 0ms), ec));
    EXPECT_TRUE(b->acquire("sem:n", permits(3, 0ms), ec));
}

TEST_F(pg_semaphore, inspect_list_and_force_unlock_show_and_end_every_permit) {
    std::error_code ec;
    auto b = backend();
    const auto held = take(*b, "sem:st", 3, 2);
    ASSERT_EQ(held.size(), 2U);
    const auto& one = held[0];
    const auto& two = held[1];
    auto other = backend();
    auto st = other->inspect("sem:st", lock_kind::semaphore, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(st.kind, "semaphore");
    EXPECT_EQ(st.detail, "2 of 3 permit(s) in use");
    EXPECT_EQ(st.details["permits"], "3");
    ASSERT_EQ(st.contenders.size(), 2U);
    EXPECT_EQ(st.contenders[0].token, one->fencing_token());
    EXPECT_EQ(st.contenders[1].token, two->fencing_token());
    EXPECT_EQ(st.contenders[1].entry, "slot 1");
    for (const auto& c : st.contenders) {
        EXPECT_TRUE(c.holds);
        EXPECT_FALSE(c.owner.empty());
        EXPECT_TRUE(c.remaining && *c.remaining > 20s);
    }
    EXPECT_GE(st.fencing_counter.value_or(0), *two->fencing_token());
    EXPECT_TRUE(other->is_locked("sem:st", lock_kind::semaphore, ec));
    auto listed = other->list("sem:s*", ec);
    ASSERT_FALSE(ec) << ec.message();
    const auto it = std::find_if(listed.begin(), listed.end(),
                                 [](const lock_status& s) { return s.name == "sem:st"; });
    ASSERT_NE(it, listed.end());
    EXPECT_EQ(it->contenders.size(), 2U);
    EXPECT_EQ(it->detail, "2 of 3 permit(s) in use");
    // force_unlock: every holder's loss (seen at its next extend) and a waiter's wake-up.
    auto b2 = backend();
    auto third = b2->acquire("sem:st", permits(3, 0ms), ec);
    ASSERT_TRUE(third);
    auto waiter = backend();
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        return waiter->acquire("sem:st", permits(3, 10s), e) != nullptr;
    });
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout);
    EXPECT_TRUE(other->force_unlock("sem:st", lock_kind::semaphore, ec));
    ASSERT_EQ(got.wait_for(3s), std::future_status::ready);
    EXPECT_TRUE(got.get());
    for (auto* h : {one.get(), two.get(), third.get()}) {
        h->extend(30s, ec);
        EXPECT_EQ(ec, errc::not_owner);
        EXPECT_TRUE(h->lost());
    }
    st = other->inspect("sem:st", lock_kind::semaphore, ec);
    EXPECT_EQ(st.contenders.size(), 1U) << "the waiter's permit only";
}

TEST_F(pg_semaphore, bad_permit_counts_are_invalid_arguments) {
    auto b = backend();
    std::error_code ec;
    for (const unsigned n : {0U, static_cast<unsigned>(-1), 2147483648U, UINT_MAX}) {
        EXPECT_FALSE(b->acquire("sem:bad", permits(n, 0ms), ec)) << n;
        EXPECT_EQ(ec, errc::invalid_argument) << n << ": " << ec.message();
        EXPECT_NE(b->last_error_detail().find("permits"), std::string::npos);
    }
    // The largest N works and builds no row per slot.
    auto h = b->acquire("sem:bad", permits(2147483647U, 0ms), ec);
    ASSERT_TRUE(h) << ec.message();
    EXPECT_EQ(rows_of("sem:bad"), "0:" + std::to_string(*h->fencing_token()));
    // Names as for the lease rows: empty or over 4096 characters.
    EXPECT_FALSE(b->acquire("", permits(2, 0ms), ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(b->acquire(std::string(4097, 'x'), permits(2, 0ms), ec));
    EXPECT_EQ(ec, errc::invalid_argument);
}

} // namespace
} // namespace dlock::test
