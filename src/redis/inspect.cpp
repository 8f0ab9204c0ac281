// inspect_redis() and list_redis() (backend.hpp): a lock's state read from its Redis layout, so
// that locks taken by Redisson (Java) and redis-py show the same way. Which keys a kind uses
// comes from dlock::redis::layout_of (dlock/redis.hpp); what this file adds is recognising whose
// data N holds: a Redisson owner field ("<uuid>:<thread>") or a 32-hex token. Every Redis kind
// shares N, so the kind is read from the server, not asked for.
#include "redis/backend.hpp"
#include "redis/locks/protocol.hpp"

#include <dlock/redis.hpp>

#include <algorithm>
#include <cctype>
#include <set>

namespace dlock::detail {
namespace {

/// The layouts of every Redis kind for `name` (a name no lock may have has none).
std::vector<dlock::redis::lock_layout> layouts_of(std::string_view name) {
    std::vector<dlock::redis::lock_layout> out;
    for (const auto kind : dlock::redis::lock_kinds()) {
        std::error_code ec;
        auto l = dlock::redis::layout_of(name, kind, ec);
        if (!ec) out.push_back(std::move(l));
    }
    return out;
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

/// The reader of one status: runs its commands, stops at the first error (`ec`).
class reader {
public:
    reader(redis_backend& b, std::error_code& ec)
        : b_(b)
        , ec_(ec) {}

    /// Runs a command; a transport failure or an error reply sets `ec` (then null).
    resp3::value run(std::initializer_list<std::string_view> args) {
        return run(std::span<const std::string_view>(args.begin(), args.size()));
    }
    resp3::value run(std::span<const std::string_view> args) {
        if (ec_) return {};
        auto v = b_.command(args, ec_);
        if (!ec_) ec_ = reply_error(v);
        return ec_ ? resp3::value{} : v;
    }
    bool failed() const noexcept { return static_cast<bool>(ec_); }

private:
    redis_backend& b_;
    std::error_code& ec_;
};

/// The kind's name in status (a read-write lock is one lock with two sides).
std::string status_kind(lock_kind k) {
    return k == lock_kind::read || k == lock_kind::write ? "read-write" : std::string(kind_name(k));
}

/// Redisson RPermitExpirableSemaphore's layout (semaphore/protocol.cpp): N holds the available
/// count, {N}:timeout the permits out with their expiries. Fills `info` (kind "semaphore",
/// a holder per permit that has not expired, the count in `detail`); false when `r` failed.
bool read_semaphore(reader& r, const std::vector<dlock::redis::lock_layout>& layouts,
                    long long available, lock_status& info) {
    const auto l = std::find_if(layouts.begin(), layouts.end(),
                                [](const auto& x) { return x.kind == lock_kind::semaphore; });
    if (l == layouts.end()) {
        info.foreign = "string that is not a lock token";
        return true;
    }
    const auto permits = r.run({"ZRANGE", l->timeout_key, "0", "-1", "WITHSCORES"});
    const auto counter = r.run({"EXISTS", l->fencing_key});
    const auto now = r.run({"TIME"});
    if (r.failed()) return false;
    if (permits.elements.empty() && counter.integer == 0) {
        // A number and nothing else: no permit was ever taken here by dlock and none is out.
        // (An idle semaphore only Redisson used looks like this too: any number could be one.)
        info.foreign = "string that is not a lock token";
        return true;
    }
    const long long now_ms = now.elements.size() == 2
                                 ? as_number(now.elements[0]).value_or(0) * 1000 +
                                       as_number(now.elements[1]).value_or(0) / 1000
                                 : 0;
    // RESP2: member, score, member, ...; RESP3: [member, score] pairs, the score a double.
    std::vector<std::pair<const resp3::value*, const resp3::value*>> pairs;
    for (std::size_t i = 0; i < permits.elements.size(); ++i) {
        const auto& e = permits.elements[i];
        if (e.is_aggregate() && e.elements.size() == 2)
            pairs.emplace_back(&e.elements[0], &e.elements[1]);
        else if (i + 1 < permits.elements.size())
            pairs.emplace_back(&e, &permits.elements[++i]);
    }
    static constexpr char hex[] = "0123456789abcdef";
    long long expired = 0;
    for (const auto& [id, score] : pairs) {
        const auto expiry = score->kind == resp3::type::double_type
                                ? static_cast<long long>(score->dbl)
                                : as_number(*score).value_or(0);
        if (expiry <= now_ms) { // out, but lost: the next acquire reclaims it
            ++expired;
            continue;
        }
        lock_contender c;
        for (const char ch : id->str) { // Redisson shows ids as hex
            const auto b = static_cast<unsigned char>(ch);
            c.owner.append({hex[b >> 4], hex[b & 15]});
        }
        c.holds = true;
        c.hold_count = 1;
        c.remaining = std::chrono::milliseconds(expiry - now_ms);
        info.contenders.push_back(std::move(c));
    }
    const auto out = static_cast<long long>(info.contenders.size());
    info.kind = "semaphore";
    info.detail = std::to_string(out) + " of " + std::to_string(out + expired + available) +
                  " permit(s) in use";
    if (expired > 0) info.detail += ", " + std::to_string(expired) + " expired";
    info.details["permits"] = std::to_string(out + expired + available);
    return true;
}

} // namespace

lock_status inspect_redis(redis_backend& b, std::string_view name, std::error_code& ec) {
    ec.clear();
    lock_status info;
    info.name = std::string(name);
    info.backend = "redis";
    info.kind = "none";
    reader r(b, ec);
    const auto layouts = layouts_of(name);
    const auto type = r.run({"TYPE", name}).str;
    if (r.failed()) return {};
    const dlock::redis::lock_layout* kind = nullptr;
    for (const auto& l : layouts)
        if (l.data_type == type && !kind) kind = &l; // a fair lock is told by its queue below
    std::string mode;
    if (kind && type == "hash") {
        const auto all = r.run({"HGETALL", name});
        if (r.failed()) return {};
        bool is_lock = true;
        for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) {
            const auto& field = all.elements[i].str;
            if (field == "mode") { // Redisson RReadWriteLock
                mode = all.elements[i + 1].str;
                continue;
            }
            if (!looks_like_owner(field)) is_lock = false;
            lock_contender c;
            c.owner = field;
            c.holds = true;
            c.hold_count = as_number(all.elements[i + 1]).value_or(0);
            info.contenders.push_back(std::move(c));
        }
        if (!is_lock) {
            info.foreign = "hash that is not a lock";
            info.contenders.clear();
        } else if (!mode.empty()) {
            info.kind = "read-write";
            info.details["mode"] = mode;
        } else if (!info.contenders.empty() || !all.elements.empty()) {
            info.kind = status_kind(kind->kind);
        }
    } else if (kind && type == "string") {
        const auto v = r.run({"GET", name});
        if (r.failed()) return {};
        if (v.is_null()) {
            // released between TYPE and GET
        } else if (const auto available = as_number(v); available && !looks_like_token(v.str)) {
            if (!read_semaphore(r, layouts, *available, info)) return {};
        } else if (looks_like_token(v.str)) {
            info.kind = status_kind(kind->kind);
            info.contenders.push_back({.owner = v.str, .holds = true, .hold_count = 1});
        } else {
            info.foreign = "string that is not a lock token";
        }
    } else if (type != "none") {
        info.foreign = type;
    }
    if (!info.foreign.empty()) return info;
    if (info.kind != "none" && info.kind != "semaphore") {
        const auto pttl = as_number(r.run({"PTTL", name})).value_or(-2);
        if (r.failed()) return {};
        if (pttl == -2) { // expired or released meanwhile
            info.kind = "none";
            info.contenders.clear();
            info.details.clear();
        } else {
            info.remaining_lease = std::chrono::milliseconds(pttl); // -1: no expiry
        }
    }
    // Waiters on a Cluster subscribe with SSUBSCRIBE (dlock and Redisson on Redis 7): count
    // those on the lock's master (SHARDNUMSUB is routed by the channel's slot).
    const bool sharded = b.options().kind == topology::cluster;
    std::vector<std::string_view> numsub{"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB"};
    for (const auto& l : layouts) // each channel once (the read and write sides share one)
        if (std::find(numsub.begin() + 2, numsub.end(), l.channel) == numsub.end())
            numsub.push_back(l.channel);
    const auto subs = r.run(numsub);
    if (r.failed()) return {};
    std::uint64_t waiters = 0;
    for (std::size_t i = 1; i < subs.elements.size(); i += 2)
        waiters +=
            static_cast<std::uint64_t>(std::max(0LL, as_number(subs.elements[i]).value_or(0)));
    for (const auto& l : layouts) {
        if (l.queue_key.empty() || (info.kind != "none" && info.kind != "lock")) continue;
        const auto owners = r.run({"LRANGE", l.queue_key, "0", "-1"});
        if (r.failed()) return {};
        if (owners.elements.empty()) continue;
        const auto now = r.run({"TIME"});
        const long long now_ms = now.elements.size() == 2
                                     ? as_number(now.elements[0]).value_or(0) * 1000 +
                                           as_number(now.elements[1]).value_or(0) / 1000
                                     : 0;
        std::uint64_t place = 0;
        for (const auto& o : owners.elements) {
            const auto score = as_number(r.run({"ZSCORE", l.timeout_key, o.str}));
            if (r.failed()) return {};
            lock_contender c;
            c.owner = o.str;
            c.position = place++;
            if (score) c.remaining = std::chrono::milliseconds(*score - now_ms);
            info.contenders.push_back(std::move(c));
        }
        info.kind = status_kind(l.kind);
        waiters += owners.elements.size();
    }
    info.waiter_count = waiters;
    for (const auto& l : layouts) {
        if (l.writer_intent_key.empty() || info.kind != "read-write" ||
            info.details.count("writer_waiting_ms"))
            continue;
        const auto pttl = as_number(r.run({"PTTL", l.writer_intent_key})).value_or(-2);
        if (r.failed()) return {};
        info.details["writer_waiting"] = pttl >= 0 ? "true" : "false";
        if (pttl >= 0) info.details["writer_waiting_ms"] = std::to_string(pttl);
    }
    for (const auto& l : layouts) {
        if (l.fencing_key.empty()) continue;
        std::error_code e;
        const std::string_view get_token[] = {"GET", l.fencing_key};
        const auto token = b.command(get_token, e);
        if (e) {
            ec = e;
            return {};
        }
        if (!token.is_error() && !token.is_null())
            if (const auto n = as_number(token); n && *n >= 0)
                info.fencing_counter = static_cast<std::uint64_t>(*n);
    }
    info.exists = info.kind != "none";
    return info;
}

std::vector<lock_status> list_redis(redis_backend& b, std::string_view pattern,
                                    std::error_code& ec) {
    ec.clear();
    const std::string match = pattern.empty() ? std::string("*") : std::string(pattern);
    std::set<std::string> candidates; // SCAN may return a key twice
    // Every master (one per shard on a Cluster; the one server otherwise).
    for (std::size_t m = 0; m < b.masters(); ++m) {
        for (std::string_view type : {"hash", "string"}) {
            std::string cursor = "0";
            do {
                const std::string_view scan[] = {"SCAN",  cursor, "MATCH", match,
                                                 "COUNT", "1000", "TYPE",  type};
                const auto page = b.command_on_master(m, scan, ec);
                if (!ec) ec = reply_error(page);
                if (!ec && page.elements.size() != 2) ec = make_error_code(errc::protocol_error);
                if (ec) return {};
                cursor = page.elements[0].str;
                for (const auto& k : page.elements[1].elements)
                    candidates.insert(k.str);
            } while (cursor != "0");
        }
    }
    std::vector<lock_status> locks;
    for (const auto& name : candidates) {
        auto info = inspect_redis(b, name, ec);
        if (ec) return {};
        if (info.foreign.empty() && info.exists) locks.push_back(std::move(info));
    }
    return locks;
}

} // namespace dlock::detail
