#include "etcd/url.hpp"

#include "core/percent.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::etcd {

std::string etcd_url::display() const {
    std::string s = tls ? "etcds://" : "etcd://";
    if (!user.empty()) s += user + "@";
    for (std::size_t i = 0; i < endpoints.size(); ++i)
        s += (i ? "," : "") + endpoints[i].name + ":" + std::to_string(endpoints[i].port);
    return s + prefix;
}

etcd_url parse_etcd_url(std::string_view url, std::error_code& ec, std::string* why) {
    ec.clear();
    const auto fail = [&](std::string m) {
        ec = errc::configuration_error;
        if (why) *why = std::move(m);
        return etcd_url{};
    };
    etcd_url u;
    std::string_view rest;
    if (url.starts_with("etcd://")) {
        rest = url.substr(7);
    } else if (url.starts_with("etcds://")) {
        rest = url.substr(8);
        u.tls = true;
    } else {
        return fail("an etcd URL starts with etcd:// or etcds:// "
                    "(etcd://host:port[,host:port...][/prefix])");
    }
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    auto authority = rest.substr(0, slash);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const auto userinfo = authority.substr(0, at);
        authority = authority.substr(at + 1);
        const auto colon = userinfo.find(':');
        if (colon == std::string_view::npos || colon == 0 ||
            !percent_decode(userinfo.substr(0, colon), u.user) ||
            !percent_decode(userinfo.substr(colon + 1), u.password))
            return fail("the credentials of an etcd URL are user:password@ (percent-encoded)");
    }
    if (authority.empty()) return fail("etcd URL without a host");
    if (std::string bad; !parse_hosts(authority, 2379, u.endpoints, bad))
        return fail("bad host '" + bad + "' in etcd URL (host:port expected)");
    if (slash != std::string_view::npos) {
        auto prefix = rest.substr(slash);
        while (!prefix.empty() && prefix.back() == '/')
            prefix.remove_suffix(1);
        for (const char c : prefix)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                return fail("the prefix of an etcd URL has a control character");
        u.prefix.assign(prefix);
    }
    for (const auto& [key, value, item, has_value] : url_params(query)) {
        const auto name = std::string(key);
        if (!has_value) return fail("etcd URL parameter '" + name + "' needs a value");
        if (key == "cacert" || key == "cert" || key == "key") {
            if (!u.tls) return fail("etcd URL parameter " + name + " needs etcds:// (TLS)");
            std::string path;
            if (!percent_decode(value, path) || path.empty())
                return fail("etcd URL parameter " + name + " needs a file name");
            (key == "cacert" ? u.cacert : key == "cert" ? u.cert : u.key) = std::move(path);
            continue;
        }
        long long v = 0;
        if (!parse_number(value, v))
            return fail("etcd URL parameter '" + name + "' needs a number");
        if (key == "ttl") {
            if (v < 1 || v > 86400) return fail("etcd URL parameter ttl must be 1..86400 s");
            u.ttl = std::chrono::seconds(v);
        } else if (key == "connect_timeout") {
            if (v < 1 || v > 3'600'000)
                return fail("etcd URL parameter connect_timeout must be 1..3600000 ms");
            u.connect_timeout = std::chrono::milliseconds(v);
        } else {
            return fail("unknown etcd URL parameter '" + name +
                        "' (known: ttl, connect_timeout, cacert, cert, key)");
        }
    }
    if (u.cert.empty() != u.key.empty())
        return fail("etcd URL parameters cert and key go together (a client certificate)");
    return u;
}

} // namespace dlock::detail::etcd
