#include "zookeeper/backend.hpp"

#include "backends.hpp"
#include "core/random.hpp"
#include "zookeeper/acquire.hpp"
#include "zookeeper/hold.hpp"
#include "zookeeper/semaphore.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <deque>
#include <netdb.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

/// What Curator stores in its lock nodes: InetAddress.getLocalHost().getHostAddress().
std::string local_address() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) return "127.0.0.1";
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host, nullptr, &hints, &res) != 0 || !res) return "127.0.0.1";
    char buf[INET_ADDRSTRLEN] = {};
    const auto* a = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
    const bool ok = ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf) != nullptr;
    ::freeaddrinfo(res);
    return ok ? std::string(buf) : "127.0.0.1";
}

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

bool transport_loss(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

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

std::string_view infix_of(lock_kind kind) noexcept {
    switch (kind) {
    case lock_kind::reentrant:
    case lock_kind::fair:
        return mutex_infix;
    case lock_kind::read:
        return read_infix;
    case lock_kind::write:
        return write_infix;
    case lock_kind::semaphore:
        return lease_infix;
    default:
        return {};
    }
}

zk_backend::zk_backend(zk_url url)
    : url_(std::move(url))
    , id_(random_uuid())
    , node_data_(local_address())
    , work_(asio::make_work_guard(io_)) {
    auto drained = std::make_shared<std::promise<void>>();
    drained_ = drained->get_future();
    thread_ = std::thread([this, drained] {
        io_id_.store(std::this_thread::get_id(), std::memory_order_release);
        io_.run();
        drained->set_value();
    });
}

zk_backend::~zk_backend() {
    shutdown();
}

bool zk_backend::on_io_thread() const noexcept {
    return io_id_.load(std::memory_order_acquire) == std::this_thread::get_id();
}

void zk_backend::set_error(std::string why) {
    std::lock_guard lk(mu_);
    last_error_ = std::move(why);
}

std::string zk_backend::last_error_detail() const {
    std::lock_guard lk(mu_);
    return last_error_;
}

std::shared_ptr<session> zk_backend::current_session() const {
    std::lock_guard lk(mu_);
    return session_;
}

metrics_snapshot zk_backend::metrics() const {
    auto s = metrics_.snapshot();
    s.connects = old_connects_.load(std::memory_order_relaxed);
    s.reconnects = old_reconnects_.load(std::memory_order_relaxed);
    s.commands = old_requests_.load(std::memory_order_relaxed);
    if (auto cur = current_session()) {
        s.connects += cur->connects();
        s.reconnects += cur->reconnects();
        s.commands += cur->requests();
    }
    return s;
}

void zk_backend::track(std::shared_ptr<acquisition> a) {
    active_.push_back(std::move(a));
}

void zk_backend::untrack(const acquisition* a) {
    std::erase_if(active_, [a](const auto& p) { return p.get() == a; });
}

void zk_backend::with_session(std::function<void(std::error_code, std::shared_ptr<session>)> fn) {
    if (shut()) return fn(make_error_code(errc::cancelled), nullptr);
    auto s = current_session();
    if (!s || s->ended()) {
        if (s) {
            old_connects_ += s->connects();
            old_reconnects_ += s->reconnects();
            old_requests_ += s->requests();
        }
        std::error_code ec;
        std::string why;
        s = session::start(executor(), url_, ec, &why);
        if (!s) {
            set_error(why);
            return fn(ec, nullptr);
        }
        std::lock_guard lk(mu_);
        session_ = s;
        chroot_checked_ = false;
    }
    struct state {
        std::function<void(std::error_code, std::shared_ptr<session>)> fn;
        asio::steady_timer timer;
        bool done = false;
        void finish(std::error_code ec, std::shared_ptr<session> s) {
            if (done) return;
            done = true;
            timer.cancel();
            fn(ec, std::move(s));
        }
    };
    auto st = std::make_shared<state>(state{std::move(fn), asio::steady_timer(io_), false});
    st->timer.expires_after(url_.connect_timeout);
    st->timer.async_wait([this, st, s](std::error_code ec) {
        if (ec || st->done) return;
        set_error("no ZooKeeper server of " + url_.display() + " answered within " +
                  std::to_string(url_.connect_timeout.count()) + " ms" +
                  (s->last_error().empty() ? std::string{} : ": " + s->last_error()));
        st->finish(make_error_code(errc::unavailable), nullptr);
    });
    s->when_connected([this, st, s](std::error_code ec) {
        if (st->done) return;
        if (ec) {
            set_error("ZooKeeper session on " + url_.display() + " ended: " + s->last_error());
            return st->finish(make_error_code(errc::unavailable), nullptr);
        }
        if (chroot_checked_ && current_session() == s) return st->finish({}, s);
        s->exists("/", {}, [this, st, s](reply&& r) {
            if (st->done) return;
            if (r.rc == ZOK) {
                if (current_session() == s) chroot_checked_ = true;
                return st->finish({}, s);
            }
            if (r.rc == ZNONODE) {
                set_error("the chroot " + url_.chroot + " does not exist on ZooKeeper " +
                          url_.display() + " (create it first)");
                return st->finish(make_error_code(errc::configuration_error), nullptr);
            }
            set_error(std::string("ZooKeeper ") + url_.display() + ": " + zerror(r.rc));
            st->finish(
                make_error_code(transport_loss(r.rc) ? errc::unavailable : errc::server_error),
                nullptr);
        });
    });
}

template <class T>
T zk_backend::call(std::function<void(std::function<void(T)>)> start, T on_timeout) {
    auto p = std::make_shared<std::promise<T>>();
    auto f = p->get_future();
    auto once = std::make_shared<std::atomic<bool>>(false);
    asio::post(io_, [start = std::move(start), p, once] {
        start([p, once](T v) {
            if (!once->exchange(true)) p->set_value(std::move(v));
        });
    });
    if (f.wait_for(url_.connect_timeout * 2) != std::future_status::ready) return on_timeout;
    return f.get();
}

void zk_backend::async_acquire(std::string name, const acquire_options& opts,
                               std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    const auto post_error = [&](errc e, std::string why) {
        set_error(std::move(why));
        asio::post(io_, [done = std::move(done), e] { done(make_error_code(e), nullptr); });
    };
    if (shut()) return post_error(errc::cancelled, "the ZooKeeper backend shut down");
    if (infix_of(opts.kind).empty())
        return post_error(errc::unsupported,
                          "this lock kind is not offered on ZooKeeper (lock, read, write and "
                          "semaphore are)");
    if (opts.kind == lock_kind::semaphore && opts.permits < 1)
        return post_error(errc::invalid_argument, "a semaphore needs permits >= 1");
    if (opts.lease)
        return post_error(errc::unsupported,
                          "a fixed lease is not offered on ZooKeeper: a lock lives as long as "
                          "its session (the session renews itself)");
    std::string why;
    auto dir = lock_dir(name, &why);
    if (dir.empty()) return post_error(errc::invalid_argument, why);
    // `this`, not a shared_ptr: the I/O thread must never hold the last reference (the
    // destructor drains the loop, so the handler runs before the backend goes).
    asio::post(io_, [this, name = std::move(name), dir = std::move(dir), opts,
                     done = std::move(done)]() mutable {
        if (opts.kind == lock_kind::semaphore) {
            // Its internal acquisitions are tracked (cancelled at shutdown) and keep it alive.
            std::make_shared<semaphore_acquisition>(*this, std::move(name), std::move(dir), opts,
                                                    std::move(done))
                ->start();
            return;
        }
        auto a = std::make_shared<acquisition>(*this, std::move(name), std::move(dir), opts,
                                               std::move(done));
        track(a);
        a->start();
    });
}

std::shared_ptr<hold> zk_backend::acquire(std::string_view name, const acquire_options& opts,
                                          std::error_code& ec) {
    ec.clear();
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return nullptr;
    }
    using result = std::pair<std::error_code, std::shared_ptr<hold>>;
    auto p = std::make_shared<std::promise<result>>();
    auto f = p->get_future();
    async_acquire(std::string(name), opts, [p](std::error_code e, std::shared_ptr<hold> h) {
        p->set_value({e, std::move(h)});
    });
    auto [e, h] = f.get(); // bounded by the acquisition's own deadlines
    ec = e;
    return h;
}

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

std::shared_ptr<hold> zk_backend::acquire_read_under(const hold& write, std::error_code& ec) {
    ec.clear();
    const auto* w = dynamic_cast<const zk_hold*>(&write);
    if (!w || w->shared() || on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    if (w->lost() || w->released() || w->owner_session()->ended()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    const auto slash = w->path().rfind('/');
    const auto seq = w->path().substr(w->path().size() - 10);
    const auto path = w->path().substr(0, slash + 1) + node_prefix(random_uuid(), read_infix) + seq;
    struct creator : std::enable_shared_from_this<creator> {
        zk_backend* b;
        std::shared_ptr<session> s;
        std::string name, path;
        std::function<void(std::pair<std::error_code, std::shared_ptr<hold>>)> done;
        int rounds = 0;
        void create() {
            s->create(path, b->node_data(), ZOO_EPHEMERAL,
                      [self = shared_from_this()](reply&& r) { self->on(std::move(r)); });
        }
        void on(reply&& r) {
            if (r.rc == ZOK && r.stat) return grant(r.stat->czxid);
            if (r.rc == ZNODEEXISTS || (transport_loss(r.rc) && ++rounds < 4)) {
                // A create whose answer was lost: ours if this session owns the node.
                return s->when_connected([self = shared_from_this()](std::error_code e) {
                    if (e) return self->fail(errc::not_owner, "the session ended");
                    self->s->exists(self->path, {}, [self](reply&& st) {
                        if (st.rc == ZOK && st.stat && st.stat->ephemeral_owner == self->s->id())
                            return self->grant(st.stat->czxid);
                        if (st.rc == ZNONODE && self->rounds < 4) return self->create();
                        self->fail(errc::server_error,
                                   "read node " + self->path + ": " + zerror(st.rc));
                    });
                });
            }
            if (r.rc == ZNONODE || r.rc == ZSESSIONEXPIRED || r.rc == ZINVALIDSTATE)
                return fail(errc::not_owner, "the write lock's directory or session is gone");
            fail(errc::server_error, "create " + path + ": " + zerror(r.rc));
        }
        void grant(std::int64_t czxid) {
            auto h = std::make_shared<zk_hold>(*b, s, name, path, czxid, true);
            h->start();
            done({{}, std::move(h)});
        }
        void fail(errc e, const std::string& why) {
            b->set_error("downgrade to read: " + why);
            done({make_error_code(e), nullptr});
        }
    };
    using result = std::pair<std::error_code, std::shared_ptr<hold>>;
    auto [e, h] = call<result>(
        [this, s = w->owner_session(), n = w->name(), path](std::function<void(result)> done) {
            auto c = std::make_shared<creator>();
            c->b = this;
            c->s = s;
            c->name = n;
            c->path = path;
            c->done = std::move(done);
            c->create();
        },
        {make_error_code(errc::unavailable), nullptr});
    ec = e;
    return h;
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

std::error_code zk_backend::fenced_set(const std::string& lock_node, std::string_view node,
                                       std::string_view data) {
    std::string why;
    const auto path = lock_dir(node, &why);
    const auto lock_parent = lock_node.substr(0, lock_node.rfind('/'));
    if (path.empty() || path == lock_parent || path.starts_with(lock_parent + "/")) {
        set_error(path.empty() ? why
                               : "the resource node " + path + " is inside the lock directory " +
                                     lock_parent + " (keep other data out of lock directories)");
        return make_error_code(errc::invalid_argument);
    }
    if (on_io_thread()) return make_error_code(errc::invalid_argument);
    struct writer : std::enable_shared_from_this<writer> {
        zk_backend* b;
        std::shared_ptr<session> s;
        std::string lock_node, path, data;
        std::function<void(std::error_code)> done;
        int rounds = 0;
        bool uncertain = false; ///< an earlier attempt's answer was lost
        void begin(bool first) {
            b->with_session([self = shared_from_this(), first](std::error_code ec,
                                                               std::shared_ptr<session> live) {
                // A session that ended just now (expired) is replaced once: the check needs a
                // live session, not the holder's.
                auto cur = self->b->current_session();
                if (ec == errc::unavailable && first && cur && cur->ended())
                    return self->begin(false);
                if (ec) return self->done(ec);
                self->s = std::move(live);
                self->write(false);
            });
        }
        void write(bool create) {
            // Set, or create when the resource does not exist yet; both after the check.
            multi_op check{multi_op::type::check, lock_node, {}, -1, 0};
            multi_op op{create ? multi_op::type::create : multi_op::type::set, path, data, -1,
                        ZOO_PERSISTENT};
            s->multi(
                {std::move(check), std::move(op)},
                [self = shared_from_this(), create](reply&& r) { self->on(std::move(r), create); });
        }
        void on(reply&& r, bool create) {
            if (r.rc == ZOK) return done({});
            const auto lost_answer = [&] {
                b->set_error("fenced write of " + path + ": the answer was lost (" + zerror(r.rc) +
                             "); it may or may not have been applied");
                done(make_error_code(errc::ambiguous));
            };
            if (transport_loss(r.rc)) {
                // Sending it again is safe (the check still guards it); a refusal then leaves
                // the first attempt's outcome unknown.
                if (uncertain || ++rounds >= 4) return lost_answer();
                uncertain = true;
                return s->when_connected([self = shared_from_this(), create](std::error_code e) {
                    if (e) return self->on(reply{ZSESSIONEXPIRED, {}, {}, {}, {}, {}}, create);
                    self->write(create);
                });
            }
            const int check_rc = r.results.empty() ? r.rc : r.results[0];
            const int write_rc = r.results.size() < 2 ? r.rc : r.results[1];
            if (check_rc != ZOK || r.rc == ZSESSIONEXPIRED || r.rc == ZINVALIDSTATE) {
                if (uncertain) return lost_answer();
                b->set_error("fenced write of " + path + " refused: the lock node " + lock_node +
                             " is gone (the lock was lost)");
                return done(make_error_code(errc::not_owner));
            }
            if (++rounds < 4 &&
                ((!create && write_rc == ZNONODE) || (create && write_rc == ZNODEEXISTS)))
                return write(!create);
            if (create && write_rc == ZNONODE) {
                b->set_error("fenced write: the parent of " + path + " does not exist");
                return done(make_error_code(errc::configuration_error));
            }
            b->set_error("fenced write of " + path + ": " + zerror(write_rc));
            done(make_error_code(write_rc == ZNOAUTH ? errc::permission_denied
                                                     : errc::server_error));
        }
    };
    return call<std::error_code>(
        [this, lock_node, path, d = std::string(data)](std::function<void(std::error_code)> done) {
            auto w = std::make_shared<writer>();
            w->b = this;
            w->lock_node = lock_node;
            w->path = path;
            w->data = d;
            w->done = std::move(done);
            w->begin(true);
        },
        make_error_code(errc::unavailable));
}

void zk_backend::shutdown() noexcept {
    if (shut_.exchange(true, std::memory_order_acq_rel)) return;
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
        auto active = std::move(active_);
        active_.clear();
        for (auto& a : active)
            a->cancel();
        std::shared_ptr<session> s;
        {
            std::lock_guard lk(mu_);
            s = std::move(session_);
        }
        // Closing the session deletes its ephemeral nodes; the holds count as lost.
        if (s) s->shut_down();
    });
    // Let the loop drain (cancelled timers and acquisitions complete, and with them the
    // references they hold to this backend); stop it if that takes longer than a moment.
    work_.reset();
    if (on_io_thread()) {
        asio::post(io_, [this] { io_.stop(); });
        thread_.detach();
        return;
    }
    if (drained_.wait_for(std::chrono::seconds(2)) != std::future_status::ready) io_.stop();
    thread_.join();
}

} // namespace dlock::detail::zk

namespace dlock::detail {

std::shared_ptr<lock_backend> make_zookeeper_backend(std::string_view url, std::error_code& ec,
                                                     std::string* why) {
    auto u = zk::parse_zk_url(url, ec, why);
    if (ec) return nullptr;
    return std::make_shared<zk::zk_backend>(std::move(u));
}

} // namespace dlock::detail
