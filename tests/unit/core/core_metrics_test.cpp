// core::client_metrics and the histograms behind dlock::metrics_snapshot, without a server.
#include "core/metrics.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::detail::client_metrics;
using dlock::detail::duration_histogram;
using dlock::detail::log2_histogram;

#define SKIP_WITHOUT_METRICS()                                                                     \
    if (!dlock::detail::metrics_enabled) GTEST_SKIP() << "built with DLOCK_METRICS=OFF"

namespace {

struct bucket_row {
    std::uint64_t value;
    std::size_t bucket;
};

TEST(log2_histogram, puts_each_value_in_the_first_bucket_whose_bound_is_at_least_it) {
    const bucket_row rows[] = {{0, 0}, {1, 0}, {2, 1},  {3, 2},  {4, 2},   {5, 3},
                               {8, 3}, {9, 4}, {64, 6}, {65, 7}, {128, 7}, {129, 8}};
    for (const auto& r : rows)
        EXPECT_EQ(log2_histogram<8>::index(r.value), r.bucket) << "value " << r.value;
}

TEST(log2_histogram, sends_values_above_the_last_bound_to_the_overflow_bucket) {
    EXPECT_EQ(log2_histogram<8>::index(1000), 8u);
    EXPECT_EQ(log2_histogram<8>::index(~std::uint64_t{0}), 8u);
}

TEST(log2_histogram, snapshot_has_bounds_counts_sum_and_count) {
    SKIP_WITHOUT_METRICS();
    log2_histogram<4> h; // bounds 1 2 4 8, then +Inf
    for (std::uint64_t v : {1u, 2u, 3u, 8u, 9u, 100u})
        h.record(v);
    const auto s = h.snapshot(1.0);
    EXPECT_EQ(s.bounds, (std::vector<double>{1, 2, 4, 8}));
    EXPECT_EQ(s.counts, (std::vector<std::uint64_t>{1, 1, 1, 1, 2}));
    EXPECT_EQ(s.count, 6u);
    EXPECT_DOUBLE_EQ(s.sum, 123.0);
}

TEST(duration_histogram, rounds_up_to_whole_microseconds_and_reports_seconds) {
    SKIP_WITHOUT_METRICS();
    duration_histogram h;
    h.record(1ns);    // 1 us: bucket 0 (<= 1 us)
    h.record(1001ns); // 2 us: bucket 1
    h.record(1500us); // 1500 us: bucket 11 (<= 2048 us)
    h.record(-5ms);   // negative (clock misuse): 0, bucket 0
    h.record(3600s);  // above 2^25 us: overflow
    const auto s = h.snapshot();
    ASSERT_EQ(s.bounds.size(), 26u);
    ASSERT_EQ(s.counts.size(), 27u);
    EXPECT_DOUBLE_EQ(s.bounds.front(), 1e-6);
    EXPECT_DOUBLE_EQ(s.bounds[11], 2048e-6);
    EXPECT_EQ(s.counts[0], 2u);
    EXPECT_EQ(s.counts[1], 1u);
    EXPECT_EQ(s.counts[11], 1u);
    EXPECT_EQ(s.counts[26], 1u);
    EXPECT_EQ(s.count, 5u);
    EXPECT_NEAR(s.sum, 1e-6 + 2e-6 + 1500e-6 + 3600.0, 1e-9);
}

TEST(histogram_snapshot, fraction_at_most_counts_whole_buckets_up_to_the_bound) {
    dlock::histogram_snapshot s;
    s.bounds = {1, 2, 4};
    s.counts = {1, 2, 3, 4};
    s.count = 10;
    EXPECT_DOUBLE_EQ(s.fraction_at_most(1), 0.1);
    EXPECT_DOUBLE_EQ(s.fraction_at_most(2), 0.3);
    EXPECT_DOUBLE_EQ(s.fraction_at_most(3), 0.6);   // rounded up to the bound 4
    EXPECT_DOUBLE_EQ(s.fraction_at_most(100), 0.6); // the overflow bucket has no bound
    EXPECT_DOUBLE_EQ(dlock::histogram_snapshot{}.fraction_at_most(1), 0.0);
}

TEST(client_metrics, counts_acquisitions_by_kind_and_outcome) {
    SKIP_WITHOUT_METRICS();
    client_metrics m;
    m.acquisition(0, {}, true, false, 3ms);  // reentrant, acquired
    m.acquisition(0, {}, true, true, 1ms);   // reentrant, re-entered
    m.acquisition(1, {}, false, false, 5ms); // simple, not acquired
    m.acquisition(2, make_error_code(dlock::errc::ambiguous), false, false, 1ms);
    m.acquisition(4, make_error_code(dlock::errc::out_of_memory), false, false, 1ms);
    m.acquisition(dlock::detail::custom_kind_slot, {}, true, false, 1ms); // a registered kind
    const auto s = m.snapshot();
    ASSERT_EQ(s.acquisitions.size(), dlock::detail::kind_count + 1); // every kind, and custom
    EXPECT_EQ(s.kind("reentrant").acquired, 1u);
    EXPECT_EQ(s.kind("reentrant").reentered, 1u);
    EXPECT_EQ(s.kind("simple").not_acquired, 1u);
    EXPECT_EQ(s.kind("fair").errors[static_cast<std::size_t>(dlock::error_class::ambiguous)], 1u);
    EXPECT_EQ(s.kind("write").errors[static_cast<std::size_t>(dlock::error_class::server)], 1u);
    EXPECT_EQ(s.kind("custom").acquired, 1u);
    EXPECT_EQ(s.kind("read").acquired, 0u);
    // Only granted acquisitions enter the wait histogram.
    EXPECT_EQ(s.wait_time.count, 3u);
    EXPECT_NEAR(s.wait_time.sum, 0.005, 1e-9);
}

TEST(client_metrics, an_unknown_kind_name_gives_an_empty_entry_of_that_name) {
    client_metrics m;
    const auto k = m.snapshot().kind("nonsense");
    EXPECT_EQ(k.kind, "nonsense");
    EXPECT_EQ(k.acquired + k.reentered + k.not_acquired, 0u);
}

TEST(client_metrics, counts_connects_and_reconnects_and_keeps_the_log_sink) {
    int calls = 0;
    client_metrics m(dlock::log_options{.sink = [&](const dlock::log_record&) { ++calls; }});
    ASSERT_TRUE(m.log().sink);
    m.log().sink(dlock::log_record{});
    EXPECT_EQ(calls, 1);
    if (!dlock::detail::metrics_enabled) return;
    m.connected(false);
    m.connected(true);
    m.connected(true);
    const auto s = m.snapshot();
    EXPECT_EQ(s.connects, 1u);
    EXPECT_EQ(s.reconnects, 2u);
}

TEST(client_metrics, counts_renewals_losses_releases_and_topology_changes) {
    SKIP_WITHOUT_METRICS();
    client_metrics m;
    m.renewal_batch(100);
    m.renewal_batch(3);
    m.renewals(100, 0);
    m.renewals(0, 3);
    m.loss(dlock::loss_cause::gone);
    m.loss(dlock::loss_cause::deadline);
    m.loss(dlock::loss_cause::deadline);
    m.release(client_metrics::release_result::released);
    m.release(client_metrics::release_result::not_owner);
    m.release(client_metrics::release_result::failed);
    m.topology_change();
    const auto s = m.snapshot();
    EXPECT_EQ(s.renewal_batches, 2u);
    EXPECT_EQ(s.renewals_ok, 100u);
    EXPECT_EQ(s.renewals_failed, 3u);
    EXPECT_EQ(s.renewal_batch_size.count, 2u);
    EXPECT_EQ(s.renewal_batch_size.counts[7], 1u); // 100 <= 128
    EXPECT_EQ(s.renewal_batch_size.counts[2], 1u); // 3 <= 4
    EXPECT_DOUBLE_EQ(s.renewal_batch_size.sum, 103.0);
    EXPECT_EQ(s.losses[static_cast<std::size_t>(dlock::loss_cause::gone)], 1u);
    EXPECT_EQ(s.losses[static_cast<std::size_t>(dlock::loss_cause::deadline)], 2u);
    EXPECT_EQ(s.losses_total(), 3u);
    EXPECT_EQ(s.releases, 1u);
    EXPECT_EQ(s.releases_not_owner, 1u);
    EXPECT_EQ(s.releases_failed, 1u);
    EXPECT_EQ(s.topology_changes, 1u);
}

TEST(client_metrics, hold_and_hand_off_times_go_to_their_own_histograms) {
    SKIP_WITHOUT_METRICS();
    client_metrics m;
    m.hold_ended(10ms);
    m.handoff_handover(200us);
    m.handoff_wake(300us);
    m.handoff_wake(400us);
    const auto s = m.snapshot();
    EXPECT_EQ(s.hold_time.count, 1u);
    EXPECT_EQ(s.handoff_handover.count, 1u);
    EXPECT_EQ(s.handoff_wake.count, 2u);
    EXPECT_NEAR(s.handoff_wake.sum, 700e-6, 1e-12);
}

TEST(client_metrics, counts_exactly_under_concurrent_recording) {
    SKIP_WITHOUT_METRICS();
    client_metrics m;
    constexpr int threads = 4, each = 20000;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&] {
            for (int i = 0; i < each; ++i) {
                m.acquisition(0, {}, true, false, std::chrono::microseconds(i % 5000));
                m.hold_ended(1ms);
            }
        });
    for (auto& t : ts)
        t.join();
    const auto s = m.snapshot();
    EXPECT_EQ(s.kind("reentrant").acquired, std::uint64_t{threads * each});
    EXPECT_EQ(s.wait_time.count, std::uint64_t{threads * each});
    EXPECT_EQ(s.hold_time.count, std::uint64_t{threads * each});
}

TEST(error_class, groups_every_errc_for_dashboards) {
    using dlock::errc;
    using dlock::error_class;
    const auto of = [](errc e) { return dlock::detail::classify(make_error_code(e)); };
    EXPECT_EQ(of(errc::unavailable), error_class::unavailable);
    EXPECT_EQ(of(errc::ambiguous), error_class::ambiguous);
    EXPECT_EQ(of(errc::cancelled), error_class::cancelled);
    EXPECT_EQ(of(errc::auth_failed), error_class::denied);
    EXPECT_EQ(of(errc::permission_denied), error_class::denied);
    for (auto e : {errc::out_of_memory, errc::server_busy, errc::readonly, errc::moved,
                   errc::cross_slot, errc::no_script, errc::server_error})
        EXPECT_EQ(of(e), error_class::server);
    EXPECT_EQ(of(errc::protocol_error), error_class::protocol);
    EXPECT_EQ(of(errc::invalid_argument), error_class::invalid);
    EXPECT_EQ(dlock::detail::classify(std::make_error_code(std::errc::io_error)),
              error_class::other);
    EXPECT_EQ(dlock::to_string(error_class::denied), "denied");
    EXPECT_EQ(dlock::to_string(dlock::loss_cause::server_error), "server_error");
}

TEST(wire_counters, counts_scripts_among_commands) {
    SKIP_WITHOUT_METRICS();
    dlock::detail::wire_counters w;
    w.sent("EVALSHA");
    w.sent("EVAL");
    w.sent("GET");
    w.sent("evalsha");
    w.sent("");
    dlock::metrics_snapshot s;
    w.add_to(s);
    EXPECT_EQ(s.commands, 5u);
    EXPECT_EQ(s.scripts, 3u);
}

} // namespace
