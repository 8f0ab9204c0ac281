// etcd/url.hpp: `etcd://[user:password@]host:port[,host:port...][/prefix][?key=value&...]` and
// `etcds://` (TLS), parsed without I/O.
//
// Every host is an endpoint of one gRPC channel (rpc.hpp). The prefix ("/p") puts every lock
// key under "/p/" (layout.hpp); without it keys start with the lock's name, as etcdctl lock's
// do. user:password@ (percent-encoded) asks etcd for a token (Auth.Authenticate). Parameters:
// ttl (seconds, default 60 as etcd's concurrency.Session: the client's lease), connect_timeout
// (ms, default 5000: how long a request or the first connection may take), and for etcds://
// cacert (the CA file that verifies the server; default: the system's roots), cert and key
// (a client certificate and its key, PEM files). Anything malformed is
// errc::configuration_error with one line in `why`.
#pragma once

#include "core/url_parts.hpp"

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::detail::etcd {

struct etcd_url {
    std::vector<url_host> endpoints{}; ///< port 2379 when the URL names none
    std::string prefix{};              ///< "" or "/p" (no trailing slash)
    bool tls = false;
    std::string user{};
    std::string password{};
    std::chrono::seconds ttl{60};
    std::chrono::milliseconds connect_timeout{5000};
    std::string cacert{};
    std::string cert{};
    std::string key{};

    /// "etcd://[user@]h1:p1,h2:p2/prefix" for messages (never the password).
    std::string display() const;
};

/// Parses `url`; on error returns {} with `ec` set and `why` (when given) filled.
etcd_url parse_etcd_url(std::string_view url, std::error_code& ec, std::string* why);

} // namespace dlock::detail::etcd
