// dlock::prometheus: the families of a snapshot (no server), and a real scrape: prometheus-cpp's
// Exposer on a free loopback port serves a client's collectable while the client takes locks
// on a real redis-server; the test reads /metrics over HTTP and checks the values.
#include "core/metrics.hpp"
#include "test_util.hpp"

#include <dlock/prometheus.hpp>

#include <asio.hpp>

#include <cmath>
#include <optional>
#include <prometheus/exposer.h>
#include <string>

using namespace std::chrono_literals;
using dlock::test::fast_options;
using dlock::test::redis_server;

namespace {

/// GET http://127.0.0.1:port/path (HTTP/1.0: the server closes), bounded by `budget`.
std::string http_get(std::uint16_t port, const std::string& path,
                     std::chrono::milliseconds budget = 5s) {
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    std::string response;
    sock.async_connect({asio::ip::make_address("127.0.0.1"), port}, [&](std::error_code ec) {
        if (ec) return;
        asio::async_write(sock, asio::buffer(request), [&](std::error_code wec, std::size_t) {
            if (wec) return;
            asio::async_read(sock, asio::dynamic_buffer(response),
                             [](std::error_code, std::size_t) {});
        });
    });
    io.run_for(budget);
    return response;
}

/// The value of the sample line starting with `series` (name and labels exactly as printed).
std::string sample(const std::string& text, const std::string& series) {
    const auto at = text.find('\n' + series + ' ');
    if (at == std::string::npos) return "(missing)";
    const auto begin = at + series.size() + 2;
    return text.substr(begin, text.find('\n', begin) - begin);
}

TEST(prometheus, families_carry_the_snapshot_values_labels_and_cumulative_buckets) {
    dlock::metrics_snapshot s;
    s.acquisitions.push_back({.kind = "reentrant", .acquired = 3});
    s.wait_time.bounds = {0.001, 0.002};
    s.wait_time.counts = {1, 2, 4};
    s.wait_time.count = 7;
    s.wait_time.sum = 0.5;
    s.losses[static_cast<std::size_t>(dlock::loss_cause::taken)] = 2;
    const auto families = dlock::prometheus_families(s, {{"service", "orders"}});
    const prometheus::MetricFamily* acq = nullptr;
    const prometheus::MetricFamily* wait = nullptr;
    const prometheus::MetricFamily* loss = nullptr;
    for (const auto& f : families) {
        if (f.name == "dlock_acquisitions_total") acq = &f;
        if (f.name == "dlock_acquisition_wait_seconds") wait = &f;
        if (f.name == "dlock_losses_total") loss = &f;
    }
    ASSERT_TRUE(acq && wait && loss);
    ASSERT_EQ(acq->metric.size(), 3u); // acquired, reentered, not_acquired
    EXPECT_EQ(acq->metric[0].counter.value, 3.0);
    ASSERT_EQ(acq->metric[0].label.size(), 3u);
    EXPECT_EQ(acq->metric[0].label[0].name, "service");
    EXPECT_EQ(acq->metric[0].label[0].value, "orders");
    ASSERT_EQ(wait->metric.size(), 1u);
    const auto& h = wait->metric[0].histogram;
    EXPECT_EQ(h.sample_count, 7u);
    EXPECT_EQ(h.sample_sum, 0.5);
    ASSERT_EQ(h.bucket.size(), 3u);
    EXPECT_EQ(h.bucket[0].cumulative_count, 1u);
    EXPECT_EQ(h.bucket[1].cumulative_count, 3u);
    EXPECT_EQ(h.bucket[2].cumulative_count, 7u);
    EXPECT_TRUE(std::isinf(h.bucket[2].upper_bound));
    ASSERT_EQ(loss->metric.size(), dlock::loss_cause_count);
    EXPECT_EQ(loss->metric[1].counter.value, 2.0);
}

TEST(prometheus, warnings_renewal_slack_and_max_hold_losses_are_exported) {
    dlock::metrics_snapshot s;
    s.warnings = 4;
    s.renewal_slack.bounds = {0.5, 1.0};
    s.renewal_slack.counts = {1, 5, 0};
    s.renewal_slack.count = 6;
    s.renewal_slack.sum = 4.5;
    s.losses[static_cast<std::size_t>(dlock::loss_cause::max_hold)] = 3;
    const auto families = dlock::prometheus_families(s, {});
    const prometheus::MetricFamily* warnings = nullptr;
    const prometheus::MetricFamily* slack = nullptr;
    const prometheus::MetricFamily* loss = nullptr;
    for (const auto& f : families) {
        if (f.name == "dlock_warnings_total") warnings = &f;
        if (f.name == "dlock_renewal_slack_seconds") slack = &f;
        if (f.name == "dlock_losses_total") loss = &f;
    }
    ASSERT_TRUE(warnings && slack && loss);
    ASSERT_EQ(warnings->metric.size(), 1u);
    EXPECT_EQ(warnings->metric[0].counter.value, 4.0);
    ASSERT_EQ(slack->metric.size(), 1u);
    EXPECT_EQ(slack->metric[0].histogram.sample_count, 6u);
    EXPECT_EQ(slack->metric[0].histogram.bucket[1].cumulative_count, 6u);
    bool found = false;
    for (const auto& m : loss->metric)
        for (const auto& l : m.label)
            if (l.name == "cause" && l.value == "max_hold") {
                found = true;
                EXPECT_EQ(m.counter.value, 3.0);
            }
    EXPECT_TRUE(found) << "no cause=max_hold";
}

TEST(prometheus, a_scrape_of_the_exposer_shows_the_clients_counters) {
    DLOCK_SKIP_WITHOUT_REDIS();
    if (!dlock::detail::metrics_enabled) GTEST_SKIP() << "built with DLOCK_METRICS=OFF";
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    prometheus::Exposer exposer("127.0.0.1:0");
    auto collectable = dlock::make_prometheus_collectable(c, {{"service", "test"}});
    exposer.RegisterCollectable(collectable);
    const auto ports = exposer.GetListeningPorts();
    ASSERT_EQ(ports.size(), 1u);
    const auto port = static_cast<std::uint16_t>(ports[0]);

    for (int i = 0; i < 3; ++i) {
        auto l = c.acquire("scraped", {.wait = 1s});
        ASSERT_TRUE(l);
        l.release();
    }
    auto held = holder.acquire("scraped", {.wait = 1s});
    ASSERT_TRUE(held);
    EXPECT_FALSE(c.acquire("scraped", {.wait = 0ms}));

    const auto text = http_get(port, "/metrics");
    ASSERT_NE(text.find("200 OK"), std::string::npos) << text;
    EXPECT_EQ(
        sample(text,
               R"(dlock_acquisitions_total{service="test",kind="reentrant",outcome="acquired"})"),
        "3");
    EXPECT_EQ(
        sample(
            text,
            R"(dlock_acquisitions_total{service="test",kind="reentrant",outcome="not_acquired"})"),
        "1");
    EXPECT_EQ(sample(text, R"(dlock_releases_total{service="test",outcome="released"})"), "3");
    EXPECT_EQ(sample(text, R"(dlock_acquisition_wait_seconds_count{service="test"})"), "3");
    EXPECT_EQ(sample(text, R"(dlock_hold_seconds_count{service="test"})"), "3");
    EXPECT_EQ(sample(text, R"(dlock_acquisition_wait_seconds_bucket{service="test",le="+Inf"})"),
              "3");
    EXPECT_EQ(sample(text, R"(dlock_losses_total{service="test",cause="gone"})"), "0");
    EXPECT_NE(text.find("# TYPE dlock_hold_seconds histogram"), std::string::npos);
    EXPECT_NE(text.find("# TYPE dlock_commands_total counter"), std::string::npos);

    // Once the client is gone, the collectable yields nothing (and the scrape still works).
    { dlock::client moved = std::move(c); }
    const auto after = http_get(port, "/metrics");
    EXPECT_NE(after.find("200 OK"), std::string::npos);
    EXPECT_EQ(after.find("dlock_acquisitions_total"), std::string::npos);
}

// Every backend's client has a collectable: a ZooKeeper and a PostgreSQL client (built
// lazily, no server needed to read counters) export their families, with a series for each of
// their kinds; before, only a Redis client's collectable exported anything.
TEST(prometheus, the_collectable_of_every_backend_exports_its_counters) {
    if (!dlock::detail::metrics_enabled) GTEST_SKIP() << "built with DLOCK_METRICS=OFF";
    int tried = 0;
    for (const char* url : {"zk://127.0.0.1:1/locks", "postgresql://u@127.0.0.1:1/db"}) {
        std::optional<dlock::client> c;
        try {
            c.emplace(url);
        } catch (const dlock::error& e) { // a backend this build lacks
            EXPECT_EQ(e.code(), dlock::errc::unsupported) << url << ": " << e.what();
            continue;
        }
        ++tried;
        const auto collectable = dlock::make_prometheus_collectable(*c, {{"service", "t"}});
        const auto families = collectable->Collect();
        const prometheus::MetricFamily* acq = nullptr;
        for (const auto& f : families)
            if (f.name == "dlock_acquisitions_total") acq = &f;
        ASSERT_TRUE(acq) << url << ": no dlock_acquisitions_total";
        bool semaphore = false, shedlock = false;
        for (const auto& m : acq->metric)
            for (const auto& l : m.label) {
                semaphore |= l.name == "kind" && l.value == "semaphore";
                shedlock |= l.name == "kind" && l.value == "shedlock";
            }
        EXPECT_TRUE(semaphore && shedlock) << url << ": every kind has its own series";
        c.reset();
        EXPECT_TRUE(collectable->Collect().empty()) << url << ": the client is gone";
    }
    if (tried == 0) GTEST_SKIP() << "built without ZooKeeper and PostgreSQL";
}

} // namespace
