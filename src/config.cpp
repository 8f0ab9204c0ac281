#include "core/percent.hpp"

#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <charconv>

namespace dlock {
namespace {

using detail::percent_decode;

bool parse_endpoint(std::string_view s, std::uint16_t default_port, endpoint& ep) {
    std::string_view host = s;
    std::string_view port;
    if (!s.empty() && s.front() == '[') { // [v6]:port
        const auto close = s.find(']');
        if (close == std::string_view::npos) return false;
        host = s.substr(1, close - 1);
        auto rest = s.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return false;
            port = rest.substr(1);
        }
    } else if (const auto colon = s.rfind(':'); colon != std::string_view::npos) {
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
    if (host.empty()) return false;
    ep.host.assign(host);
    ep.port = default_port;
    if (!port.empty()) {
        unsigned v = 0;
        auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
        if (ec != std::errc{} || p != port.data() + port.size() || v == 0 || v > 65535)
            return false;
        ep.port = static_cast<std::uint16_t>(v);
    }
    return true;
}

bool parse_ms(std::string_view v, std::chrono::milliseconds& out) {
    long long n = 0;
    auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (e != std::errc{} || p != v.data() + v.size() || n < 0) return false;
    out = std::chrono::milliseconds(n);
    return true;
}

/// The query of a redis*:// URL: `key=value` pairs joined with '&'. Empty: fine.
bool parse_query(std::string_view query, client_options& o, std::string& why) {
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            why = "URL parameter '" + std::string(item) + "' has no value";
            return false;
        }
        const auto key = item.substr(0, eq);
        const auto value = item.substr(eq + 1);
        if (key == "wait") {
            const auto colon = value.find(':');
            const auto n = value.substr(0, colon);
            auto [p, e] = std::from_chars(n.data(), n.data() + n.size(), o.wait_replicas.replicas);
            if (e != std::errc{} || p != n.data() + n.size() || o.wait_replicas.replicas < 0 ||
                (colon != std::string_view::npos &&
                 !parse_ms(value.substr(colon + 1), o.wait_replicas.timeout))) {
                why = "URL parameter wait= takes REPLICAS[:TIMEOUT_MS]";
                return false;
            }
        } else if (key == "lock_delay") {
            std::chrono::milliseconds d{};
            if (!parse_ms(value, d)) {
                why = "URL parameter lock_delay= takes milliseconds";
                return false;
            }
            o.failover_lock_delay = d;
        } else if (key == "sentinel_user") {
            if (!percent_decode(value, o.sentinel_username)) {
                why = "invalid percent-encoding in URL parameter sentinel_user";
                return false;
            }
        } else if (key == "sentinel_password") {
            if (!percent_decode(value, o.sentinel_password)) {
                why = "invalid percent-encoding in URL parameter sentinel_password";
                return false;
            }
        } else {
            why = "unknown URL parameter '" + std::string(key) +
                  "' (known: wait, lock_delay, sentinel_user, sentinel_password)";
            return false;
        }
    }
    return true;
}

} // namespace

client_options parse_url(std::string_view url, std::error_code& ec, std::string* why) {
    client_options o;
    ec.clear();
    const auto bad = [&](std::string msg) {
        ec = make_error_code(errc::configuration_error);
        if (why) *why = std::move(msg);
        return client_options{};
    };
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos)
        return bad("URL has no scheme (expected redis://...)");
    const std::string_view scheme = url.substr(0, scheme_end);
    std::string_view rest = url.substr(scheme_end + 3);

    if (scheme == "unix") {
        const auto q = rest.find('?');
        std::string_view path = rest.substr(0, q);
        if (path.empty() || path.front() != '/') return bad("unix:// URL needs an absolute path");
        o.unix_socket.assign(path);
        if (q != std::string_view::npos) {
            const auto query = rest.substr(q + 1);
            if (query.substr(0, 3) != "db=") return bad("unix:// URL accepts only ?db=N");
            auto num = query.substr(3);
            auto [p, e] = std::from_chars(num.data(), num.data() + num.size(), o.db);
            if (e != std::errc{} || p != num.data() + num.size() || o.db < 0)
                return bad("invalid database index in URL");
        }
        o.endpoints.clear();
        return o;
    }
    if (scheme == "redis" || scheme == "rediss")
        o.kind = topology::standalone;
    else if (scheme == "redis-sentinel" || scheme == "rediss-sentinel")
        o.kind = topology::sentinel;
    else if (scheme == "redis-cluster")
        o.kind = topology::cluster;
    else
        return bad("unknown URL scheme '" + std::string(scheme) + "'");
    o.tls.enabled = scheme == "rediss" || scheme == "rediss-sentinel";
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        std::string why_q;
        if (!parse_query(rest.substr(q + 1), o, why_q)) return bad(std::move(why_q));
        rest = rest.substr(0, q);
    }

    // userinfo
    if (const auto at = rest.rfind('@', rest.find('/'));
        at != std::string_view::npos && at < rest.find('/')) {
        const auto userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const auto colon = userinfo.find(':');
        if (!percent_decode(userinfo.substr(0, colon), o.username))
            return bad("invalid percent-encoding in URL user name");
        if (colon != std::string_view::npos &&
            !percent_decode(userinfo.substr(colon + 1), o.password))
            return bad("invalid percent-encoding in URL password");
    }
    const auto slash = rest.find('/');
    const std::string_view hosts = rest.substr(0, slash);
    const std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);

    o.endpoints.clear();
    const std::uint16_t default_port = o.kind == topology::sentinel ? 26379 : 6379;
    std::size_t start = 0;
    while (start <= hosts.size()) {
        const auto comma = hosts.find(',', start);
        const auto item = hosts.substr(start, comma - start);
        endpoint ep;
        if (!parse_endpoint(item, default_port, ep))
            return bad("invalid host:port '" + std::string(item) + "' in URL");
        o.endpoints.push_back(std::move(ep));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (o.kind == topology::standalone && o.endpoints.size() != 1)
        return bad("redis:// URL takes exactly one host (use several --url options for Redlock)");

    if (o.kind == topology::sentinel) {
        const auto db_slash = path.find('/');
        o.master_name.assign(path.substr(0, db_slash));
        if (o.master_name.empty()) return bad("redis-sentinel:// URL needs /master-name");
        if (db_slash != std::string_view::npos) {
            const auto num = path.substr(db_slash + 1);
            auto [p, e] = std::from_chars(num.data(), num.data() + num.size(), o.db);
            if (e != std::errc{} || p != num.data() + num.size() || o.db < 0)
                return bad("invalid database index '" + std::string(num) + "' in URL");
        }
    } else if (!path.empty()) {
        if (o.kind == topology::cluster) return bad("redis-cluster:// URL takes no database");
        auto [p, e] = std::from_chars(path.data(), path.data() + path.size(), o.db);
        if (e != std::errc{} || p != path.data() + path.size() || o.db < 0)
            return bad("invalid database index '" + std::string(path) + "' in URL");
    }
    return o;
}

client_options parse_url(std::string_view url) {
    std::error_code ec;
    std::string why;
    auto o = parse_url(url, ec, &why);
    if (ec) throw error(errc::configuration_error, why);
    return o;
}

std::string to_string(const client_options& o) {
    std::string s;
    if (!o.unix_socket.empty()) {
        s = "unix://" + o.unix_socket;
        if (o.db != 0) s += "?db=" + std::to_string(o.db);
        return s;
    }
    switch (o.kind) {
    case topology::standalone:
        s = o.tls.enabled ? "rediss://" : "redis://";
        break;
    case topology::sentinel:
        s = o.tls.enabled ? "rediss-sentinel://" : "redis-sentinel://";
        break;
    case topology::cluster:
        s = "redis-cluster://";
        break;
    }
    if (!o.username.empty() || !o.password.empty()) {
        s += o.username;
        if (!o.password.empty()) s += ":***";
        s += '@';
    }
    for (std::size_t i = 0; i < o.endpoints.size(); ++i) {
        if (i) s += ',';
        const auto& ep = o.endpoints[i];
        if (ep.host.find(':') != std::string::npos)
            s += '[' + ep.host + ']';
        else
            s += ep.host;
        s += ':' + std::to_string(ep.port);
    }
    if (o.kind == topology::sentinel) s += '/' + o.master_name;
    if (o.db != 0) s += '/' + std::to_string(o.db);
    char sep = '?';
    const auto param = [&](const std::string& kv) {
        s += sep + kv;
        sep = '&';
    };
    if (o.wait_replicas.replicas > 0)
        param("wait=" + std::to_string(o.wait_replicas.replicas) + ':' +
              std::to_string(o.wait_replicas.timeout.count()));
    if (o.failover_lock_delay)
        param("lock_delay=" + std::to_string(o.failover_lock_delay->count()));
    if (!o.sentinel_username.empty()) param("sentinel_user=" + o.sentinel_username);
    if (!o.sentinel_password.empty()) param("sentinel_password=***");
    return s;
}

} // namespace dlock
