// etcd/backend_call.hpp: what etcd_backend's source files share (backend.cpp, queries.cpp):
// the blocking call onto the I/O thread.
#pragma once

#include "etcd/backend.hpp"

#include <functional>

namespace dlock::detail::etcd {

template <class T>
T etcd_backend::call(std::function<void(std::function<void(T)>)> start, T on_timeout) {
    return rt_.call<T>(std::move(start), std::move(on_timeout), url_.connect_timeout * 2);
}

} // namespace dlock::detail::etcd
