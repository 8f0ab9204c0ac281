#include "postgres/settings.hpp"

#include "core/percent.hpp"
#include "postgres/libpq.hpp"

#include <dlock/error.hpp>

#include <charconv>
#include <map>

namespace dlock::detail::pg {
namespace {

using detail::percent_decode;

template <class T>
bool parse_number(std::string_view s, T& out) noexcept {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && p == s.data() + s.size();
}

/// An SQL identifier written into statements: letters, digits, underscores.
bool sql_identifier(std::string_view v) noexcept {
    bool ok = !v.empty() && v.size() <= 63 && !(v[0] >= '0' && v[0] <= '9');
    for (char c : v)
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_');
    return ok;
}

bool parse_ms(std::string_view s, std::chrono::milliseconds& out, long long min) {
    long long v = 0;
    if (!parse_number(s, v) || v < min) return false;
    out = std::chrono::milliseconds(v);
    return true;
}

bool parse_keepalive(std::string_view s, keepalive& k) {
    if (s == "off") {
        k.enabled = false;
        return true;
    }
    int v[4] = {};
    std::size_t start = 0;
    for (int i = 0; i < 4; ++i) {
        const auto end = i < 3 ? s.find(':', start) : s.size();
        if (end == std::string_view::npos) return false;
        if (!parse_number(s.substr(start, end - start), v[i]) || v[i] < (i == 3 ? 0 : 1))
            return false;
        start = end + 1;
    }
    k = keepalive{true, v[0], v[1], v[2], v[3]};
    return true;
}

void fail(std::error_code& ec, std::string* why, std::string text) {
    ec = make_error_code(errc::configuration_error);
    if (why) *why = std::move(text);
}

} // namespace

std::chrono::milliseconds keepalive::server_bound() const noexcept {
    using std::chrono::milliseconds;
    if (!enabled) return milliseconds(7200000 + 9 * 75000); // the server's defaults
    if (user_timeout_ms <= 0) return milliseconds(1000LL * (idle_s + count * interval_s));
    long long t = 1000LL * (idle_s + interval_s);
    while (t < user_timeout_ms)
        t += 1000LL * interval_s;
    return milliseconds(t);
}

std::string redact(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        if (s.empty()) continue;
        for (auto p = text.find(s); p != std::string::npos; p = text.find(s, p + 3))
            text.replace(p, s.size(), "***");
    }
    return text;
}

settings parse_settings(std::string_view url, std::error_code& ec, std::string* why) {
    ec.clear();
    settings out;
    const std::string_view schemes[] = {"postgresql://", "postgres://"};
    std::size_t after_scheme = 0;
    for (auto s : schemes)
        if (url.substr(0, s.size()) == s) after_scheme = s.size();
    if (after_scheme == 0) {
        fail(ec, why, "not a postgresql:// or postgres:// URL");
        return out;
    }

    // The password as written (libpq's rule: userinfo ends at the first '@' before any '/').
    const auto q = url.find('?');
    const std::string_view base = url.substr(0, q);
    {
        const auto auth_end = base.find('/', after_scheme);
        const auto authority =
            base.substr(after_scheme, auth_end == std::string_view::npos ? std::string_view::npos
                                                                         : auth_end - after_scheme);
        const auto at = authority.find('@');
        if (at != std::string_view::npos) {
            const auto userinfo = authority.substr(0, at);
            const auto colon = userinfo.find(':');
            if (colon != std::string_view::npos && colon + 1 < userinfo.size())
                out.secrets.emplace_back(userinfo.substr(colon + 1));
        }
    }

    // Split off dlock's own query parameters.
    std::string rest(base);
    std::string kept;
    if (q != std::string_view::npos) {
        std::string_view query = url.substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const auto item = query.substr(0, amp);
            query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
            if (item.substr(0, 6) != "dlock_") {
                if (!item.empty()) kept += (kept.empty() ? "" : "&") + std::string(item);
                continue;
            }
            const auto eq = item.find('=');
            const std::string key(item.substr(0, eq));
            std::string value;
            if (eq == std::string_view::npos || !percent_decode(item.substr(eq + 1), value)) {
                fail(ec, why, "URL parameter " + key + " needs a value");
                return out;
            }
            bool ok = true;
            if (key == "dlock_key") {
                auto s = key_scheme_from(value);
                ok = s.has_value();
                if (ok) out.key = *s;
            } else if (key == "dlock_prepare") {
                ok = value == "on" || value == "off";
                out.prepare = value == "on";
            } else if (key == "dlock_fence") {
                ok = value == "on" || value == "off";
                out.fence = value == "on";
            } else if (key == "dlock_check") {
                ok = parse_ms(value, out.check_period, 10);
            } else if (key == "dlock_keepalive") {
                ok = parse_keepalive(value, out.keep);
            } else if (key == "dlock_pool") {
                ok = parse_number(value, out.pool);
            } else if (key == "dlock_lease") {
                std::chrono::milliseconds l{};
                ok = parse_ms(value, l, 30);
                out.row_lease = l;
            } else if (key == "dlock_timeout") {
                ok = parse_ms(value, out.request_timeout, 1);
            } else if (key == "dlock_connect_timeout") {
                ok = parse_ms(value, out.connect_timeout, 1);
            } else if (key == "dlock_table") {
                ok = sql_identifier(value);
                out.shedlock_table = value;
            } else if (key == "dlock_versioned_table") {
                ok = sql_identifier(value) && value.size() <= 59; // and "_rvn"
                out.versioned_table = value;
            } else {
                fail(ec, why, "unknown URL parameter " + key);
                return out;
            }
            if (!ok) {
                fail(ec, why, "bad value for URL parameter " + key);
                return out;
            }
        }
    }
    if (!kept.empty()) rest += "?" + kept;
    // A holder cut off from the server believes for up to dlock_check after its last proven
    // check; the server keeps the vanished session (and its advisory locks) up to the keepalive
    // bound. The belief must end first (docs/SAFETY.md, fault scenario P05).
    if (out.check_period >= out.keep.server_bound()) {
        fail(ec, why,
             "dlock_check (" + std::to_string(out.check_period.count()) +
                 " ms) must be shorter than the server's keepalive bound (" +
                 std::to_string(out.keep.server_bound().count()) +
                 " ms, from dlock_keepalive): a holder cut off from the server would still "
                 "believe it holds the lock after the server freed it");
        return out;
    }

    // libpq checks the rest; it is loaded here, by the first postgresql:// URL (libpq.hpp).
    if (std::string no_libpq; !load_libpq(&no_libpq)) {
        ec = make_error_code(errc::unsupported);
        if (why) *why = std::move(no_libpq);
        return out;
    }
    char* err = nullptr;
    PQconninfoOption* opts = pq().conninfo_parse(rest.c_str(), &err);
    if (!opts) {
        std::string msg = err ? err : "out of memory";
        if (err) pq().freemem(err);
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
            msg.pop_back();
        fail(ec, why, "bad PostgreSQL URL: " + redact(msg, out.secrets));
        return out;
    }
    std::map<std::string, std::string, std::less<>> given;
    for (auto* o = opts; o->keyword; ++o)
        if (o->val) given.emplace(o->keyword, o->val);
    pq().conninfo_free(opts);
    if (auto p = given.find("password"); p != given.end() && !p->second.empty())
        out.secrets.push_back(p->second);

    // dlock's defaults first: what the URL sets comes after and wins (server options are read
    // left to right, so the user's `-c` settings override ours too).
    const auto add_default = [&](const char* k, std::string v) {
        if (!given.count(k)) out.params.emplace_back(k, std::move(v));
    };
    std::string server_options = "-c client_connection_check_interval=1000";
    if (out.keep.enabled) {
        add_default("keepalives", "1");
        add_default("keepalives_idle", std::to_string(out.keep.idle_s));
        add_default("keepalives_interval", std::to_string(out.keep.interval_s));
        add_default("keepalives_count", std::to_string(out.keep.count));
        add_default("tcp_user_timeout", std::to_string(out.keep.user_timeout_ms));
        server_options += " -c tcp_keepalives_idle=" + std::to_string(out.keep.idle_s) +
                          " -c tcp_keepalives_interval=" + std::to_string(out.keep.interval_s) +
                          " -c tcp_keepalives_count=" + std::to_string(out.keep.count) +
                          " -c tcp_user_timeout=" + std::to_string(out.keep.user_timeout_ms);
    }
    add_default("fallback_application_name", "dlock");
    for (auto& [k, v] : given) {
        if (k == "options") continue;
        out.params.emplace_back(k, v);
    }
    if (auto p = given.find("options"); p != given.end()) server_options += " " + p->second;
    out.params.emplace_back("options", server_options);

    const auto get = [&](const char* k) {
        auto p = given.find(k);
        return p == given.end() ? std::string{} : p->second;
    };
    std::string host = get("host");
    if (host.empty()) host = get("hostaddr");
    out.display = "postgresql://";
    if (auto u = get("user"); !u.empty()) out.display += u + "@";
    out.display += host.empty() ? std::string("localhost") : host;
    if (auto p = get("port"); !p.empty()) out.display += ":" + p;
    out.display += "/" + get("dbname");
    out.display = redact(out.display, out.secrets);
    return out;
}

} // namespace dlock::detail::pg
