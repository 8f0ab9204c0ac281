#include "zookeeper/url.hpp"

#include "core/percent.hpp"
#include "core/url_parts.hpp"
#include "zookeeper/names.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::zk {
namespace {

constexpr std::string_view no_tls_sasl =
    "; the ZooKeeper C client Debian ships (libzookeeper 3.8.0) is built without TLS and "
    "SASL, so dlock cannot offer them";

} // namespace

std::string zk_url::connect_string() const {
    std::string s;
    for (const auto& h : hosts) {
        if (!s.empty()) s += ',';
        s += h.name;
        s += ':';
        s += std::to_string(h.port);
    }
    return s + chroot;
}

zk_url parse_zk_url(std::string_view url, std::error_code& ec, std::string* why) {
    ec.clear();
    const auto fail = [&](errc e, std::string m) {
        ec = e;
        if (why) *why = std::move(m);
        return zk_url{};
    };
    if (url.starts_with("zks://"))
        return fail(errc::unsupported,
                    "zks:// (ZooKeeper over TLS) is not supported" + std::string(no_tls_sasl));
    if (!url.starts_with("zk://"))
        return fail(errc::configuration_error,
                    "a ZooKeeper URL starts with zk:// (zk://host:port[,host:port...][/chroot])");
    std::string_view rest = url.substr(5);
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    const auto authority = rest.substr(0, slash);
    if (authority.find('@') != std::string_view::npos)
        return fail(errc::unsupported,
                    "credentials in a zk:// URL (user:password@) ask for SASL or digest "
                    "authentication, which is not supported" +
                        std::string(no_tls_sasl));
    zk_url u;
    u.hosts.clear();
    if (authority.empty()) return fail(errc::configuration_error, "zk:// URL without a host");
    if (std::string bad; !parse_hosts(authority, 2181, u.hosts, bad))
        return fail(errc::configuration_error,
                    "bad host '" + bad + "' in zk:// URL (host:port expected)");
    if (slash != std::string_view::npos) {
        auto chroot = rest.substr(slash);
        while (chroot.size() > 1 && chroot.back() == '/')
            chroot.remove_suffix(1);
        if (chroot != "/") {
            std::size_t p = 1;
            while (p <= chroot.size()) {
                const auto next = chroot.find('/', p);
                const auto seg =
                    chroot.substr(p, next == std::string_view::npos ? chroot.npos : next - p);
                if (!valid_segment(seg))
                    return fail(errc::configuration_error,
                                "bad chroot '" + std::string(chroot) + "' in zk:// URL");
                if (next == std::string_view::npos) break;
                p = next + 1;
            }
            u.chroot.assign(chroot);
        }
    }
    for (const auto& [key, value, item, has_value] : url_params(query)) {
        if (key == "tls" || key == "ssl")
            return fail(errc::unsupported,
                        "TLS for ZooKeeper is not supported" + std::string(no_tls_sasl));
        if (key == "sasl" || key == "auth" || key == "user" || key == "password")
            return fail(errc::unsupported, "ZooKeeper authentication ('" + std::string(key) +
                                               "') is not supported" + std::string(no_tls_sasl));
        long long v = 0;
        if (!has_value || !parse_number(value, v))
            return fail(errc::configuration_error,
                        "zk:// URL parameter '" + std::string(item) + "' needs a number");
        if (key == "session_timeout" || key == "connect_timeout") {
            if (v < 1 || v > 3'600'000)
                return fail(errc::configuration_error,
                            "zk:// URL parameter " + std::string(key) + " must be 1..3600000 ms");
            (key == "session_timeout" ? u.session_timeout : u.connect_timeout) =
                std::chrono::milliseconds(v);
        } else if (key == "deterministic") {
            u.deterministic = v != 0;
        } else if (key == "server_lag") {
            if (v < 0 || v > 3'600'000)
                return fail(errc::configuration_error,
                            "zk:// URL parameter server_lag must be 0..3600000 ms");
            u.server_lag = std::chrono::milliseconds(v);
        } else {
            return fail(errc::configuration_error,
                        "unknown zk:// URL parameter '" + std::string(key) +
                            "' (known: session_timeout, connect_timeout, server_lag, "
                            "deterministic)");
        }
    }
    if (u.server_lag && 2 * u.session_timeout <= 3 * *u.server_lag)
        return fail(errc::configuration_error, "zk:// session_timeout (" +
                                                   std::to_string(u.session_timeout.count()) +
                                                   " ms) must be more than 1.5 x server_lag (" +
                                                   std::to_string(u.server_lag->count()) +
                                                   " ms): a session's lease leaves the lag out");
    return u;
}

} // namespace dlock::detail::zk
