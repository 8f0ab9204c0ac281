// dlock/detail/request.hpp: the unit of work a connection carries. Internal; it is in a public
// header only because the async template of dlock/redis.hpp (async_command) builds requests.
#pragma once

#include <dlock/resp3.hpp>

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>

namespace dlock::detail {

/// One command in flight. The connection encodes `args` when the request is queued, and calls
/// complete() exactly once, on the I/O thread, with the reply (which may be an error reply) or
/// a transport error. `args` must stay valid until complete() runs (the EVAL fallback re-encodes
/// them). Lifetimes: owned by the caller (stack for sync calls, heap op for async ones).
class request {
public:
    std::span<const std::string_view> args;
    /// Script text to send with EVAL when the server answers -NOSCRIPT to this EVALSHA.
    /// args[0] must be "EVALSHA" and args[1] the SHA1 of this text.
    std::string_view eval_fallback;
    std::chrono::steady_clock::time_point deadline;
    /// Cluster redirections (MOVED / ASK / CLUSTERDOWN retries) this request has followed since
    /// it was submitted; the router bounds them. Reset by net::connection::submit().
    std::uint8_t redirects = 0;
    /// Cluster: the ASKING sent ahead of this request (an ASK redirection) was answered NOPERM
    /// (an ACL without +asking): the router completes the request with permission_denied
    /// instead of following the MOVED the target then answers.
    bool asking_refused = false;

    virtual void complete(std::error_code ec, resp3::value&& reply) = 0;

protected:
    request() = default;
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() = default;
};

} // namespace dlock::detail
