// common.cpp: durations, connection options, exit-code mapping and JSON strings of the CLI.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace dlock::cli {

std::vector<std::string> kind_choices() {
    std::vector<std::string> names;
    for (const auto k : all_kinds()) // the library's one table of kinds
        names.emplace_back(kind_name(k));
    return names;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    if (text == "0") return std::chrono::milliseconds(0);
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
        ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    long long n = 0;
    if (std::from_chars(text.data(), text.data() + digits, n).ec != std::errc{})
        return std::nullopt;
    const auto unit = text.substr(digits);
    long long per_unit = 0;
    if (unit == "ms")
        per_unit = 1;
    else if (unit == "s")
        per_unit = 1000;
    else if (unit == "m")
        per_unit = 60'000;
    else if (unit == "h")
        per_unit = 3'600'000;
    else
        return std::nullopt;
    constexpr long long max_ms = 1000LL * 3'600'000; // 1000 h; 12 digits * 3.6e6 cannot overflow
    const long long ms = n * per_unit;
    if (ms > max_ms) return std::nullopt;
    return std::chrono::milliseconds(ms);
}

std::chrono::milliseconds duration_arg(std::string_view option, std::string_view text) {
    auto d = parse_duration(text);
    if (!d)
        throw usage_error("invalid duration for " + std::string(option) + ": '" + one_line(text) +
                          "' (use e.g. 250ms, 30s, 5m, 1h or 0)");
    return *d;
}

std::vector<std::string> effective_urls(const global_options& g) {
    if (!g.urls.empty()) return g.urls;
    if (const char* env = std::getenv("DLOCK_URL"); env && *env) return {env};
    return {std::string(default_url)};
}

namespace {
client_options one_master(const std::string& url) {
    std::error_code ec;
    std::string why;
    auto o = parse_url(url, ec, &why);
    if (ec) throw usage_error(why.empty() ? std::string("invalid URL") : one_line(why));
    if (const char* pw = std::getenv("DLOCK_PASSWORD"); pw && *pw) o.password = pw;
    o.client_name = "dlock-cli";
    return o;
}
} // namespace

client_options connect_options(const global_options& g) {
    const auto urls = effective_urls(g);
    if (urls.size() > 1)
        throw usage_error("several --url options mean Redlock, which this command does not take; "
                          "give one --url");
    return one_master(urls[0]);
}

namespace {
bool is_redlock_url(std::string_view url) {
    return url.starts_with("redlock://") || url.starts_with("rediss-redlock://");
}
} // namespace

std::optional<redlock_options> redlock_options_for(const global_options& g) {
    const auto urls = effective_urls(g);
    if (urls.size() == 1 && !is_redlock_url(urls[0])) return std::nullopt;
    redlock_options o;
    if (urls.size() == 1) {
        try {
            o = dlock::redlock::parse_url(urls[0]);
        } catch (const dlock::error& e) {
            throw usage_error(one_line(e.what()));
        }
        for (auto& m : o.masters) { // as one_master() makes each master of several --url
            if (const char* pw = std::getenv("DLOCK_PASSWORD"); pw && *pw) m.password = pw;
            m.client_name = "dlock-cli";
        }
        return o;
    }
    for (const auto& u : urls) {
        if (is_redlock_url(u))
            throw usage_error("a redlock:// URL is a whole Redlock; give it alone");
        auto m = one_master(u);
        if (m.kind != topology::standalone)
            throw usage_error("Redlock masters must be standalone servers: " + to_string(m));
        o.masters.push_back(std::move(m));
    }
    return o;
}

std::string url_with_password(std::string_view url, std::string_view password) {
    std::string_view scheme;
    for (std::string_view s : {"redis://", "rediss://"})
        if (url.substr(0, s.size()) == s) scheme = s;
    if (scheme.empty()) return std::string(url);
    auto rest = url.substr(scheme.size());
    const auto authority_end = std::min(rest.find('/'), rest.size());
    const auto at = rest.substr(0, authority_end).rfind('@');
    std::string user;
    if (at != std::string_view::npos) {
        user = std::string(rest.substr(0, std::min(rest.find(':'), at)));
        rest = rest.substr(at + 1);
    }
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string encoded;
    for (char ch : password) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            encoded += ch;
        } else {
            encoded += '%';
            encoded += hex[c >> 4];
            encoded += hex[c & 15];
        }
    }
    return std::string(scheme) + user + ':' + encoded + '@' + std::string(rest);
}

const char* const exit_code_help =
    R"(Exit codes: exec returns the command's own status (128+N when signal N killed it,
127 not found, 126 not executable); every failure of dlock itself has a code of its own:
  64  usage error: unknown command or option, bad duration, lock name or URL (EX_USAGE)
  65  NAME holds something that is not a lock, e.g. a string (EX_DATAERR)
  69  server unreachable (refused, unknown host, timeout), busy, connection lost, or
      authentication failed: wrong password, TLS certificate (EX_UNAVAILABLE)
  70  internal error of dlock (EX_SOFTWARE)
  71  a system call failed: fork, pipe, signalfd (EX_OSERR)
  73  exec, elect: the lock (leadership) was lost while the command ran; it got SIGTERM,
      then SIGKILL
  75  exec, elect: not acquired (elected) within --wait (EX_TEMPFAIL)
  76  the server answered with an error: out of memory, script error (EX_PROTOCOL)
  77  the server's ACL denies a command or key (EX_NOPERM)
  78  the server or deployment is not supported (EX_CONFIG)
  128+N  interrupted by signal N while waiting for the lock)";

int exit_code_for(const std::error_code& ec) {
    if (ec.category() != dlock::error_category()) return exit_code::os_error;
    switch (static_cast<errc>(ec.value())) {
    case errc::invalid_argument:
        return exit_code::usage;
    case errc::unavailable:
    case errc::timeout:
    case errc::ambiguous:
    case errc::server_busy:
    case errc::readonly:
    case errc::not_replicated:
    case errc::auth_failed: // the product page: 69 "Redis unreachable or authentication failed"
        return exit_code::unavailable;
    case errc::out_of_memory:
    case errc::server_error:
    case errc::no_script:
    case errc::moved:
    case errc::cross_slot:
    case errc::protocol_error:
        return exit_code::server_error;
    case errc::permission_denied:
        return exit_code::no_permission;
    case errc::configuration_error:
    case errc::unsupported:
        return exit_code::config;
    case errc::not_owner:
    case errc::lock_lost:
    case errc::cancelled:
        break;
    }
    return exit_code::software;
}

namespace {
/// The server a backend's user starts, for remedies.
std::string_view server_of(std::string_view backend) {
    if (backend == "zookeeper") return "a ZooKeeper server";
    if (backend == "postgresql") return "PostgreSQL";
    if (backend == "etcd") return "an etcd member";
    return "redis-server";
}
} // namespace

failure diagnose(const std::error_code& ec, std::string_view doing, std::string_view detail,
                 std::string_view name, std::string_view held_type, std::string_view backend) {
    const std::string server(server_of(backend));
    const std::string d = one_line(detail);
    const auto with = [&](std::string_view what) {
        std::string m = std::string(doing) + ": " + std::string(what);
        if (!d.empty()) m += " (" + d + ")";
        return m;
    };
    const auto has = [&](std::string_view word) { return d.find(word) != std::string::npos; };
    if (ec == errc::server_error && has("WRONGTYPE")) {
        const std::string held = held_type.empty() ? "something" : "a " + std::string(held_type);
        return {exit_code::data,
                std::string(doing) + ": '" + one_line(name) + "' holds " + held +
                    ", not a lock of this kind" + (d.empty() ? "" : " (" + d + ")") +
                    "; use another lock name, check --kind, or delete the key if it is stale"};
    }
    const int code = exit_code_for(ec);
    const std::string what = one_line(ec.message());
    if (ec == errc::unavailable || ec == errc::timeout) {
        if (d.starts_with("resolve "))
            return {code, with(what) + ": check the host name in --url or $DLOCK_URL"};
        if (has("no answer within"))
            return {code, with(what) + ": check the address, the network and any firewall"};
        if (d.empty())
            return {code,
                    with(what) + ": check --url or $DLOCK_URL and that " + server + " runs there"};
        return {code, with(what) + ": is " + server + " running there? (--url or $DLOCK_URL)"};
    }
    if (ec == errc::ambiguous)
        return {code, with(what) + "; check the server and the network, then retry"};
    if (ec == errc::auth_failed)
        return {code, with(what) + ": check the user and password in the URL or $DLOCK_PASSWORD"};
    if (ec == errc::permission_denied)
        return {code, with(what) + ": the user needs EVALSHA/EVAL, PUBLISH, SUBSCRIBE and the "
                                   "lock's keys (dlock keys NAME lists them)"};
    if (ec == errc::out_of_memory)
        return {code, with(what) + ": free memory or raise maxmemory on the server "
                                   "(with maxmemory-policy noeviction it refuses every write)"};
    if (ec == errc::server_busy) return {code, with(what) + ": retry when the server is ready"};
    if (ec == errc::not_replicated)
        return {code, with(what) + ": check that the replicas are up and keep up"};
    if (ec == errc::readonly)
        return {code, with(what) + ": point --url at the master, not a replica"};
    if (ec == errc::configuration_error && backend == "redis")
        return {code, with(what) + ": dlock needs Redis 6 or later (HELLO 3)"};
    return {code, with(what)};
}

failure diagnose(client& c, const std::error_code& ec, std::string_view doing,
                 std::string_view name) {
    const auto detail = c.last_error_detail();
    std::string type;
    if (ec == errc::server_error && detail.find("WRONGTYPE") != std::string::npos &&
        !name.empty()) {
        std::error_code tec;
        const std::string_view args[] = {"TYPE", name};
        const auto t = dlock::redis::command(c, args, tec);
        if (!tec && t.is_string() && t.str != "none") type = t.str;
    }
    return diagnose(ec, doing, detail, name, type, c.backend_name());
}

void json_string(std::ostream& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out << '"';
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            out << "\\\"";
            break;
        case '\\':
            out << "\\\\";
            break;
        case '\n':
            out << "\\n";
            break;
        case '\r':
            out << "\\r";
            break;
        case '\t':
            out << "\\t";
            break;
        case '\b':
            out << "\\b";
            break;
        case '\f':
            out << "\\f";
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                out << "\\u00" << hex[c >> 4] << hex[c & 15];
            else
                out << ch;
        }
    }
    out << '"';
}

std::string one_line(std::string_view text) {
    std::string s(text);
    for (char& ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.pop_back();
    return s;
}

void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right_aligned) {
    std::vector<std::size_t> width;
    for (const auto& r : rows) {
        if (width.size() < r.size()) width.resize(r.size());
        for (std::size_t c = 0; c < r.size(); ++c)
            width[c] = std::max(width[c], r[c].size());
    }
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t c = 0; c < r.size(); ++c) {
            const std::string pad(width[c] - r[c].size(), ' ');
            const bool right = c < right_aligned.size() && right_aligned[c];
            line += right ? pad + r[c] : r[c] + pad;
            if (c + 1 < r.size()) line += "  ";
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out << line << '\n';
    }
}

std::string format_duration(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

std::optional<int> signal_from_name(std::string_view s) {
    if (!s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos) {
        int n = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
        return n >= 1 && n < NSIG ? std::optional<int>(n) : std::nullopt;
    }
    std::string up;
    for (const char c : s)
        up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (up.starts_with("SIG")) up.erase(0, 3);
    for (int sig = 1; sig < NSIG; ++sig)
        if (const char* abbrev = ::sigabbrev_np(sig); abbrev && up == abbrev) return sig;
    return std::nullopt;
}

std::string signal_name(int sig) {
    if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
    return "signal " + std::to_string(sig);
}

} // namespace dlock::cli
