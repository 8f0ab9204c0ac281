// zookeeper/backend_call.hpp: what zk_backend's source files share (backend.cpp, queries.cpp,
// downgrade.cpp, fencing.cpp): the blocking call onto the I/O thread (and, through
// result_codes.hpp, transport_loss).
#pragma once

#include "zookeeper/backend.hpp"
#include "zookeeper/result_codes.hpp"

#include <functional>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

template <class T>
T zk_backend::call(std::function<void(std::function<void(T)>)> start, T on_timeout) {
    return rt_.call<T>(std::move(start), std::move(on_timeout), url_.connect_timeout * 2);
}

} // namespace dlock::detail::zk
