// inspect.cpp: `dlock status`, `dlock list`, `dlock keys` and `dlock unlock --force`. They read
// and break locks in their Redis layout directly, so they also see locks taken by Redisson
// (Java) and redis-py. Which keys a kind uses (N's type, its unlock channel, its fencing
// counter) comes from the library (dlock/layout.hpp); what this file adds is recognising whose
// data N holds: a Redisson owner field ("<uuid>:<thread>") or a 32-hex token.
#include "inspect.hpp"

#include "backend_cmds.hpp"
#include "commands.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <iomanip>
#include <set>
#include <sstream>

namespace dlock::cli {
namespace {

/// The layouts of every kind for `name` (a name no lock may have has none).
std::vector<lock_layout> layouts_of(const std::string& name) {
    std::vector<lock_layout> out;
    for (const auto kind : lock_kinds()) {
        std::error_code ec;
        auto l = layout_of(name, kind, ec);
        if (!ec) out.push_back(std::move(l));
    }
    return out;
}

/// Runs a command; a Redis error reply becomes a dlock::error.
resp3::value checked(client& c, std::initializer_list<std::string_view> args) {
    auto v = c.command(args);
    if (v.is_error()) throw dlock::error(classify_server_error(v.str), one_line(v.str));
    return v;
}

std::optional<long long> as_number(const resp3::value& v) {
    if (v.is_integer()) return v.integer;
    if (v.is_string()) try {
            std::size_t used = 0;
            const long long n = std::stoll(v.str, &used);
            if (used == v.str.size()) return n;
        } catch (const std::exception&) {
        }
    return std::nullopt;
}

/// A Redisson owner field: a 36-character UUID, ':', a thread id (and ":write" for the write
/// side of a read-write lock).
bool looks_like_owner(std::string_view field) {
    if (field.size() < 38 || field[36] != ':') return false;
    return std::all_of(field.begin(), field.begin() + 36, [](char ch) {
        return std::isxdigit(static_cast<unsigned char>(ch)) || ch == '-';
    });
}

/// A simple-lock token: 32 hex characters (ours and redis-py's uuid1().hex).
bool looks_like_token(std::string_view v) {
    return v.size() == 32 && std::all_of(v.begin(), v.end(), [](char ch) {
               return std::isxdigit(static_cast<unsigned char>(ch));
           });
}

} // namespace

lock_info inspect(client& c, const std::string& name) {
    lock_info info;
    info.name = name;
    const auto layouts = layouts_of(name);
    const auto type = checked(c, {"TYPE", name}).str;
    const lock_layout* kind = nullptr;
    for (const auto& l : layouts)
        if (l.data_type == type && !kind) kind = &l; // a fair lock is told by its queue below
    if (kind && type == "hash") {
        const auto all = checked(c, {"HGETALL", name});
        bool is_lock = true;
        for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) {
            const auto& field = all.elements[i].str;
            if (field == "mode") { // Redisson RReadWriteLock
                info.mode = all.elements[i + 1].str;
                continue;
            }
            if (!looks_like_owner(field)) is_lock = false;
            info.holders.push_back({field, as_number(all.elements[i + 1]).value_or(0)});
        }
        if (!is_lock) {
            info.foreign_type = "hash that is not a lock";
            info.holders.clear();
        } else if (!info.mode.empty()) {
            info.kind = "read-write";
        } else if (!info.holders.empty() || !all.elements.empty()) {
            info.kind = kind_name(kind->kind);
        }
    } else if (kind && type == "string") {
        const auto v = checked(c, {"GET", name});
        if (v.is_null()) {
            // released between TYPE and GET
        } else if (looks_like_token(v.str)) {
            info.kind = kind_name(kind->kind);
            info.holders.push_back({v.str, 1});
        } else {
            info.foreign_type = "string that is not a lock token";
        }
    } else if (type != "none") {
        info.foreign_type = type;
    }
    if (!info.foreign_type.empty()) return info;
    if (info.kind != "none") {
        const auto pttl = as_number(checked(c, {"PTTL", name})).value_or(-2);
        if (pttl == -2) { // expired or released meanwhile
            info.kind = "none";
            info.holders.clear();
        } else {
            info.ttl_ms = pttl;
        }
    }
    // Waiters on a Cluster subscribe with SSUBSCRIBE (dlock and Redisson on Redis 7): count
    // those on the lock's master (SHARDNUMSUB is routed by the channel's slot).
    const bool sharded = c.options().kind == topology::cluster;
    std::vector<std::string_view> numsub{"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB"};
    for (const auto& l : layouts) // each channel once (the read and write sides share one)
        if (std::find(numsub.begin() + 2, numsub.end(), l.channel) == numsub.end())
            numsub.push_back(l.channel);
    const auto subs = c.command(numsub);
    if (subs.is_error()) throw dlock::error(classify_server_error(subs.str), one_line(subs.str));
    for (std::size_t i = 1; i < subs.elements.size(); i += 2)
        info.waiters += as_number(subs.elements[i]).value_or(0);
    for (const auto& l : layouts) {
        if (l.queue_key.empty() || (info.kind != "none" && info.kind != "lock")) continue;
        const auto owners = checked(c, {"LRANGE", l.queue_key, "0", "-1"});
        if (owners.elements.empty()) continue;
        const auto now = checked(c, {"TIME"});
        const long long now_ms = now.elements.size() == 2
                                     ? as_number(now.elements[0]).value_or(0) * 1000 +
                                           as_number(now.elements[1]).value_or(0) / 1000
                                     : 0;
        for (const auto& o : owners.elements) {
            const auto score = as_number(checked(c, {"ZSCORE", l.timeout_key, o.str}));
            info.queue.emplace_back(o.str, score ? std::optional(*score - now_ms) : std::nullopt);
        }
        info.kind = kind_name(l.kind);
        info.waiters += static_cast<long long>(info.queue.size());
    }
    for (const auto& l : layouts) {
        if (l.writer_intent_key.empty() || info.kind != "read-write" || info.writer_waiting_ms)
            continue;
        const auto pttl = as_number(checked(c, {"PTTL", l.writer_intent_key})).value_or(-2);
        if (pttl >= 0) info.writer_waiting_ms = pttl;
    }
    for (const auto& l : layouts) {
        if (l.fencing_key.empty()) continue;
        std::error_code ec;
        const std::string_view get_token[] = {"GET", l.fencing_key};
        const auto token = c.command(get_token, ec);
        if (ec) throw dlock::error(ec);
        if (!token.is_error() && !token.is_null()) info.fencing_token = as_number(token);
    }
    return info;
}

void print_json(std::ostream& out, const lock_info& i) {
    out << "{\"name\":";
    json_string(out, i.name);
    out << ",\"kind\":";
    json_string(out, i.kind);
    out << ",\"holders\":[";
    for (std::size_t k = 0; k < i.holders.size(); ++k) {
        if (k) out << ',';
        out << "{\"owner\":";
        json_string(out, i.holders[k].owner);
        out << ",\"count\":" << i.holders[k].count << '}';
    }
    out << "],\"ttl_ms\":";
    if (i.ttl_ms)
        out << *i.ttl_ms;
    else
        out << "null";
    out << ",\"waiters\":" << i.waiters << ",\"fencing_token\":";
    if (i.fencing_token)
        out << *i.fencing_token;
    else
        out << "null";
    if (i.kind == "read-write") {
        out << ",\"mode\":";
        json_string(out, i.mode);
        out << ",\"writer_waiting\":" << (i.writer_waiting_ms ? "true" : "false");
    }
    if (i.kind == "fair") {
        out << ",\"queue\":[";
        for (std::size_t k = 0; k < i.queue.size(); ++k) {
            if (k) out << ',';
            out << "{\"owner\":";
            json_string(out, i.queue[k].first);
            out << ",\"place_ms\":";
            if (i.queue[k].second)
                out << *i.queue[k].second;
            else
                out << "null";
            out << '}';
        }
        out << ']';
    }
    out << '}';
}

std::string ttl_text(const lock_info& i) {
    if (!i.ttl_ms) return "-";
    if (*i.ttl_ms < 0) return "no expiry";
    return std::to_string(*i.ttl_ms) + " ms";
}

std::string fencing_text(const lock_info& i) {
    return i.fencing_token ? std::to_string(*i.fencing_token) : "-";
}

void print_status_text(std::ostream& out, const lock_info& i) {
    out << "name     " << i.name << '\n';
    out << "kind     " << i.kind << (i.kind == "none" ? " (not locked)" : "") << '\n';
    if (i.holders.empty()) out << "holder   -\n";
    for (const auto& h : i.holders)
        out << "holder   " << h.owner << "  (hold count " << h.count << ")\n";
    out << "ttl      " << ttl_text(i) << '\n';
    out << "waiters  " << i.waiters << '\n';
    out << "fencing  " << fencing_text(i) << '\n';
    if (i.kind == "read-write") {
        out << "mode     " << i.mode << '\n';
        out << "writer   "
            << (i.writer_waiting_ms
                    ? "waiting (its marker lives " + std::to_string(*i.writer_waiting_ms) + " ms)"
                    : std::string("none waiting"))
            << '\n';
    }
    for (std::size_t k = 0; k < i.queue.size(); ++k) {
        out << "queue    " << k + 1 << ". " << i.queue[k].first;
        if (i.queue[k].second) out << "  (place for " << *i.queue[k].second << " ms)";
        out << '\n';
    }
}

void print_list_text(std::ostream& out, const std::vector<lock_info>& locks) {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"NAME", "KIND", "HOLDER", "COUNT", "TTL", "WAITERS", "FENCING"});
    for (const auto& l : locks) {
        for (std::size_t k = 0; k < std::max<std::size_t>(1, l.holders.size()); ++k) {
            const bool first = k == 0;
            const holder h = k < l.holders.size() ? l.holders[k] : holder{"-", 0};
            rows.push_back({first ? l.name : "", first ? l.kind : "", h.owner,
                            std::to_string(h.count), first ? ttl_text(l) : "",
                            first ? std::to_string(l.waiters) : "", first ? fencing_text(l) : ""});
        }
    }
    print_table(out, rows);
}

failure not_a_lock(const lock_info& i) {
    return {exit_code::data, "'" + one_line(i.name) + "' holds a " + i.foreign_type +
                                 ", not a lock; use another name (nothing was changed)"};
}

std::vector<lock_info> list_locks(client& c, const std::string& pattern) {
    std::set<std::string> candidates; // SCAN may return a key twice
    // Every master (one per shard on a Cluster; the one server otherwise).
    for (std::size_t m = 0; m < c.masters(); ++m) {
        for (std::string_view type : {"hash", "string"}) {
            std::string cursor = "0";
            do {
                const std::string_view scan[] = {"SCAN",  cursor, "MATCH", pattern,
                                                 "COUNT", "1000", "TYPE",  type};
                std::error_code ec;
                const auto page = c.command_on_master(m, scan, ec);
                if (ec) throw dlock::error(ec);
                if (page.is_error())
                    throw dlock::error(classify_server_error(page.str), one_line(page.str));
                if (page.elements.size() != 2) throw dlock::error(errc::protocol_error);
                cursor = page.elements[0].str;
                for (const auto& k : page.elements[1].elements)
                    candidates.insert(k.str);
            } while (cursor != "0");
        }
    }
    std::vector<lock_info> locks;
    for (const auto& name : candidates) {
        auto info = inspect(c, name);
        if (info.foreign_type.empty() && info.kind != "none") locks.push_back(std::move(info));
    }
    return locks;
}

namespace {
void check_name(const std::string& name) {
    if (name.empty()) throw usage_error("empty lock name");
}
} // namespace

int run_status(const global_options& g, const std::vector<std::string>& names, bool json,
               std::ostream& out) {
    for (const auto& name : names)
        check_name(name);
    if (backend_url(g)) return run_backend_status(g, names, json, out);
    client c(connect_options(g));
    std::vector<lock_info> infos;
    for (const auto& name : names) {
        try {
            infos.push_back(inspect(c, name));
        } catch (const dlock::error& e) {
            throw diagnose(c, e.code(), "cannot read '" + one_line(name) + "'", name);
        }
        if (!infos.back().foreign_type.empty()) throw not_a_lock(infos.back());
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
    if (backend_url(g)) return run_backend_list(g, pattern, json, out);
    client c(connect_options(g));
    std::vector<lock_info> locks;
    try {
        locks = list_locks(c, pattern);
    } catch (const dlock::error& e) {
        throw diagnose(c, e.code(), "cannot list locks");
    }
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
    const auto l = layout_of(name, *k, ec);
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
    if (backend_url(g)) return run_backend_unlock(g, name, out);
    client c(connect_options(g));
    lock_info before;
    bool deleted = false;
    try {
        before = inspect(c, name);
        if (!before.foreign_type.empty()) throw not_a_lock(before);
        // force_unlock deletes N whatever it holds and publishes "0" on the kind's channel.
        const auto kind = kind_from_name(before.kind);
        deleted = before.kind == "read-write" ? c.make_rw_mutex(name).force_unlock()
                  : kind == lock_kind::simple ? c.make_simple_mutex(name).force_unlock()
                  : kind == lock_kind::fair   ? c.make_fair_mutex(name).force_unlock()
                                              : c.make_mutex(name).force_unlock();
    } catch (const dlock::error& e) {
        throw diagnose(c, e.code(), "cannot unlock '" + one_line(name) + "'", name);
    }
    if (!deleted) {
        out << "no lock named '" << name << "': nothing deleted\n";
        return exit_code::ok;
    }
    out << "unlocked '" << name << "' (" << before.kind;
    for (const auto& h : before.holders)
        out << ", was held by " << h.owner << " x" << h.count;
    out << "); waiters notified\n";
    return exit_code::ok;
}

} // namespace dlock::cli
