// zookeeper/url.hpp: `zk://host:port[,host:port...][/chroot][?key=value&...]`, parsed without I/O.
//
// The host list and chroot go to the C client as its connect string ("h1:p1,h2:p2/chroot").
// Parameters: session_timeout (ms, default 10000; the server clamps it to [2, 20] x tickTime
// and the negotiated value is what counts), connect_timeout (ms, default 5000: how long a first
// connect or a request may wait for a server), deterministic=1 (try hosts in the given order;
// the C client keeps this setting process-wide, so it then holds for every session),
// server_lag (ms: (syncLimit + 1) x tickTime of an ensemble, how long a follower cut off from
// its leader may go on answering, which the session's lease leaves out: touches.hpp; 0 for a
// standalone server; the session timeout must be more than 1.5 x it; when omitted, each
// session asks the server: server_lag.hpp).
// Refused with errc::unsupported: zks:// and tls=..., user:password@ and sasl=/auth=... (the
// C client Debian ships, libzookeeper 3.8.0, is built without TLS and SASL). Anything else
// malformed is errc::configuration_error with one line in `why`.
#pragma once

#include "core/url_parts.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::detail::zk {

struct zk_url {
    using host = url_host; ///< port 2181 when the URL names none
    std::vector<host> hosts{};
    std::string chroot{}; ///< "" or "/a/b" (no trailing slash)
    std::chrono::milliseconds session_timeout{10000};
    std::chrono::milliseconds connect_timeout{5000};
    std::optional<std::chrono::milliseconds> server_lag{}; ///< none: ask the server
    bool deterministic = false;

    /// "h1:p1,h2:p2/chroot", the C client's connect string.
    std::string connect_string() const;
    /// "h1:p1,h2:p2/chroot" for messages (the same: a zk:// URL carries no secret).
    std::string display() const { return connect_string(); }
};

/// Parses `url`; on error returns {} with `ec` set and `why` (when given) filled.
zk_url parse_zk_url(std::string_view url, std::error_code& ec, std::string* why);

} // namespace dlock::detail::zk
