// core/url_parts.hpp: the pieces of the URLs of the backends that name several servers
// (zk://h1:p1,h2:p2/..., etcd://h1:p1,h2:p2/...), parsed without I/O: the host list and
// numbers (the query's items: url_params, core/percent.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::detail {

struct url_host {
    std::string name; ///< a host name, an IPv4 address or "[v6]"
    std::uint16_t port = 0;
};

/// Parses "host", "host:port", "[v6]" or "[v6]:port"; a missing port is `default_port`.
/// False for an empty host, a bad port or a host with blanks or '@'.
bool parse_host(std::string_view s, std::uint16_t default_port, url_host& out);

/// Parses the comma-separated host list `authority` into `out`; false with the bad item in
/// `bad` when one does not parse.
bool parse_hosts(std::string_view authority, std::uint16_t default_port, std::vector<url_host>& out,
                 std::string& bad);

/// The whole of `v` as a decimal number.
bool parse_number(std::string_view v, long long& out);

} // namespace dlock::detail
