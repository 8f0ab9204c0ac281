#include "etcd_floor.hpp"

#include "access.hpp"

#include <dlock/client.hpp>

#include <algorithm>
#include <iostream>
#include <vector>

#ifdef DLOCK_WITH_ETCD
#include "etcd/backend.hpp"

#include <asio/post.hpp>

#include <future>
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
} // namespace

int etcd_floor(const std::string& url, std::chrono::milliseconds d) {
    client c(url);
    auto* b = dynamic_cast<detail::etcd::etcd_backend*>(detail::access::backend(c).get());
    if (b == nullptr) {
        std::cerr << "W: an etcd:// URL\n";
        return 64;
    }
    const std::string key = "dlock-bench-floor";
    std::vector<double> pairs;
    const auto t0 = clock::now();
    while (clock::now() - t0 < d) {
        const auto a = clock::now();
        const auto put = call(*b, [&](auto done) {
            pb::TxnRequest t;
            auto* p = t.add_success()->mutable_request_put();
            p->set_key(key);
            p->set_value("x");
            b->client().txn(std::move(t), [done](grpc::Status s, pb::TxnResponse&&) { done(s); });
        });
        const auto del = call(*b, [&](auto done) {
            pb::DeleteRangeRequest r;
            r.set_key(key);
            b->client().delete_range(
                std::move(r), [done](grpc::Status s, pb::DeleteRangeResponse&&) { done(s); });
        });
        if (!put.ok() || !del.ok()) {
            std::cerr << "W: " << (put.ok() ? del : put).error_message() << "\n";
            return 69;
        }
        pairs.push_back(std::chrono::duration<double, std::micro>(clock::now() - a).count());
    }
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    std::sort(pairs.begin(), pairs.end());
    const auto pct = [&](double q) {
        return pairs.empty()
                   ? 0.0
                   : pairs[static_cast<std::size_t>(q * static_cast<double>(pairs.size() - 1))];
    };
    std::cout << "{\"scenario\":\"W\",\"ops\":" << pairs.size()
              << ",\"ops_per_s\":" << static_cast<double>(pairs.size()) / secs
              << ",\"pair_p50_us\":" << pct(0.5) << ",\"pair_p99_us\":" << pct(0.99) << "}\n";
    return 0;
}
#else
int etcd_floor(const std::string&, std::chrono::milliseconds) {
    std::cerr << "W: this build has no etcd backend\n";
    return 64;
}
#endif

} // namespace dlock::bench
