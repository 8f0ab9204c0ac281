// core/blocking_acquire.hpp: lock_backend::acquire() and campaign() for a backend whose
// acquisitions are asynchronous (ZooKeeper, etcd): runs async_acquire() or async_campaign() and
// blocks for its result, which the acquisition's own deadlines bound. Refused on the backend's I/O
// thread, where it would wait for itself (errc::invalid_argument), as the seam's contract says.
#pragma once

#include "core/lock_backend.hpp"
#include "core/runtime.hpp"

#include <memory>
#include <string>
#include <utility>

namespace dlock::detail {

namespace blocking {

/// Runs `start(done)` and blocks until `done` got the hold (or the error).
template <class Start>
std::shared_ptr<hold> wait_for_hold(lock_backend& b, std::error_code& ec, Start start) {
    ec.clear();
    if (b.on_io_thread()) {
        ec = errc::invalid_argument;
        return nullptr;
    }
    using result = std::pair<std::error_code, std::shared_ptr<hold>>;
    auto slot = std::make_shared<one_shot<result>>();
    start([slot](std::error_code e, std::shared_ptr<hold> h) { slot->set({e, std::move(h)}); });
    auto [e, h] = slot->take(); // bounded by the acquisition's own deadlines
    ec = e;
    return h;
}

} // namespace blocking

inline std::shared_ptr<hold> acquire_blocking(lock_backend& b, std::string_view name,
                                              const acquire_options& opts, std::error_code& ec) {
    return blocking::wait_for_hold(
        b, ec, [&](auto done) { b.async_acquire(std::string(name), opts, std::move(done)); });
}

inline std::shared_ptr<hold> campaign_blocking(lock_backend& b, std::string_view name,
                                               std::string value, const campaign_options& opts,
                                               std::error_code& ec) {
    return blocking::wait_for_hold(b, ec, [&](auto done) {
        b.async_campaign(std::string(name), std::move(value), opts, std::move(done));
    });
}

} // namespace dlock::detail
