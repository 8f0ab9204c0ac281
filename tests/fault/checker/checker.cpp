#include "checker.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace dlock::fault {

namespace {

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t ns_per_ms = 1'000'000;

using wop = std::pair<std::int64_t, std::int64_t>;  // worker, op
using wlock = std::pair<std::int64_t, std::string>; // worker, lock

std::string describe(const hold& h) {
    std::ostringstream o;
    o << "hold w=" << h.w << " op=" << h.op << " lock=" << h.lock;
    if (h.token_h) o << " token=" << *h.token_h;
    if (h.fence) o << " fence=" << *h.fence;
    o << " t_inv=" << h.t_inv << " t_ok=" << h.t_ok << " deadline=";
    if (h.deadline == never)
        o << "none";
    else
        o << h.deadline;
    o << " t_end=" << h.t_end;
    if (h.watchdog) o << " watchdog renewals=" << h.renewals;
    if (h.t_lost) o << " t_lost=" << *h.t_lost;
    o << " (" << h.source << ")";
    return o.str();
}

std::string describe(const op_event& e) {
    std::ostringstream o;
    o << to_string(e.f) << ' ' << to_string(e.type) << " w=" << e.w << " op=" << e.op
      << " lock=" << e.lock << " t=" << e.t;
    if (e.token_h) o << " token=" << *e.token_h;
    if (e.fence) o << " fence=" << *e.fence;
    if (e.t_start) o << " t_start=" << *e.t_start;
    if (e.t_first_fwd) o << " t_first_fwd=" << *e.t_first_fwd;
    if (e.ttl_ms) o << " ttl_ms=" << *e.ttl_ms;
    if (e.deadline) o << " deadline=" << *e.deadline;
    if (e.deleted) o << " deleted=" << *e.deleted;
    if (e.watchdog) o << " watchdog";
    o << " (" << e.source << ")";
    return o.str();
}

std::string describe(const resource_entry& r) {
    std::ostringstream o;
    o << "resource seq=" << r.seq << " lock=" << r.lock << " kind=" << r.kind;
    if (r.fence) o << " fence=" << *r.fence;
    o << " accepted=" << (r.accepted ? "true" : "false");
    if (r.before) o << " before=" << *r.before;
    if (r.after) o << " after=" << *r.after;
    o << " (" << r.source << ")";
    return o.str();
}

/// The nemesis events active around [from, to]: the last one before `from` and all inside.
std::string nemesis_around(const history& h, std::int64_t from, std::int64_t to) {
    std::string out;
    const nemesis_event* before = nullptr;
    for (const auto& n : h.nemesis) {
        if (n.t < from) {
            before = &n;
            continue;
        }
        if (n.t > to) break;
        out += "\n  nemesis " + n.nemesis + " target=" + n.target + " value=" + n.value +
               " t=" + std::to_string(n.t);
    }
    if (before)
        out = "\n  nemesis (active before) " + before->nemesis + " target=" + before->target +
              " value=" + before->value + " t=" + std::to_string(before->t) + out;
    return out;
}

void add(check_result& r, std::string kind, std::string witness) {
    r.violated = true;
    r.violations.push_back(violation{r.what, std::move(kind), std::move(witness)});
}

struct derivation {
    std::vector<hold> holds;
    std::vector<violation> extend_expired;
    std::vector<violation> loss;             // LOST_WITHOUT_HOLD, found while deriving
    std::map<wop, std::int64_t> invoke_t;    // (w, op) -> invoke time (acquire/extend/release)
    std::map<wop, std::size_t> release_hold; // release (w, op) -> hold it closed
    std::map<std::pair<std::int64_t, std::string>, std::size_t> by_token; // (w, token_h) -> hold
};

/// A hold's end: its last proven deadline, cut short by its close or its loss signal.
void settle(hold& x) {
    x.t_end = x.deadline;
    if (x.t_close) x.t_end = std::min(x.t_end, *x.t_close);
    if (x.t_lost) x.t_end = std::min(x.t_end, *x.t_lost);
}

derivation derive(const history& h) {
    derivation d;
    std::map<wlock, std::size_t> open;
    auto close = [&](std::size_t idx, std::int64_t t) {
        hold& x = d.holds[idx];
        if (!x.t_close) x.t_close = t;
        settle(x);
    };
    for (const auto& e : h.events) {
        if (e.type == op_type::invoke) {
            d.invoke_t[{e.w, e.op}] = e.t;
        }
        switch (e.f) {
        case op_kind::acquire:
            if (e.type == op_type::ok) {
                hold nh;
                nh.w = e.w;
                nh.op = e.op;
                nh.lock = e.lock;
                nh.token_h = e.token_h;
                nh.fence = e.fence;
                auto it = d.invoke_t.find({e.w, e.op});
                nh.t_inv = it == d.invoke_t.end() ? e.t : it->second;
                nh.t_ok = e.t;
                nh.deadline = e.deadline.value_or(never);
                nh.t_end = nh.deadline;
                nh.watchdog = e.watchdog;
                nh.source = e.source;
                auto o = open.find({e.w, e.lock});
                if (o != open.end()) close(o->second, nh.t_inv);
                d.holds.push_back(std::move(nh));
                open[{e.w, e.lock}] = d.holds.size() - 1;
                if (e.token_h) d.by_token[{e.w, *e.token_h}] = d.holds.size() - 1;
            }
            break;
        case op_kind::extend:
            if (e.type == op_type::ok) {
                auto o = open.find({e.w, e.lock});
                if (o == open.end()) break;
                hold& cur = d.holds[o->second];
                // When the extension was sent: its invoke; for a watchdog renewal the holder
                // observed (no invoke), the start of its validity; else its completion.
                auto it = d.invoke_t.find({e.w, e.op});
                std::int64_t inv = it != d.invoke_t.end() ? it->second : e.t_start.value_or(e.t);
                if (inv > cur.deadline) {
                    d.extend_expired.push_back(
                        violation{check::extend_expired, "EXTEND_EXPIRED",
                                  "extend sent at " + std::to_string(inv) + ", " +
                                      std::to_string(inv - cur.deadline) +
                                      " ns after the deadline, returned ok\n  " + describe(cur) +
                                      "\n  " + describe(e) + nemesis_around(h, cur.deadline, e.t)});
                } else if (e.deadline) {
                    if (*e.deadline > cur.deadline) ++cur.renewals;
                    cur.deadline = *e.deadline;
                    settle(cur);
                }
            }
            break;
        case op_kind::release:
            if (e.type == op_type::invoke) {
                auto o = open.find({e.w, e.lock});
                if (o != open.end()) {
                    close(o->second, e.t);
                    d.release_hold[{e.w, e.op}] = o->second;
                    open.erase(o);
                }
            }
            break;
        case op_kind::crash:
            for (auto it = open.begin(); it != open.end();) {
                if (it->first.first == e.w) {
                    close(it->second, e.t);
                    it = open.erase(it);
                } else {
                    ++it;
                }
            }
            break;
        case op_kind::lost: {
            // The hold it names (token_h), even one already closed: the loss callback runs on
            // the client's thread and may be logged after the holder's release invoke.
            std::optional<std::size_t> idx;
            if (e.token_h) {
                if (auto b = d.by_token.find({e.w, *e.token_h}); b != d.by_token.end())
                    idx = b->second;
            } else if (auto o = open.find({e.w, e.lock}); o != open.end()) {
                idx = o->second;
            }
            if (!idx) {
                d.loss.push_back(
                    violation{check::loss, "LOST_WITHOUT_HOLD",
                              "a loss signal for no hold of this worker\n  " + describe(e)});
            } else if (hold& x = d.holds[*idx]; !x.t_lost) {
                x.t_lost = e.t;
                settle(x);
            }
            break;
        }
        case op_kind::use:
            break;
        }
    }
    return d;
}

void check_mutex(const history& h, const std::vector<hold>& holds, check_result& r) {
    std::map<std::string, std::vector<const hold*>> by_lock;
    // An empty window (the acquisition returned at or after its deadline) is no belief: DEADLINE
    // reports it as EXPIRED_ON_ARRIVAL; it cannot overlap anything.
    for (const auto& x : holds)
        if (x.t_end > x.t_ok) by_lock[x.lock].push_back(&x);
    std::int64_t max_overlap = 0;
    for (auto& [lock, hs] : by_lock) {
        std::stable_sort(hs.begin(), hs.end(),
                         [](const hold* a, const hold* b) { return a->t_ok < b->t_ok; });
        const hold* max_hold = nullptr;
        for (const hold* x : hs) {
            if (max_hold && x->t_ok < max_hold->t_end) {
                std::int64_t overlap = max_hold->t_end - x->t_ok;
                max_overlap = std::max(max_overlap, overlap);
                add(r, "OVERLAP",
                    "lock " + lock + ": overlap " + std::to_string(overlap) + " ns\n  " +
                        describe(*max_hold) + "\n  " + describe(*x) +
                        nemesis_around(h, x->t_ok, max_hold->t_end));
            }
            if (!max_hold || x->t_end > max_hold->t_end) max_hold = x;
        }
    }
    r.notes.push_back("holds " + std::to_string(holds.size()) + ", max overlap " +
                      std::to_string(max_overlap) + " ns");
}

void check_deadline(const history& h, const derivation& d, const checker_options& opts,
                    check_result& r) {
    for (const auto& e : h.events) {
        if (e.type != op_type::ok || (e.f != op_kind::acquire && e.f != op_kind::extend)) continue;
        auto it = d.invoke_t.find({e.w, e.op});
        std::optional<std::int64_t> inv;
        if (it != d.invoke_t.end()) inv = it->second;
        if (e.t_start) {
            if (inv && *e.t_start < *inv)
                add(r, "START_BEFORE_INVOKE",
                    "t_start " + std::to_string(*e.t_start) + " < t_inv " + std::to_string(*inv) +
                        "\n  " + describe(e));
            if (e.t_first_fwd && *e.t_start > *e.t_first_fwd)
                add(r, "START_AFTER_SEND",
                    "t_start " + std::to_string(*e.t_start) + " > first forward " +
                        std::to_string(*e.t_first_fwd) + " (start stamp taken after sending)\n  " +
                        describe(e));
            if (e.ttl_ms && e.deadline) {
                std::int64_t expect = *e.t_start + *e.ttl_ms * ns_per_ms - drift_ns(*e.ttl_ms);
                if (std::llabs(*e.deadline - expect) > opts.deadline_tolerance_ns)
                    add(r, "WRONG_DEADLINE",
                        "deadline " + std::to_string(*e.deadline) +
                            " != t_start + TTL - drift(TTL) = " + std::to_string(expect) +
                            " (off by " + std::to_string(*e.deadline - expect) + " ns)\n  " +
                            describe(e));
            }
        }
        if (e.f == op_kind::acquire && !e.deadline)
            add(r, "NO_DEADLINE",
                "an acquisition reported ok without its deadline (a belief with no end)\n  " +
                    describe(e));
        if (e.deadline && e.t >= *e.deadline)
            add(r, "EXPIRED_ON_ARRIVAL",
                "t_ok " + std::to_string(e.t) + " >= deadline " + std::to_string(*e.deadline) +
                    "\n  " + describe(e));
    }
}

void check_use(const history& h, const std::vector<hold>& holds, check_result& r) {
    std::map<wlock, std::vector<const hold*>> by_worker;
    for (const auto& x : holds)
        by_worker[{x.w, x.lock}].push_back(&x);
    for (const auto& e : h.events) {
        if (e.f != op_kind::use || (e.type != op_type::invoke && e.type != op_type::ok)) continue;
        const auto& hs = by_worker[{e.w, e.lock}];
        const hold* nearest = nullptr;
        bool inside = false;
        for (const hold* x : hs) {
            if (e.token_h && x->token_h && *e.token_h != *x->token_h) continue;
            if (x->t_ok <= e.t && (!nearest || x->t_ok > nearest->t_ok)) nearest = x;
            if (x->t_ok <= e.t && e.t <= x->t_end) {
                inside = true;
                break;
            }
        }
        if (!inside)
            add(r, "USE_OUTSIDE_HOLD",
                describe(e) + "\n  " +
                    (nearest ? describe(*nearest) + " (ended " +
                                   std::to_string(e.t - nearest->t_end) + " ns before the use)"
                             : std::string("no hold of this worker before the use")));
    }
}

void check_fence(const history& h, const derivation& d, check_result& r) {
    std::map<std::string, std::pair<std::int64_t, const hold*>> max_completed;
    std::map<wop, std::pair<std::int64_t, const hold*>> remembered;
    std::map<std::pair<std::string, std::int64_t>, const hold*> seen;
    std::map<wop, const hold*> hold_of;
    for (const auto& x : d.holds)
        hold_of[{x.w, x.op}] = &x;
    for (const auto& e : h.events) {
        if (e.f != op_kind::acquire) continue;
        if (e.type == op_type::invoke) {
            auto it = max_completed.find(e.lock);
            if (it != max_completed.end()) remembered[{e.w, e.op}] = it->second;
            continue;
        }
        if (e.type != op_type::ok || !e.fence) continue;
        auto ho = hold_of.find({e.w, e.op});
        if (ho == hold_of.end()) continue;
        const hold* me = ho->second;
        auto [sit, fresh] = seen.emplace(std::make_pair(e.lock, *e.fence), me);
        if (!fresh) {
            add(r, "FENCE_REPEATED",
                "lock " + e.lock + ": fence " + std::to_string(*e.fence) + " handed out twice\n  " +
                    describe(*sit->second) + "\n  " + describe(*me));
        } else if (auto rit = remembered.find({e.w, e.op});
                   rit != remembered.end() && *e.fence <= rit->second.first) {
            add(r, "FENCE_BACKWARDS",
                "lock " + e.lock + ": fence " + std::to_string(*e.fence) + " not above fence " +
                    std::to_string(rit->second.first) +
                    " completed before this acquire was invoked\n  " +
                    describe(*rit->second.second) + "\n  " + describe(*me));
        }
        auto& mc = max_completed[e.lock];
        if (!mc.second || *e.fence > mc.first) mc = {*e.fence, me};
    }
}

void check_resource(const history& h, check_result& r) {
    struct state {
        const resource_entry* max_seen = nullptr;
        const resource_entry* last_write = nullptr;
        std::optional<std::int64_t> base;
        std::int64_t writes = 0;
    };
    std::map<std::string, state> locks;
    for (const auto& e : h.resource) {
        auto& s = locks[e.lock];
        if (e.kind == "final") {
            if (e.after) {
                std::int64_t expect = s.base.value_or(0) + s.writes;
                if (*e.after != expect)
                    add(r, "FINAL_VALUE",
                        "final value " + std::to_string(*e.after) +
                            " != " + std::to_string(expect) +
                            " (initial + accepted increments)\n  " + describe(e));
            }
            continue;
        }
        if (!e.accepted) continue;
        if (e.fence && s.max_seen && *e.fence < *s.max_seen->fence)
            add(r, e.kind == "write" ? "STALE_ACCEPTED" : "STALE_OPEN_ACCEPTED",
                "accepted " + e.kind + " with fence " + std::to_string(*e.fence) + " after fence " +
                    std::to_string(*s.max_seen->fence) + " was seen\n  " + describe(*s.max_seen) +
                    "\n  " + describe(e));
        if (e.fence && (!s.max_seen || *e.fence > *s.max_seen->fence)) s.max_seen = &e;
        if (e.kind == "write") {
            if (s.last_write && e.before && s.last_write->after &&
                *e.before != *s.last_write->after)
                add(r, "LOST_UPDATE",
                    "write read " + std::to_string(*e.before) +
                        " but the previous accepted write left " +
                        std::to_string(*s.last_write->after) + "\n  " + describe(*s.last_write) +
                        "\n  " + describe(e));
            if (!s.base && e.before) s.base = *e.before;
            ++s.writes;
            s.last_write = &e;
        }
    }
    for (const auto& [lock, s] : locks)
        r.notes.push_back("lock " + lock + ": " + std::to_string(s.writes) + " accepted writes");
}

void check_foreign_release(const history& h, const derivation& d, check_result& r) {
    for (const auto& e : h.events) {
        if (e.f != op_kind::release || e.type != op_type::ok || e.deleted.value_or(0) != 1)
            continue;
        auto hi = d.release_hold.find({e.w, e.op});
        auto ii = d.invoke_t.find({e.w, e.op});
        if (hi == d.release_hold.end() || ii == d.invoke_t.end()) continue;
        const hold& mine = d.holds[hi->second];
        std::int64_t rel_inv = ii->second;
        if (rel_inv <= mine.deadline) continue;
        for (std::size_t i = 0; i < d.holds.size(); ++i) {
            const hold& other = d.holds[i];
            if (i == hi->second || other.lock != e.lock) continue;
            if (other.t_ok <= rel_inv && other.t_end >= e.t) {
                add(r, "FOREIGN_RELEASE",
                    "release deleted the key " + std::to_string(rel_inv - mine.deadline) +
                        " ns after its hold's deadline while another hold covered it\n  " +
                        describe(e) + "\n  own: " + describe(mine) +
                        "\n  other: " + describe(other));
                break;
            }
        }
    }
}

/// LOSS: a hold the client renews (watchdog) is believed until its last proven deadline (the
/// acquire's or the last renewal's); the loss must be signalled no later than that deadline plus
/// the tolerance, and the holder must not act on the hold (use it, or release it) past that
/// point without having been told.
void check_loss(const history& h, const derivation& d, const checker_options& opts,
                check_result& r) {
    for (const auto& v : d.loss)
        add(r, v.kind, v.witness);
    std::map<std::size_t, std::int64_t> first_use_after; // hold -> first use past D + tolerance
    for (const auto& e : h.events) {
        if (e.f != op_kind::use || !e.token_h ||
            (e.type != op_type::invoke && e.type != op_type::ok))
            continue;
        auto b = d.by_token.find({e.w, *e.token_h});
        if (b == d.by_token.end()) continue;
        const hold& x = d.holds[b->second];
        if (!x.watchdog || x.deadline == never || e.t <= x.deadline + opts.loss_tolerance_ns)
            continue;
        first_use_after.emplace(b->second, e.t); // events are in t order: the first stays
    }
    std::set<std::size_t> released;
    for (const auto& [rop, idx] : d.release_hold)
        released.insert(idx);
    std::int64_t watched = 0, renewals = 0, lost = 0,
                 latest = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < d.holds.size(); ++i) {
        const hold& x = d.holds[i];
        if (!x.watchdog) continue;
        ++watched;
        renewals += x.renewals;
        if (x.deadline == never) {
            add(r, "NO_DEADLINE",
                "a watchdog hold whose acquisition proved no deadline: its belief has no end\n  " +
                    describe(x));
            continue;
        }
        const std::int64_t bound = x.deadline + opts.loss_tolerance_ns;
        if (x.t_lost) {
            ++lost;
            latest = std::max(latest, *x.t_lost - x.deadline);
            if (*x.t_lost > bound)
                add(r, "LOST_LATE",
                    "loss signalled " + std::to_string(*x.t_lost - x.deadline) +
                        " ns after the last proven deadline (tolerance " +
                        std::to_string(opts.loss_tolerance_ns) + " ns)\n  " + describe(x) +
                        nemesis_around(h, x.deadline, *x.t_lost));
            continue;
        }
        std::optional<std::int64_t> act;
        if (auto u = first_use_after.find(i); u != first_use_after.end()) act = u->second;
        if (released.count(i) && x.t_close && *x.t_close > bound)
            act = std::min(act.value_or(never), *x.t_close);
        if (act)
            add(r, "LOSS_UNSIGNALLED",
                "the holder acted on the hold " + std::to_string(*act - x.deadline) +
                    " ns after its last proven deadline without a loss signal (tolerance " +
                    std::to_string(opts.loss_tolerance_ns) + " ns)\n  " + describe(x) +
                    nemesis_around(h, x.deadline, *act));
    }
    std::string note = "watchdog holds " + std::to_string(watched) + ", renewals seen " +
                       std::to_string(renewals) + ", lost " + std::to_string(lost);
    if (lost > 0)
        note += ", latest loss signal " + std::to_string(latest) + " ns after the deadline";
    r.notes.push_back(note);
}

void check_liveness(const history& h, const std::vector<hold>& holds, const checker_options& opts,
                    check_result& r) {
    std::int64_t t_max = 0;
    for (const auto& e : h.events)
        t_max = std::max(t_max, e.t);
    // per lock: (t, d_try, d_hold)
    std::map<std::string, std::vector<std::tuple<std::int64_t, int, int>>> pts;
    std::map<wop, std::pair<std::int64_t, std::string>> trying;
    auto end_try = [&](std::map<wop, std::pair<std::int64_t, std::string>>::iterator it,
                       std::int64_t t) {
        pts[it->second.second].emplace_back(it->second.first, 1, 0);
        pts[it->second.second].emplace_back(t, -1, 0);
        return trying.erase(it);
    };
    for (const auto& e : h.events) {
        if (e.f == op_kind::acquire) {
            if (e.type == op_type::invoke)
                trying[{e.w, e.op}] = {e.t, e.lock};
            else if (auto it = trying.find({e.w, e.op}); it != trying.end())
                end_try(it, e.t);
        } else if (e.f == op_kind::crash) {
            for (auto it = trying.begin(); it != trying.end();)
                it = it->first.first == e.w ? end_try(it, e.t) : std::next(it);
        }
    }
    for (auto it = trying.begin(); it != trying.end();)
        it = end_try(it, t_max);
    for (const auto& x : holds) {
        if (x.t_end <= x.t_ok) continue;
        pts[x.lock].emplace_back(x.t_ok, 0, 1);
        pts[x.lock].emplace_back(x.t_end, 0, -1);
    }
    std::int64_t longest = 0;
    std::size_t gaps = 0;
    for (auto& [lock, p] : pts) {
        std::sort(p.begin(), p.end());
        int tries = 0, held = 0;
        bool in_gap = false;
        std::int64_t gap_start = 0;
        for (std::size_t i = 0; i < p.size();) {
            std::int64_t t = std::get<0>(p[i]);
            for (; i < p.size() && std::get<0>(p[i]) == t; ++i) {
                tries += std::get<1>(p[i]);
                held += std::get<2>(p[i]);
            }
            bool gap = tries > 0 && held == 0;
            if (gap && !in_gap) {
                in_gap = true;
                gap_start = t;
            } else if (!gap && in_gap) {
                std::int64_t len = t - gap_start;
                ++gaps;
                longest = std::max(longest, len);
                if (opts.max_liveness_gap_ns && len > *opts.max_liveness_gap_ns)
                    add(r, "UNAVAILABLE",
                        "lock " + lock + ": no hold for " + std::to_string(len) +
                            " ns while a worker was trying, from " + std::to_string(gap_start) +
                            " to " + std::to_string(t) + " (bound " +
                            std::to_string(*opts.max_liveness_gap_ns) + " ns)" +
                            nemesis_around(h, gap_start, t));
                in_gap = false;
            }
        }
    }
    r.notes.push_back(std::to_string(gaps) + " gaps while trying, longest " +
                      std::to_string(longest) + " ns");
}

} // namespace

const char* to_string(check c) noexcept {
    switch (c) {
    case check::mutex:
        return "MUTEX";
    case check::extend_expired:
        return "EXTEND_EXPIRED";
    case check::deadline:
        return "DEADLINE";
    case check::use_within_hold:
        return "USE_WITHIN_HOLD";
    case check::fence:
        return "FENCE";
    case check::resource:
        return "RESOURCE";
    case check::foreign_release:
        return "FOREIGN_RELEASE";
    case check::orphans:
        return "ORPHANS";
    case check::liveness:
        return "LIVENESS";
    case check::loss:
        return "LOSS";
    }
    return "?";
}

std::optional<check> check_from_string(std::string_view name) {
    for (int i = 0; i < check_count; ++i) {
        auto c = static_cast<check>(i);
        if (name == to_string(c)) return c;
    }
    return std::nullopt;
}

std::int64_t drift_ns(std::int64_t ttl_ms) noexcept {
    return ttl_ms * ns_per_ms / 100 + 2 * ns_per_ms;
}

std::vector<hold> derive_holds(const history& h, std::vector<violation>* extend_expired) {
    auto d = derive(h);
    if (extend_expired) *extend_expired = d.extend_expired;
    return std::move(d.holds);
}

check_result check_orphans(const std::vector<std::string>& leftover_keys) {
    check_result r;
    r.what = check::orphans;
    for (const auto& k : leftover_keys)
        add(r, "ORPHAN_KEY",
            "key \"" + k + "\" still exists after all workers exited and TTL passed");
    return r;
}

report run_checks(const history& h, const std::vector<std::string>& leftover_keys,
                  const checker_options& opts) {
    report rep;
    auto d = derive(h);
    rep.results.resize(check_count);
    for (int i = 0; i < check_count; ++i)
        rep.results[static_cast<std::size_t>(i)].what = static_cast<check>(i);
    auto at = [&](check c) -> check_result& { return rep.results[static_cast<std::size_t>(c)]; };
    check_mutex(h, d.holds, at(check::mutex));
    for (auto& v : d.extend_expired)
        add(at(check::extend_expired), v.kind, v.witness);
    check_deadline(h, d, opts, at(check::deadline));
    check_use(h, d.holds, at(check::use_within_hold));
    check_fence(h, d, at(check::fence));
    check_resource(h, at(check::resource));
    check_foreign_release(h, d, at(check::foreign_release));
    at(check::orphans) = check_orphans(leftover_keys);
    check_liveness(h, d.holds, opts, at(check::liveness));
    check_loss(h, d, opts, at(check::loss));
    std::int64_t ok = 0, fail = 0, info = 0;
    for (const auto& e : h.events)
        if (e.f == op_kind::acquire) {
            ok += e.type == op_type::ok;
            fail += e.type == op_type::fail;
            info += e.type == op_type::info;
        }
    at(check::liveness)
        .notes.push_back("acquisitions ok " + std::to_string(ok) + ", fail " +
                         std::to_string(fail) + ", info " + std::to_string(info));
    rep.holds = std::move(d.holds);
    return rep;
}

std::string format_report(const report& r) {
    std::string out;
    for (const auto& c : r.results) {
        out += to_string(c.what);
        out += c.violated ? ": VIOLATED (" + std::to_string(c.violations.size()) + ")\n" : ": ok\n";
        for (const auto& n : c.notes)
            out += "  # " + n + "\n";
        for (const auto& v : c.violations) {
            std::string w = v.witness;
            for (std::size_t p = w.find('\n'); p != std::string::npos; p = w.find('\n', p + 1))
                w.insert(p + 1, "  ");
            out += "  " + v.kind + ": " + w + "\n";
        }
    }
    return out;
}

} // namespace dlock::fault
