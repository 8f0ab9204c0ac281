// zookeeper/backend_call.hpp: what zk_backend's source files share (backend.cpp, queries.cpp,
// downgrade.cpp, fencing.cpp): the blocking call onto the I/O thread and transport_loss.
#pragma once

#include "zookeeper/backend.hpp"

#include <asio/post.hpp>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

/// A lost connection or a timed-out request (ZCONNECTIONLOSS, ZOPERATIONTIMEOUT).
inline bool transport_loss(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

template <class T>
T zk_backend::call(std::function<void(std::function<void(T)>)> start, T on_timeout) {
    auto p = std::make_shared<std::promise<T>>();
    auto f = p->get_future();
    auto once = std::make_shared<std::atomic<bool>>(false);
    asio::post(io_, [start = std::move(start), p, once] {
        start([p, once](T v) {
            if (!once->exchange(true)) p->set_value(std::move(v));
        });
    });
    if (f.wait_for(url_.connect_timeout * 2) != std::future_status::ready) return on_timeout;
    return f.get();
}

} // namespace dlock::detail::zk
