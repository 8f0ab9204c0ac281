// redlock_backend's queries (backend.hpp): each asks every master once and decides by the
// quorum, as the top of dlock/redlock.hpp says: held when a quorum has the key (is_locked) or
// one token (inspect); not held when the masters that have it and those that could not answer
// are fewer than a quorum; otherwise errc::unavailable. force_unlock deletes on every master.
#include "redis/redlock/backend.hpp"
#include "redis/redlock/redlock_impl.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace dlock::detail {
namespace {

/// One master's answer to a query.
struct reply {
    bool asked = false;
    std::error_code ec; ///< transport failure or error reply
    resp3::value v;
};

/// One command on each master `fill` fills (false: that master is not asked); blocks until
/// every one answered or its command timed out. Never on the I/O thread (the client checks).
std::vector<reply> ask(redlock_impl& r, const std::function<bool(std::size_t, command&)>& fill) {
    struct state {
        std::mutex mu;
        std::vector<reply> out;
        std::size_t open = 0;
        completion_flag flag;
    };
    auto st = std::make_shared<state>();
    st->out.resize(r.size());
    std::vector<node_call*> calls(r.size(), nullptr);
    for (std::size_t i = 0; i < r.size(); ++i) {
        auto call = std::make_unique<node_call>();
        if (!fill(i, call->cmd)) continue;
        call->args = call->cmd.args();
        call->eval_fallback = call->cmd.eval_fallback();
        call->deadline = clock::now() + r.command_timeout(i);
        call->done = [st, i](std::error_code ec, resp3::value&& v) {
            std::lock_guard lk(st->mu);
            if (!ec) ec = reply_error(v);
            st->out[i] = {true, ec, std::move(v)};
            if (--st->open == 0) st->flag.set();
        };
        st->out[i].asked = true;
        ++st->open;
        calls[i] = call.release(); // deleted by its completion
    }
    if (st->open == 0) return std::move(st->out);
    asio::post(r.io(), [&r, calls] {
        for (std::size_t i = 0; i < calls.size(); ++i)
            if (calls[i]) r.at(i).conn().submit(*calls[i]);
    });
    st->flag.wait();
    std::lock_guard lk(st->mu);
    return std::move(st->out);
}

/// The first failure among `rs`, else errc::unavailable: why a quorum could not decide.
std::error_code first_failure(const std::vector<reply>& rs) {
    for (const auto& x : rs)
        if (x.asked && x.ec) return x.ec;
    return make_error_code(errc::unavailable);
}

/// Held by a quorum (`held` masters have it), not held (even with the `failed` masters no
/// quorum could), or open: nullopt, and `ec` says why.
std::optional<bool> by_quorum(std::size_t held, std::size_t failed, std::size_t quorum,
                              const std::vector<reply>& rs, std::error_code& ec) {
    if (held >= quorum) return true;
    if (held + failed < quorum) return false;
    ec = first_failure(rs);
    return std::nullopt;
}

std::size_t failures(const std::vector<reply>& rs) {
    return static_cast<std::size_t>(
        std::count_if(rs.begin(), rs.end(), [](const reply& x) { return x.asked && x.ec; }));
}

/// A simple-lock token: 32 hex characters.
bool is_token(const resp3::value& v) {
    return v.is_string() && v.str.size() == 32 &&
           std::all_of(v.str.begin(), v.str.end(),
                       [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
}

/// The `quorum`-th longest of `ttls` (the lock is held while that many masters keep it);
/// -1 ms (no expiry) when that many keep it without one.
std::chrono::milliseconds quorum_ttl(std::vector<long long> ttls, std::size_t quorum) {
    for (auto& t : ttls)
        if (t < 0) t = std::numeric_limits<long long>::max();
    std::sort(ttls.begin(), ttls.end(), std::greater<>());
    const auto t = ttls.at(quorum - 1);
    return std::chrono::milliseconds(t == std::numeric_limits<long long>::max() ? -1 : t);
}

} // namespace

bool redlock_backend::is_locked(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec = check_name(name, kind);
    if (ec) return false;
    const auto keys = layout().keys(name, ec);
    const auto rs = ask(*r_, [&](std::size_t, command& c) {
        layout().locked_query(c, keys);
        return true;
    });
    const auto held = static_cast<std::size_t>(std::count_if(rs.begin(), rs.end(), [](auto& x) {
        return !x.ec && x.v.is_integer() && x.v.integer == 1;
    }));
    return by_quorum(held, failures(rs), quorum_round::quorum_of(r_->size()), rs, ec)
        .value_or(false);
}

bool redlock_backend::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec = check_name(name, kind);
    if (ec) return false;
    const auto keys = layout().keys(name, ec);
    const auto rs = ask(*r_, [&](std::size_t, command& c) {
        layout().force_unlock(c, keys, pubsub::mode::classic);
        return true;
    });
    // Deleted where the masters answered; a key on a master that did not expires with its
    // lease, and fewer than a quorum cannot hold the lock.
    if (rs.size() - failures(rs) < quorum_round::quorum_of(r_->size())) {
        ec = first_failure(rs);
        return false;
    }
    return std::any_of(rs.begin(), rs.end(),
                       [](auto& x) { return !x.ec && x.v.is_integer() && x.v.integer == 1; });
}

std::optional<std::chrono::milliseconds>
redlock_backend::remaining_lease(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec = check_name(name, kind);
    if (ec) return std::nullopt;
    const auto keys = layout().keys(name, ec);
    const auto rs = ask(*r_, [&](std::size_t, command& c) {
        c.plain("PTTL").arg(keys.key);
        return true;
    });
    std::vector<long long> ttls;
    for (const auto& x : rs)
        if (!x.ec && x.v.is_integer() && x.v.integer != -2) ttls.push_back(x.v.integer);
    const auto q = quorum_round::quorum_of(r_->size());
    if (!by_quorum(ttls.size(), failures(rs), q, rs, ec).value_or(false)) return std::nullopt;
    return quorum_ttl(std::move(ttls), q);
}

lock_status redlock_backend::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec = check_name(name, kind);
    if (ec) return {};
    const auto keys = layout().keys(name, ec);
    const auto values = ask(*r_, [&](std::size_t, command& c) {
        c.plain("GET").arg(keys.key);
        return true;
    });
    const auto ttls = ask(*r_, [&](std::size_t, command& c) {
        c.plain("PTTL").arg(keys.key);
        return true;
    });
    const auto n = r_->size();
    const auto q = quorum_round::quorum_of(n);
    std::map<std::string, std::size_t> tokens;
    std::size_t foreign = 0;
    for (const auto& x : values) {
        if (!x.ec && is_token(x.v)) ++tokens[x.v.str];
        if ((!x.ec && !x.v.is_null() && !is_token(x.v)) || x.ec == errc::server_error) ++foreign;
    }
    std::string best;
    std::size_t held = 0;
    for (const auto& [t, k] : tokens)
        if (k > held) std::tie(best, held) = std::tie(t, k);
    lock_status info;
    info.name = std::string(name);
    info.kind = "none";
    info.details["masters"] = std::to_string(n);
    info.details["quorum"] = std::to_string(q);
    std::vector<long long> best_ttls;
    for (std::size_t i = 0; i < n; ++i) {
        const auto& x = values[i];
        std::string part = r_->address(i) + " ";
        if (x.ec) {
            part += "error: " + x.ec.message();
        } else if (x.v.is_null()) {
            part += "absent";
        } else if (!is_token(x.v)) {
            part += "holds a value that is not a lock token";
        } else if (x.v.str != best) {
            part += "holds another token";
        } else {
            part += "holds";
            if (!ttls[i].ec && ttls[i].v.is_integer() && ttls[i].v.integer != -2)
                best_ttls.push_back(ttls[i].v.integer);
        }
        info.details["master." + std::to_string(i)] = std::move(part);
    }
    if (foreign >= q) {
        info.foreign = "value that is not a lock token on " + std::to_string(foreign) + " of " +
                       std::to_string(n) + " masters";
        return info;
    }
    if (!by_quorum(held, failures(values), q, values, ec)) return {}; // masters down: open
    if (held > 0) info.details["holders"] = std::to_string(held);
    if (held >= q && best_ttls.size() >= q) {
        info.kind = std::string(kind_name(lock_kind::simple));
        info.exists = true;
        info.contenders.push_back({.owner = best, .holds = true, .hold_count = 1});
        info.remaining_lease = quorum_ttl(std::move(best_ttls), q);
    }
    return info;
}

std::vector<lock_status> redlock_backend::list(std::string_view pattern, std::error_code& ec) {
    ec.clear();
    const std::string match = pattern.empty() ? std::string("*") : std::string(pattern);
    std::set<std::string> candidates; // SCAN may return a key twice
    std::size_t answered = 0;
    std::error_code failed;
    for (std::size_t m = 0; m < r_->size(); ++m) {
        std::string cursor = "0";
        std::error_code e;
        do {
            const auto rs = ask(*r_, [&](std::size_t i, command& c) {
                if (i != m) return false;
                c.plain("SCAN").own(cursor).arg("MATCH").own(match).arg("COUNT").arg("1000");
                c.arg("TYPE").arg("string");
                return true;
            });
            const auto& page = rs.at(m);
            e = page.ec;
            if (!e && page.v.elements.size() != 2) e = make_error_code(errc::protocol_error);
            if (e) break;
            cursor = page.v.elements[0].str;
            for (const auto& k : page.v.elements[1].elements)
                candidates.insert(k.str);
        } while (cursor != "0");
        if (e && !failed) failed = e;
        if (!e) ++answered;
    }
    // A lock a quorum holds is on a master that answered when fewer than a quorum failed.
    if (r_->size() - answered >= quorum_round::quorum_of(r_->size())) {
        ec = failed;
        return {};
    }
    std::vector<lock_status> locks;
    for (const auto& name : candidates) {
        auto info = inspect(name, lock_kind::simple, ec);
        if (ec == errc::invalid_argument) { // a key no lock name makes
            ec.clear();
            continue;
        }
        if (ec) return {};
        if (info.foreign.empty() && info.exists) locks.push_back(std::move(info));
    }
    return locks;
}

} // namespace dlock::detail
