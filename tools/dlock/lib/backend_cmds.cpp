// backend_cmds.cpp: `dlock status`, `list` and `unlock --force` on a URL of a backend other than
// Redis (postgresql://, postgres://, zk://): they ask the client (client::inspect / list, which
// read the server's own records: pg_locks, the ShedLock table, ZooKeeper nodes) instead of
// reading Redis keys, and break a lock through client::force_unlock(name, kind).
#include "commands.hpp"

#include <dlock/mutex.hpp>

namespace dlock::cli {
namespace {

/// The kinds `status` looks at on a backend: its default lock, then the lease rows.
constexpr lock_kind status_kinds[] = {lock_kind::reentrant, lock_kind::shedlock, lock_kind::lease,
                                      lock_kind::versioned};

void print_text(std::ostream& out, const lock_status& s) {
    out << "lock     " << s.name << '\n';
    if (!s.exists) {
        out << "kind     none (not locked)\n";
        if (!s.detail.empty()) out << "detail   " << s.detail << '\n';
        return;
    }
    std::size_t holders = 0;
    for (const auto& c : s.contenders)
        holders += c.holds ? 1 : 0;
    out << "kind     " << s.kind << '\n';
    out << "state    " << holders << " holder(s), " << s.contenders.size() - holders
        << " waiter(s)\n";
    if (s.remaining_lease) out << "lease    " << s.remaining_lease->count() << " ms left\n";
    if (s.fencing_counter) out << "fencing  " << *s.fencing_counter << '\n';
    for (const auto& c : s.contenders) {
        out << (c.holds ? "holder   " : "waiter   ") << c.owner;
        if (!c.entry.empty()) out << "  [" << c.entry << ']';
        if (c.position) out << "  #" << *c.position;
        if (!c.session.empty()) out << "  session " << c.session;
        if (c.token) out << "  token " << *c.token;
        out << '\n';
    }
    if (!s.detail.empty()) out << "detail   " << s.detail << '\n';
}

void print_json(std::ostream& out, const lock_status& s) {
    out << "{\"name\":";
    json_string(out, s.name);
    out << ",\"kind\":";
    json_string(out, s.exists ? s.kind : "none");
    out << ",\"exists\":" << (s.exists ? "true" : "false");
    if (s.remaining_lease) out << ",\"lease_ms\":" << s.remaining_lease->count();
    if (s.fencing_counter) out << ",\"fencing\":" << *s.fencing_counter;
    out << ",\"contenders\":[";
    for (std::size_t i = 0; i < s.contenders.size(); ++i) {
        const auto& c = s.contenders[i];
        out << (i ? "," : "") << "{\"owner\":";
        json_string(out, c.owner);
        out << ",\"entry\":";
        json_string(out, c.entry);
        out << ",\"session\":";
        json_string(out, c.session);
        out << ",\"holds\":" << (c.holds ? "true" : "false");
        if (c.position) out << ",\"position\":" << *c.position;
        if (c.token) out << ",\"token\":" << *c.token;
        out << '}';
    }
    out << "],\"detail\":";
    json_string(out, s.detail);
    out << '}';
}

/// What `status NAME` shows: the first kind that exists, else the default kind's (free) view.
/// The first kind that holds `name` (`found`: which one), else the first kind's empty status.
lock_status status_of(client& c, const std::string& name, lock_kind* found = nullptr) {
    std::optional<lock_status> first;
    for (const auto kind : status_kinds) {
        std::error_code ec;
        auto s = c.inspect(name, kind, ec);
        if (ec == errc::unsupported || ec == errc::invalid_argument) continue; // not this kind
        if (ec) throw diagnose(c, ec, "cannot read '" + one_line(name) + "'", name);
        if (found) *found = kind;
        if (s.exists) return s;
        if (!first) first = std::move(s);
    }
    if (!first) throw usage_error("'" + one_line(name) + "' cannot be a lock name");
    return *first;
}

} // namespace

std::string backend_url(const global_options& g) {
    const auto urls = effective_urls(g);
    if (urls.size() != 1) return {};
    const auto& u = urls[0];
    for (std::string_view s : {"postgresql://", "postgres://", "zk://", "zks://"})
        if (u.compare(0, s.size(), s) == 0) return u;
    return {};
}

client backend_client(const std::string& url) {
    try {
        return client(url);
    } catch (const dlock::error& e) {
        if (e.code() == errc::configuration_error) throw usage_error(one_line(e.what()));
        throw diagnose(e.code(), "cannot use " + url.substr(0, url.find("://")) + " URL",
                       one_line(e.what()));
    }
}

int run_status_backend(const std::string& url, const std::vector<std::string>& names, bool json,
                       std::ostream& out) {
    auto c = backend_client(url);
    for (std::size_t k = 0; k < names.size(); ++k) {
        const auto s = status_of(c, names[k]);
        if (json) {
            print_json(out, s);
            out << '\n';
        } else {
            if (k) out << '\n';
            print_text(out, s);
        }
    }
    return exit_code::ok;
}

int run_list_backend(const std::string& url, const std::string& pattern, bool json,
                     std::ostream& out) {
    auto c = backend_client(url);
    std::error_code ec;
    const auto locks = c.list(pattern == "*" ? std::string() : pattern, ec);
    if (ec) throw diagnose(c, ec, "cannot list locks");
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
        std::vector<std::vector<std::string>> rows{{"NAME", "KIND", "HOLDERS", "WAITERS"}};
        for (const auto& s : locks) {
            std::size_t holders = 0;
            for (const auto& ct : s.contenders)
                holders += ct.holds ? 1 : 0;
            rows.push_back({s.name, s.kind, std::to_string(holders),
                            std::to_string(s.contenders.size() - holders)});
        }
        print_table(out, rows);
    }
    return exit_code::ok;
}

int run_unlock_backend(const std::string& url, const std::string& name, std::ostream& out) {
    auto c = backend_client(url);
    auto kind = lock_kind::reentrant;
    const auto before = status_of(c, name, &kind);
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
    for (const auto& h : before.contenders)
        if (h.holds) out << ", was held by " << h.owner << " [" << h.entry << ']';
    switch (kind) {
    case lock_kind::shedlock:
        out << "); lock_until set to now (row kept)\n";
        break;
    case lock_kind::lease:
    case lock_kind::versioned:
        out << "); row deleted, waiters notified\n";
        break;
    default:
        out << "); its session ended, waiters served\n";
    }
    return exit_code::ok;
}

} // namespace dlock::cli
