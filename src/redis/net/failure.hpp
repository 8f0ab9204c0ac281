// redis/net/failure.hpp: how net::connection's source files (connection.cpp, connect.cpp,
// dispatch.cpp, reconnect.cpp) turn failures into errors, log fields and last_failure() text.
#pragma once

#include "redis/net/connection.hpp"

#include <dlock/error.hpp>

#include <string>
#include <string_view>
#include <system_error>

namespace dlock::net {

/// A transport error as the error a request completes with.
inline std::error_code map_transport_error(const std::error_code& ec) {
    if (ec.category() == error_category()) return ec;
    if (ec == asio::error::operation_aborted) return make_error_code(errc::cancelled);
    return make_error_code(errc::unavailable);
}

/// host:port or the socket path, for log fields (never user or password).
inline std::string address_of(const target& t) {
    return t.unix_socket.empty() ? t.host + ':' + std::to_string(t.port) : t.unix_socket;
}

/// Server text as it goes into last_failure(): at most max_failure_text bytes, one line.
inline std::string bounded_text(std::string_view text) {
    std::string s(text.substr(0, max_failure_text));
    for (char& ch : s)
        if (ch == '\r' || ch == '\n') ch = ' ';
    if (text.size() > max_failure_text) s += "...";
    return s;
}

} // namespace dlock::net
