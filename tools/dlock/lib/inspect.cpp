// inspect.cpp: `dlock status`, `dlock list`, `dlock keys` and `dlock unlock --force`, one path
// for every backend (inspect.hpp). The library reads each store's own records; this file picks
// the kind to show, prints the one schema, and names what it broke.
#include "inspect.hpp"

#include "commands.hpp"

#include <algorithm>

namespace dlock::cli {
namespace {

/// The kinds `status` looks at: the default lock (on Redis it reads whichever Redis kind the
/// key holds), then the lease rows of the backends that have them (PostgreSQL's semaphore
/// rows among them), then the simple lock (Redlock's one kind); a kind the backend does not
/// offer is skipped.
constexpr lock_kind status_kinds[] = {lock_kind::reentrant, lock_kind::shedlock,
                                      lock_kind::lease,     lock_kind::versioned,
                                      lock_kind::semaphore, lock_kind::simple};

void check_name(const std::string& name) {
    if (name.empty()) throw usage_error("empty lock name");
}

/// A JSON number, or null.
template <class T>
void json_number(std::ostream& out, const std::optional<T>& v) {
    if (v)
        out << *v;
    else
        out << "null";
}

/// A details value as JSON: numbers and true/false as they are, anything else a string.
void json_value(std::ostream& out, const std::string& v) {
    const bool number = !v.empty() && std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(),
                                                  [](char ch) { return ch >= '0' && ch <= '9'; });
    if ((number && v != "-") || v == "true" || v == "false")
        out << v;
    else
        json_string(out, v);
}

void json_contender(std::ostream& out, const lock_contender& c) {
    out << "{\"owner\":";
    json_string(out, c.owner);
    out << ",\"holds\":" << (c.holds ? "true" : "false");
    if (c.holds) {
        out << ",\"count\":";
        json_number(out, c.hold_count);
    } else {
        out << ",\"position\":";
        json_number(out, c.position);
        out << ",\"place_ms\":";
        json_number(out, c.remaining ? std::optional(c.remaining->count()) : std::nullopt);
    }
    out << ",\"token\":";
    json_number(out, c.token);
    out << ",\"session\":";
    json_string(out, c.session);
    out << ",\"entry\":";
    json_string(out, c.entry);
    out << '}';
}

/// "unlocked 'x' (...); <what happened>": what force_unlock did to this kind on this backend.
std::string_view unlock_effect(const client& c, lock_kind kind) {
    if (kind == lock_kind::shedlock) return "lock_until set to now (row kept)";
    if (kind == lock_kind::lease) return "expires_at set to now (row kept), waiters notified";
    if (kind == lock_kind::versioned) return "row deleted, waiters notified";
    if (kind == lock_kind::semaphore && c.backend_name() == "postgresql")
        return "every permit's row expired, waiters notified";
    if (c.backend_name() == "redis") return "waiters notified";
    if (c.backend_name() == "redlock") return "deleted on every master";
    return "its session ended, waiters served";
}

} // namespace

client open_client(const global_options& g, std::optional<std::chrono::milliseconds> watchdog) {
    const auto urls = effective_urls(g);
    if (auto redlock = redlock_options_for(g)) { // several --url, or a redlock:// URL
        if (watchdog) redlock->watchdog_lease = *watchdog;
        try {
            return client(*redlock);
        } catch (const dlock::error& e) {
            throw usage_error(one_line(e.what())); // options the Redlock refuses
        }
    }
    std::error_code ec;
    (void)parse_url(urls[0], ec); // a Redis URL: the CLI's own options (password, name)
    if (!ec) {
        auto o = connect_options(g);
        if (watchdog) o.watchdog_lease = *watchdog;
        return client(o);
    }
    try {
        return client(urls[0]);
    } catch (const dlock::error& e) {
        if (e.code() == errc::configuration_error) throw usage_error(one_line(e.what()));
        const auto scheme = urls[0].substr(0, urls[0].find("://"));
        throw diagnose(e.code(), "cannot use " + scheme + " URL", one_line(e.what()));
    }
}

lock_status status_of(client& c, const std::string& name, lock_kind* found) {
    std::optional<lock_status> first;
    for (const auto kind : status_kinds) {
        std::error_code ec;
        auto s = c.inspect(name, kind, ec);
        if (ec == errc::unsupported) continue; // not a kind of this backend
        if (ec == errc::invalid_argument)
            throw usage_error("'" + one_line(name) + "' cannot be a lock name");
        if (ec) throw diagnose(c, ec, "cannot read '" + one_line(name) + "'", name);
        if (found) *found = kind;
        if (s.exists || !s.foreign.empty()) return s;
        if (!first) first = std::move(s);
    }
    if (!first) throw usage_error("'" + one_line(name) + "' cannot be a lock name");
    if (found) *found = lock_kind::reentrant;
    return *first;
}

std::vector<lock_status> list_locks(client& c, const std::string& pattern) {
    std::error_code ec;
    auto locks = c.list(pattern == "*" ? std::string() : pattern, ec);
    if (ec) throw diagnose(c, ec, "cannot list locks");
    return locks;
}

std::size_t holder_count(const lock_status& s) {
    return static_cast<std::size_t>(std::count_if(s.contenders.begin(), s.contenders.end(),
                                                  [](const auto& c) { return c.holds; }));
}

std::uint64_t waiter_count(const lock_status& s) {
    return s.waiter_count ? *s.waiter_count : s.contenders.size() - holder_count(s);
}

std::string ttl_text(const lock_status& s) {
    if (!s.remaining_lease) return "-";
    if (s.remaining_lease->count() < 0) return "no expiry";
    return std::to_string(s.remaining_lease->count()) + " ms";
}

std::string fencing_text(const lock_status& s) {
    return s.fencing_counter ? std::to_string(*s.fencing_counter) : "-";
}

void print_json(std::ostream& out, const lock_status& s) {
    out << "{\"name\":";
    json_string(out, s.name);
    out << ",\"backend\":";
    json_string(out, s.backend);
    out << ",\"kind\":";
    json_string(out, s.exists ? s.kind : "none");
    out << ",\"exists\":" << (s.exists ? "true" : "false") << ",\"holders\":[";
    bool comma = false;
    for (const auto& c : s.contenders)
        if (c.holds) {
            out << (std::exchange(comma, true) ? "," : "");
            json_contender(out, c);
        }
    out << "],\"waiters\":" << waiter_count(s) << ",\"queue\":[";
    comma = false;
    for (const auto& c : s.contenders)
        if (!c.holds) {
            out << (std::exchange(comma, true) ? "," : "");
            json_contender(out, c);
        }
    out << "],\"ttl_ms\":";
    json_number(out, s.remaining_lease ? std::optional(s.remaining_lease->count()) : std::nullopt);
    out << ",\"fencing_token\":";
    json_number(out, s.fencing_counter);
    out << ",\"details\":{";
    comma = false;
    for (const auto& [k, v] : s.details) {
        out << (std::exchange(comma, true) ? "," : "");
        json_string(out, k);
        out << ':';
        json_value(out, v);
    }
    if (!s.detail.empty()) {
        out << (comma ? "," : "") << "\"detail\":";
        json_string(out, s.detail);
    }
    out << "}}";
}

void print_status_text(std::ostream& out, const lock_status& s) {
    out << "name     " << s.name << '\n';
    out << "backend  " << s.backend << '\n';
    if (!s.exists) {
        out << "kind     none (not locked)\n";
        if (!s.detail.empty()) out << "detail   " << s.detail << '\n';
        return;
    }
    out << "kind     " << s.kind << '\n';
    out << "state    " << holder_count(s) << " holder(s), " << waiter_count(s) << " waiter(s)\n";
    for (const auto& c : s.contenders) {
        if (!c.holds) continue;
        out << "holder   " << c.owner;
        if (!c.entry.empty()) out << "  [" << c.entry << ']';
        if (!c.session.empty()) out << "  session " << c.session;
        if (c.token) out << "  token " << *c.token;
        if (c.hold_count) out << "  (hold count " << *c.hold_count << ')';
        out << '\n';
    }
    out << "ttl      " << ttl_text(s) << '\n';
    out << "fencing  " << fencing_text(s) << '\n';
    std::uint64_t place = 0;
    for (const auto& c : s.contenders) {
        if (c.holds) continue;
        out << "queue    " << ++place << ". " << c.owner;
        if (!c.entry.empty()) out << "  [" << c.entry << ']';
        if (!c.session.empty()) out << "  session " << c.session;
        if (c.token) out << "  token " << *c.token;
        if (c.remaining) out << "  (place for " << c.remaining->count() << " ms)";
        out << '\n';
    }
    for (const auto& [k, v] : s.details) {
        out << k << std::string(k.size() < 9 ? 9 - k.size() : 1, ' ') << v << '\n';
    }
    if (!s.detail.empty()) out << "detail   " << s.detail << '\n';
}

void print_list_text(std::ostream& out, const std::vector<lock_status>& locks) {
    std::vector<std::vector<std::string>> rows{
        {"NAME", "KIND", "HOLDER", "COUNT", "TTL", "WAITERS", "FENCING"}};
    for (const auto& l : locks) {
        std::vector<const lock_contender*> holders;
        for (const auto& c : l.contenders)
            if (c.holds) holders.push_back(&c);
        for (std::size_t k = 0; k < std::max<std::size_t>(1, holders.size()); ++k) {
            const bool first = k == 0;
            const auto* h = k < holders.size() ? holders[k] : nullptr;
            rows.push_back({first ? l.name : "", first ? l.kind : "", h ? h->owner : "-",
                            h && h->hold_count ? std::to_string(*h->hold_count) : "-",
                            first ? ttl_text(l) : "", first ? std::to_string(waiter_count(l)) : "",
                            first ? fencing_text(l) : ""});
        }
    }
    print_table(out, rows);
}

failure not_a_lock(const lock_status& s) {
    return {exit_code::data, "'" + one_line(s.name) + "' holds a " + s.foreign +
                                 ", not a lock; use another name (nothing was changed)"};
}

int run_status(const global_options& g, const std::vector<std::string>& names, bool json,
               std::ostream& out) {
    for (const auto& name : names)
        check_name(name);
    auto c = open_client(g);
    std::vector<lock_status> infos;
    for (const auto& name : names) {
        infos.push_back(status_of(c, name));
        if (!infos.back().foreign.empty()) throw not_a_lock(infos.back());
    }
    for (std::size_t k = 0; k < infos.size(); ++k) {
        if (json) {
            print_json(out, infos[k]); // one object per line (JSON Lines for several names)
            out << '\n';
        } else {
            if (k) out << '\n';
            print_status_text(out, infos[k]);
        }
    }
    return exit_code::ok;
}

int run_list(const global_options& g, const std::string& pattern, bool json, std::ostream& out) {
    auto c = open_client(g);
    const auto locks = list_locks(c, pattern);
    if (json) {
        out << '[';
        for (std::size_t i = 0; i < locks.size(); ++i) {
            if (i) out << ',';
            print_json(out, locks[i]);
        }
        out << "]\n";
    } else if (locks.empty()) {
        out << "no locks match '" << pattern << "'\n";
    } else {
        print_list_text(out, locks);
    }
    return exit_code::ok;
}

int run_keys(const std::string& name, const std::string& kind, std::ostream& out) {
    check_name(name);
    const auto k = kind_from_name(kind);
    if (!k)
        throw usage_error("unknown kind '" + kind + "' (use lock, simple, fair, read or write)");
    std::error_code ec;
    const auto l = dlock::redis::layout_of(name, *k, ec);
    if (ec) throw usage_error("'" + one_line(name) + "' cannot be a lock name");
    out << "key      " << l.key << " (" << l.data_type << ")\n";
    out << "channel  " << l.channel << '\n';
    out << "fencing  " << (l.fencing_key.empty() ? "-" : l.fencing_key) << '\n';
    if (!l.queue_key.empty()) out << "queue    " << l.queue_key << '\n';
    if (!l.timeout_key.empty()) out << "timeouts " << l.timeout_key << '\n';
    if (!l.waiter_channel_prefix.empty())
        out << "waiters  " << l.waiter_channel_prefix << ":<owner>\n";
    if (!l.writer_intent_key.empty()) out << "intent   " << l.writer_intent_key << '\n';
    return exit_code::ok;
}

int run_unlock(const global_options& g, const std::string& name, std::ostream& out) {
    check_name(name);
    auto c = open_client(g);
    auto found = lock_kind::reentrant;
    const auto before = status_of(c, name, &found);
    if (!before.foreign.empty()) throw not_a_lock(before);
    // The kind as the server showed it (a Redis key tells its kind; a read-write lock is
    // broken through its write side), else the kind that status found.
    const auto kind =
        kind_from_name(before.kind == "read-write" ? "write" : before.kind).value_or(found);
    bool ended = false;
    if (before.exists) {
        std::error_code ec;
        ended = c.force_unlock(name, kind, ec);
        if (ec) throw diagnose(c, ec, "cannot unlock '" + one_line(name) + "'", name);
    }
    if (!ended) {
        out << "no lock named '" << name << "': nothing ended\n";
        return exit_code::ok;
    }
    out << "unlocked '" << name << "' (" << before.kind;
    for (const auto& h : before.contenders) {
        if (!h.holds) continue;
        out << ", was held by " << h.owner;
        if (h.hold_count) out << " x" << *h.hold_count;
        if (!h.entry.empty()) out << " [" << h.entry << ']';
    }
    out << "); " << unlock_effect(c, kind) << '\n';
    return exit_code::ok;
}

} // namespace dlock::cli
