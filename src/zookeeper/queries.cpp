// zk_backend's queries: inspect, is_locked, force_unlock, remaining_lease and list, from
// snapshots of the lock directories (a semaphore's leases and gate merged into one view).
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"
#include "zookeeper/semaphore.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <deque>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

std::string_view kind_label(lock_kind k) {
    switch (k) {
    case lock_kind::read:
        return "read";
    case lock_kind::write:
        return "write";
    case lock_kind::semaphore:
        return "semaphore";
    default:
        return "lock";
    }
}

/// list() visits at most this many znodes.
constexpr std::size_t max_list_nodes = 10000;

/// The contenders of directory `dir` in queue order (owner, entry, holds, position), and the
/// kind they show ("read-write" when a read node is among them).
void add_contenders(lock_status& st, const std::string& dir, const std::vector<contender>& sorted) {
    st.exists = !sorted.empty();
    if (st.kind.empty()) st.kind = "lock";
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        lock_contender c;
        c.owner = sorted[i].owner;
        c.entry = dir + "/" + sorted[i].name;
        c.holds = holds_at(sorted, i);
        c.position = i;
        if (sorted[i].shared && st.kind == "lock") st.kind = "read-write";
        st.contenders.push_back(std::move(c));
    }
}

/// True when `others` (the non-lock children of a directory) make it a semaphore's directory.
bool semaphore_dir(const std::vector<contender>& sorted, const std::vector<std::string>& others) {
    return sorted.empty() &&
           std::find(others.begin(), others.end(), semaphore_leases) != others.end();
}

/// A semaphore's view from its leases and its gate queue: every lease holds, except the
/// newest one of the gate holder's session, which is still counting (it waits for a permit
/// or is about to hold). The gate's contenders wait.
lock_status merge_semaphore(lock_status leases, lock_status gate) {
    lock_status st;
    st.kind = "semaphore";
    st.exists = leases.exists || gate.exists;
    std::string counting;
    if (!gate.contenders.empty() && gate.contenders.front().holds)
        counting = gate.contenders.front().session;
    for (auto& c : leases.contenders)
        c.holds = true;
    std::size_t holders = leases.contenders.size();
    for (auto it = leases.contenders.rbegin(); it != leases.contenders.rend(); ++it) {
        if (!counting.empty() && it->session == counting) {
            it->holds = false;
            --holders;
            break;
        }
    }
    for (auto& c : leases.contenders) {
        if (c.holds) c.position.reset();
        st.contenders.push_back(std::move(c));
    }
    for (auto& c : gate.contenders) {
        c.holds = false;
        st.contenders.push_back(std::move(c));
    }
    st.detail = std::to_string(holders) + " lease(s) held, " +
                std::to_string(st.contenders.size() - holders) +
                " client(s) queued; the number of permits is the clients' convention (not stored)";
    return st;
}

} // namespace

void zk_backend::snapshot_dir(const std::string& dir, bool stats,
                              std::function<void(std::error_code, lock_status)> done) {
    with_session([this, dir, stats, done = std::move(done)](std::error_code ec,
                                                            std::shared_ptr<session> s) mutable {
        if (ec) return done(ec, {});
        s->children(dir, {}, [this, dir, stats, s, done = std::move(done)](reply&& r) mutable {
            lock_status st;
            if (r.rc == ZNONODE) return done({}, st);
            if (r.rc != ZOK) {
                set_error("list " + dir + ": " + zerror(r.rc));
                return done(
                    make_error_code(transport_loss(r.rc) ? errc::unavailable : errc::server_error),
                    st);
            }
            std::vector<std::string> strangers;
            const auto sorted = sort_children(r.children, &strangers);
            if (stats && semaphore_dir(sorted, strangers))
                return snapshot_semaphore(dir, std::move(done));
            add_contenders(st, dir, sorted);
            if (!strangers.empty())
                st.detail = std::to_string(strangers.size()) +
                            " child(ren) that are not lock nodes, e.g. '" + strangers.front() + "'";
            if (!stats || st.contenders.empty()) return done({}, std::move(st));
            struct gather {
                lock_status st;
                std::size_t left;
                std::function<void(std::error_code, lock_status)> done;
            };
            auto g =
                std::make_shared<gather>(gather{std::move(st), sorted.size(), std::move(done)});
            for (std::size_t i = 0; i < g->st.contenders.size(); ++i)
                s->exists(g->st.contenders[i].entry, {}, [g, i](reply&& rr) {
                    if (rr.rc == ZOK && rr.stat) {
                        auto& c = g->st.contenders[i];
                        c.session = session_hex(rr.stat->ephemeral_owner);
                        c.token = static_cast<std::uint64_t>(rr.stat->czxid);
                    }
                    if (--g->left == 0) g->done({}, std::move(g->st));
                });
        });
    });
}

void zk_backend::snapshot_semaphore(const std::string& dir,
                                    std::function<void(std::error_code, lock_status)> done) {
    const auto leases = dir + "/" + std::string(semaphore_leases);
    snapshot_dir(leases, true,
                 [this, dir, done = std::move(done)](std::error_code ec, lock_status l) mutable {
                     if (ec) return done(ec, {});
                     const auto gate = dir + "/" + std::string(semaphore_gate);
                     snapshot_dir(gate, true,
                                  [l = std::move(l), done = std::move(done)](
                                      std::error_code e2, lock_status g) mutable {
                                      if (e2) return done(e2, {});
                                      done({}, merge_semaphore(std::move(l), std::move(g)));
                                  });
                 });
}

lock_status zk_backend::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec.clear();
    std::string why;
    const auto dir = lock_dir(name, &why);
    if (dir.empty() || on_io_thread()) {
        if (!why.empty()) set_error(why);
        ec = errc::invalid_argument;
        return {};
    }
    using result = std::pair<std::error_code, lock_status>;
    auto [e, st] = call<result>(
        [this, dir](std::function<void(result)> done) {
            snapshot_dir(dir, true, [done](std::error_code e2, lock_status s) {
                done({e2, std::move(s)});
            });
        },
        {make_error_code(errc::unavailable), {}});
    ec = e;
    st.name = std::string(name);
    if (st.kind.empty()) st.kind = std::string(kind_label(kind)); // else what the nodes show
    return st;
}

bool zk_backend::is_locked(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto st = inspect(name, kind, ec);
    return std::any_of(st.contenders.begin(), st.contenders.end(),
                       [](const lock_contender& c) { return c.holds; });
}

bool zk_backend::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto st = inspect(name, kind, ec);
    if (ec) return false;
    std::vector<std::string> holders;
    for (const auto& c : st.contenders)
        if (c.holds) holders.push_back(c.entry);
    if (holders.empty()) return false;
    using result = std::pair<std::error_code, bool>;
    auto [e, deleted] = call<result>(
        [this, holders](std::function<void(result)> done) {
            with_session([this, holders, done](std::error_code e2, std::shared_ptr<session> s) {
                if (e2) return done({e2, false});
                struct gather {
                    std::size_t left;
                    bool any = false;
                    std::error_code ec;
                    std::function<void(result)> done;
                };
                auto g = std::make_shared<gather>(gather{holders.size(), false, {}, done});
                for (const auto& p : holders)
                    s->remove(p, [this, g, p](reply&& r) {
                        if (r.rc == ZOK)
                            g->any = true;
                        else if (r.rc != ZNONODE) {
                            set_error("delete " + p + ": " + zerror(r.rc));
                            g->ec = make_error_code(errc::unavailable);
                        }
                        if (--g->left == 0) g->done({g->ec, g->any});
                    });
            });
        },
        {make_error_code(errc::unavailable), false});
    ec = e;
    return deleted;
}

std::optional<std::chrono::milliseconds>
zk_backend::remaining_lease(std::string_view name, lock_kind kind, std::error_code& ec) {
    // A ZooKeeper lock has no lease: it lives as long as its holder's session.
    (void)inspect(name, kind, ec);
    return std::nullopt;
}

std::vector<lock_status> zk_backend::list(std::string_view pattern, std::error_code& ec) {
    ec.clear();
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return {};
    }
    using result = std::pair<std::error_code, std::vector<lock_status>>;
    auto [e, out] = call<result>(
        [this, pat = std::string(pattern)](std::function<void(result)> done) {
            with_session([pat, done](std::error_code e2, std::shared_ptr<session> s) {
                if (e2) return done({e2, {}});
                // Breadth-first walk: a node with lock children is a lock directory.
                struct walk : std::enable_shared_from_this<walk> {
                    std::shared_ptr<session> s;
                    std::string pat;
                    std::deque<std::string> todo{"/"};
                    std::vector<std::string> semaphores; // directories with a leases child
                    std::size_t visited = 0;
                    std::vector<lock_status> found;
                    std::function<void(result)> done;
                    void next() {
                        if (todo.empty() || visited >= max_list_nodes)
                            return done(result{std::error_code{}, std::move(found)});
                        auto path = std::move(todo.front());
                        todo.pop_front();
                        ++visited;
                        s->children(path, {}, [self = shared_from_this(), path](reply&& r) {
                            if (transport_loss(r.rc))
                                return self->done({make_error_code(errc::unavailable), {}});
                            std::vector<std::string> others;
                            const auto sorted = sort_children(r.children, &others);
                            const auto base = path == "/" ? std::string{} : path;
                            if (semaphore_dir(sorted, others)) self->semaphores.push_back(base);
                            if (!sorted.empty()) self->report(base, sorted);
                            for (const auto& o : others)
                                if (!(path == "/" && o == "zookeeper"))
                                    self->todo.push_back(base + "/" + o);
                            self->next();
                        });
                    }
                    /// A lock directory; a semaphore's leases count as the semaphore (every
                    /// lease a holder), its gate (locks) is not listed on its own.
                    void report(const std::string& base, const std::vector<contender>& sorted) {
                        const auto slash = base.rfind('/');
                        const auto parent = base.substr(0, slash);
                        const auto leaf = std::string_view(base).substr(slash + 1);
                        const bool in_semaphore = std::find(semaphores.begin(), semaphores.end(),
                                                            parent) != semaphores.end();
                        if (in_semaphore && leaf == semaphore_gate) return;
                        lock_status st;
                        add_contenders(st, base, sorted);
                        st.name = base.substr(1);
                        if (in_semaphore && leaf == semaphore_leases) {
                            st.name = parent.substr(1);
                            st.kind = "semaphore";
                            for (auto& c : st.contenders)
                                c.holds = true;
                        }
                        if (glob_match(pat, st.name)) found.push_back(std::move(st));
                    }
                };
                auto w = std::make_shared<walk>();
                w->s = std::move(s);
                w->pat = pat;
                w->done = done;
                w->next();
            });
        },
        {make_error_code(errc::unavailable), {}});
    ec = e;
    return out;
}

} // namespace dlock::detail::zk
