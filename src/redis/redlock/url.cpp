// dlock::redlock::parse_url (dlock/redlock.hpp): a redlock:// or rediss-redlock:// URL into
// redlock_options. Each master of the comma-separated list is read as the redis:// (rediss://)
// URL it would be on its own, with the list's path (the database): every per-master setting
// a Redis URL has (user, password, TLS, db) stays reachable, and a password is never shown.
#include "core/percent.hpp"
#include "redis/redlock/backend.hpp"

#include <charconv>

namespace dlock::redlock {

namespace {
constexpr std::string_view known = "node_timeout, retry_delay, retry_jitter, watchdog_lease";

[[noreturn]] void bad(std::string why) {
    throw error(errc::configuration_error, why);
}

/// The Redlock parameters of the URL's query (milliseconds).
void read_query(std::string_view query, redlock_options& o) {
    for (const auto& param : detail::url_params(query)) {
        const auto key = param.key, value = param.value;
        std::chrono::milliseconds* field = key == "node_timeout"     ? &o.node_timeout
                                           : key == "retry_delay"    ? &o.retry_delay
                                           : key == "retry_jitter"   ? &o.retry_jitter
                                           : key == "watchdog_lease" ? &o.watchdog_lease
                                                                     : nullptr;
        if (!field)
            bad("unknown redlock:// URL parameter '" + std::string(key) +
                "' (known: " + std::string(known) + ")");
        long long ms = -1;
        const auto [end, e] = std::from_chars(value.data(), value.data() + value.size(), ms);
        if (value.empty() || e != std::errc{} || end != value.data() + value.size() || ms < 0)
            bad("redlock:// URL parameter " + std::string(key) + "= takes milliseconds");
        *field = std::chrono::milliseconds(ms);
    }
}
} // namespace

redlock_options parse_url(std::string_view url) {
    const auto scheme_end = url.find("://");
    const auto scheme = url.substr(0, scheme_end);
    if (scheme_end == std::string_view::npos || (scheme != "redlock" && scheme != "rediss-redlock"))
        bad("not a redlock:// or rediss-redlock:// URL");
    const std::string each = scheme == "redlock" ? "redis://" : "rediss://";
    auto rest = url.substr(scheme_end + 3);
    redlock_options o;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        read_query(rest.substr(q + 1), o);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    const auto path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    auto hosts = rest.substr(0, slash);
    for (std::size_t i = 0;; ++i) {
        const auto comma = hosts.find(',');
        const auto one = hosts.substr(0, comma);
        if (one.empty()) bad("redlock:// URL: master " + std::to_string(i) + " is empty");
        std::error_code ec;
        std::string why;
        o.masters.push_back(
            dlock::parse_url(each + std::string(one) + std::string(path), ec, &why));
        if (ec) bad("redlock:// URL, master " + std::to_string(i) + ": " + why);
        if (comma == std::string_view::npos) break;
        hosts = hosts.substr(comma + 1);
    }
    return o;
}

} // namespace dlock::redlock
