#include "etcd_floor.hpp"

#include "access.hpp"
#include "scenarios.hpp"

#include <dlock/client.hpp>

#include <algorithm>
#include <iostream>
#include <vector>

#ifdef DLOCK_WITH_ETCD
#include "etcd/backend.hpp"
#include "etcd/watch.hpp"

#include <asio/post.hpp>

#include <future>
#include <random>
#include <thread>
#endif

namespace dlock::bench {

#ifdef DLOCK_WITH_ETCD
namespace {
namespace pb = ::etcdserverpb;
using clock = std::chrono::steady_clock;

/// Runs `start(done)` on the backend's I/O thread and waits for `done(status)`.
template <class Start>
grpc::Status call(detail::etcd::etcd_backend& b, Start start) {
    std::promise<grpc::Status> p;
    auto f = p.get_future();
    asio::post(b.executor(), [&] { start([&](grpc::Status s) { p.set_value(std::move(s)); }); });
    return f.get();
}

detail::etcd::etcd_backend* etcd_of(client& c) {
    return dynamic_cast<detail::etcd::etcd_backend*>(detail::access::backend(c).get());
}

grpc::Status put_key(detail::etcd::etcd_backend& b, const std::string& key) {
    return call(b, [&](auto done) {
        pb::TxnRequest t;
        auto* p = t.add_success()->mutable_request_put();
        p->set_key(key);
        p->set_value("x");
        b.client().txn(std::move(t), [done](grpc::Status s, pb::TxnResponse&&) { done(s); });
    });
}

/// One Range of `key` on `b`, started on its I/O thread; `done` runs there with its status.
template <class Done>
void read_key(detail::etcd::etcd_backend& b, const std::string& key, Done done) {
    pb::RangeRequest r;
    r.set_key(key);
    b.client().range(std::move(r), [done](grpc::Status s, pb::RangeResponse&&) { done(s); });
}
} // namespace

int etcd_floor(const std::string& url, unsigned workers, std::chrono::milliseconds d) {
    client c(url);
    auto* b = etcd_of(c);
    if (b == nullptr) {
        std::cerr << "W: an etcd:// URL\n";
        return 64;
    }
    workers = std::max(workers, 1U);
    std::vector<std::vector<double>> pairs(workers);
    std::vector<std::string> errors(workers);
    std::vector<std::thread> ts;
    const auto t0 = clock::now();
    for (unsigned w = 0; w < workers; ++w)
        ts.emplace_back([&, w] {
            // Each worker's own key, as B's workers have theirs.
            const std::string key = "dlock-bench-floor-" + std::to_string(w);
            while (clock::now() - t0 < d) {
                const auto a = clock::now();
                const auto put = put_key(*b, key);
                const auto del = call(*b, [&](auto done) {
                    pb::DeleteRangeRequest r;
                    r.set_key(key);
                    b->client().delete_range(
                        std::move(r),
                        [done](grpc::Status s, pb::DeleteRangeResponse&&) { done(s); });
                });
                if (!put.ok() || !del.ok()) {
                    errors[w] = (put.ok() ? del : put).error_message();
                    return;
                }
                pairs[w].push_back(
                    std::chrono::duration<double, std::micro>(clock::now() - a).count());
            }
        });
    for (auto& t : ts)
        t.join();
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    std::vector<double> all;
    for (unsigned w = 0; w < workers; ++w) {
        if (!errors[w].empty()) {
            std::cerr << "W: " << errors[w] << "\n";
            return 69;
        }
        all.insert(all.end(), pairs[w].begin(), pairs[w].end());
    }
    std::cout << "{\"scenario\":\"W\",\"workers\":" << workers << ",\"ops\":" << all.size()
              << ",\"ops_per_s\":" << static_cast<double>(all.size()) / secs
              << ",\"pair_p50_us\":" << percentile(all, 0.5)
              << ",\"pair_p99_us\":" << percentile(all, 0.99) << "}\n";
    return 0;
}

int etcd_handoff_floor(const std::string& url, std::uint64_t samples, std::chrono::milliseconds d) {
    namespace etcd = detail::etcd;
    client holder(url);
    client waiter(url);
    auto* h = etcd_of(holder);
    auto* w = etcd_of(waiter);
    if (h == nullptr || w == nullptr) {
        std::cerr << "WD: an etcd:// URL\n";
        return 64;
    }
    const std::string key = "dlock-bench-handoff-floor";
    std::vector<double> handoffs;
    std::vector<double> rtts;
    std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<int> phase(1000, 5000); // us, as D's
    const auto t0 = clock::now();
    std::string error;
    while (handoffs.size() < samples && clock::now() - t0 < d && error.empty()) {
        if (auto s = put_key(*h, key); !s.ok()) {
            error = s.error_message();
            break;
        }
        // The waiter's watch: created (on_created) before the pause; at the deletion, one Range.
        std::promise<void> created;
        std::promise<grpc::Status> answered;
        std::shared_ptr<etcd::key_watch> watch;
        asio::post(w->executor(), [&] {
            watch = std::make_shared<etcd::key_watch>(
                w->client(), key, 0, [&](etcd::key_watch::result r) {
                    if (r != etcd::key_watch::result::deleted) {
                        answered.set_value(
                            grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch broken"));
                        return;
                    }
                    read_key(*w, key, [&](grpc::Status s) { answered.set_value(std::move(s)); });
                });
            watch->on_created([&](std::int64_t) { created.set_value(); });
            watch->start();
        });
        created.get_future().wait();
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        auto got = answered.get_future();
        const auto released = clock::now();
        asio::post(h->executor(), [&] {
            pb::DeleteRangeRequest r;
            r.set_key(key);
            h->client().delete_range(std::move(r), [](grpc::Status, pb::DeleteRangeResponse&&) {});
        });
        const auto s = got.get();
        const auto at = clock::now();
        call(*w, [&](auto done) { // the watch ended; drop it on its own thread
            watch.reset();
            done(grpc::Status::OK);
        });
        if (!s.ok()) {
            error = s.error_message();
            break;
        }
        handoffs.push_back(std::chrono::duration<double, std::micro>(at - released).count());
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        const auto p0 = clock::now();
        const auto r = call(*h, [&](auto done) { read_key(*h, key, done); });
        if (!r.ok()) {
            error = r.error_message();
            break;
        }
        rtts.push_back(std::chrono::duration<double, std::micro>(clock::now() - p0).count());
    }
    if (!error.empty()) {
        std::cerr << "WD: " << error << "\n";
        return 69;
    }
    std::cout << "{\"scenario\":\"WD\",\"ops\":" << handoffs.size()
              << ",\"handoff_p50_us\":" << percentile(handoffs, 0.5)
              << ",\"handoff_p99_us\":" << percentile(handoffs, 0.99)
              << ",\"idle_rtt_p50_us\":" << percentile(rtts, 0.5)
              << ",\"idle_rtt_p99_us\":" << percentile(rtts, 0.99) << "}\n";
    return 0;
}
#else
int etcd_handoff_floor(const std::string&, std::uint64_t, std::chrono::milliseconds) {
    std::cerr << "WD: this build has no etcd backend\n";
    return 64;
}

int etcd_floor(const std::string&, unsigned, std::chrono::milliseconds) {
    std::cerr << "W: this build has no etcd backend\n";
    return 64;
}
#endif

} // namespace dlock::bench
