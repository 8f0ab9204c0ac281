#include "zookeeper/acquire.hpp"

#include "core/random.hpp"
#include "zookeeper/hold.hpp"
#include "zookeeper/result_codes.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <utility>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

constexpr int max_restarts = 20;
constexpr int max_parent_rounds = 5;

} // namespace

acquisition::acquisition(zk_backend& b, std::string name, std::string dir,
                         const acquire_options& opts, done_fn done)
    : backend_(&b)
    , name_(std::move(name))
    , dir_(std::move(dir))
    , kind_(opts.kind)
    , infix_(infix_of(opts.kind))
    , permits_(opts.kind == lock_kind::semaphore ? std::max(opts.permits, 1U) : 0U)
    , started_(clock::now())
    , done_(std::move(done))
    , wait_timer_(backend_->executor())
    , hard_timer_(backend_->executor()) {
    if (opts.wait) {
        const auto w = std::max(*opts.wait, std::chrono::milliseconds(0));
        deadline_ = started_ + w;
    }
}

std::error_code acquisition::retry_error() noexcept {
    return std::make_error_code(std::errc::resource_unavailable_try_again);
}

void acquisition::elect(std::string value) {
    infix_ = latch_infix;
    data_ = std::move(value);
    internal_ = true;
}

void acquisition::count(std::error_code ec, bool acquired) {
    if (!internal_)
        backend_->counters().acquisition(metrics_slot(kind_), ec, acquired, false,
                                         clock::now() - started_);
}

void acquisition::start() {
    auto self = shared_from_this();
    if (deadline_) {
        wait_timer_.expires_at(*deadline_);
        wait_timer_.async_wait([self](std::error_code ec) {
            if (ec || self->finished_) return;
            if (self->waiting_)
                self->give_up();
            else
                self->late_ = true; // decided at the next answer
        });
        hard_timer_.expires_at(*deadline_ + backend_->url().connect_timeout);
        hard_timer_.async_wait([self](std::error_code ec) {
            if (ec || self->finished_) return;
            self->fail(make_error_code(errc::unavailable),
                       "no answer from ZooKeeper " + self->backend_->url().display() +
                           " within the wait plus connect_timeout");
        });
    }
    connect();
}

bool acquisition::wait_over() const {
    return late_ || (deadline_ && clock::now() >= *deadline_);
}

void acquisition::connect() {
    backend_->with_session(
        [self = shared_from_this()](std::error_code ec, std::shared_ptr<session> s) {
            if (self->finished_) return;
            if (ec) return self->fail(ec, {});
            if (s != self->session_) {
                self->session_ = std::move(s);
                self->session_->add_observer(std::weak_ptr<session_observer>(self));
            }
            self->prefix_ = node_prefix(random_uuid(), self->infix_);
            self->create();
        });
}

void acquisition::retry_when_connected(void (acquisition::*step)()) {
    session_->when_connected([self = shared_from_this(), step, gen = gen_](std::error_code ec) {
        if (self->finished_ || gen != self->gen_) return;
        if (ec) return; // session_ended() restarts
        ((*self).*step)();
    });
}

void acquisition::create() {
    create_in_flight_ = true;
    session_->create(dir_ + "/" + prefix_, data_ ? *data_ : backend_->node_data(),
                     ZOO_EPHEMERAL_SEQUENTIAL,
                     [self = shared_from_this(), s = session_](reply&& r) {
                         self->create_in_flight_ = false;
                         if (self->finished_ || s != self->session_) {
                             // Too late or from an old session: never leave the node behind.
                             if (r.rc == ZOK) guaranteed_delete(s, r.path, [](int) {});
                             return;
                         }
                         self->on_created(std::move(r));
                     });
    // On a standalone server the listing goes with the create: the directory's children as the
    // server has them right after it (a session's requests are answered in order, and its reads
    // follow its own writes), so a free lock costs two round trips, not three. The listing's
    // answer decides only when the create succeeded: on_created() drops it otherwise (gen_).
    // Not in an ensemble: there the read waits at the follower for the write's commit anyway,
    // and a session's queued reads held its later requests back (B 0.85 x; zookeeper.md).
    listed_with_create_ = session_->standalone();
    if (listed_with_create_) list();
}

void acquisition::on_created(reply&& r) {
    if (r.rc == ZOK) {
        own_ = r.path.substr(r.path.rfind('/') + 1);
        czxid_ = r.stat ? r.stat->czxid : 0;
        if (r.stat && r.stat->ephemeral_owner != session_->id()) {
            // Not ours (CURATOR-604): never adopt a node of another session.
            return restart();
        }
        if (listed_with_create_) return; // the listing sent with it answers next, and decides
        return list();
    }
    ++gen_; // the listing sent with the create is of no use: drop its answer
    if (r.rc == ZNONODE) {
        if (++parent_rounds_ > max_parent_rounds)
            return fail(make_error_code(errc::server_error),
                        "cannot create the lock directory " + dir_);
        return make_parents(1);
    }
    if (r.rc == ZNOCHILDRENFOREPHEMERALS)
        return fail(make_error_code(errc::configuration_error),
                    "the lock directory " + dir_ + " is an ephemeral node (not a lock name)");
    if (transport_loss(r.rc)) return retry_when_connected(&acquisition::recover);
    if (session_gone(r.rc)) return restart();
    fail(make_error_code(r.rc == ZNOAUTH ? errc::permission_denied : errc::server_error),
         std::string("create under ") + dir_ + ": " + zerror(r.rc));
}

void acquisition::make_parents(std::size_t pos) {
    // Create /a, /a/b, ... as CONTAINER nodes (Curator's creatingParentContainersIfNeeded).
    const auto slash = dir_.find('/', pos);
    const auto path = dir_.substr(0, slash);
    session_->create(path, {}, ZOO_CONTAINER, [self = shared_from_this(), slash](reply&& r) {
        if (self->finished_) return;
        if (r.rc == ZOK || r.rc == ZNODEEXISTS) {
            if (slash == std::string::npos) return self->create();
            return self->make_parents(slash + 1);
        }
        if (transport_loss(r.rc)) return self->retry_when_connected(&acquisition::create);
        if (session_gone(r.rc)) return self->restart();
        if (r.rc == ZNOCHILDRENFOREPHEMERALS)
            return self->fail(make_error_code(errc::configuration_error),
                              "a parent of " + self->dir_ + " is an ephemeral node");
        self->fail(make_error_code(errc::server_error),
                   std::string("create parent of ") + self->dir_ + ": " + zerror(r.rc));
    });
}

void acquisition::recover() {
    // Protected mode: did the lost create succeed? Look for our prefix among the children.
    session_->children(dir_, {}, [self = shared_from_this()](reply&& r) {
        if (self->finished_) return;
        if (r.rc == ZOK) {
            const auto uuid_part = self->prefix_.substr(0, protected_length);
            if (auto found = find_protected(r.children, uuid_part)) return self->adopt(*found);
            return self->create();
        }
        if (r.rc == ZNONODE) return self->create();
        if (transport_loss(r.rc)) return self->retry_when_connected(&acquisition::recover);
        if (session_gone(r.rc)) return self->restart();
        self->fail(make_error_code(errc::server_error),
                   std::string("list ") + self->dir_ + ": " + zerror(r.rc));
    });
}

void acquisition::adopt(const std::string& child) {
    // Only if the node belongs to this session (CURATOR-498): read its Stat first.
    session_->exists(dir_ + "/" + child, {}, [self = shared_from_this(), child](reply&& r) {
        if (self->finished_) return;
        if (r.rc == ZOK && r.stat && r.stat->ephemeral_owner == self->session_->id()) {
            self->own_ = child;
            self->czxid_ = r.stat->czxid;
            return self->list();
        }
        if (r.rc == ZOK || r.rc == ZNONODE) return self->create();
        if (transport_loss(r.rc)) return self->retry_when_connected(&acquisition::recover);
        self->restart();
    });
}

void acquisition::list() {
    ++gen_;
    waiting_ = false;
    changed_ = false;
    session::watch_fn on_change;
    if (permits_ != 0) {
        // Curator's getChildren(leases).usingWatcher(): any change of the leases re-counts.
        std::weak_ptr<acquisition> w = shared_from_this();
        on_change = [w, gen = gen_](int) {
            auto self = w.lock();
            if (self && !self->finished_ && gen == self->gen_) self->on_children_changed();
        };
    }
    session_->children(dir_, std::move(on_change),
                       [self = shared_from_this(), gen = gen_](reply&& r) {
                           if (self->finished_ || gen != self->gen_) return;
                           self->on_children(std::move(r));
                       });
}

void acquisition::on_children_changed() {
    if (!waiting_) {
        changed_ = true; // before its listing's answer was handled: count again then
        return;
    }
    ++wakes_;
    backend_->note_wake();
    list();
}

void acquisition::on_children(reply&& r) {
    if (transport_loss(r.rc)) return retry_when_connected(&acquisition::list);
    if (session_gone(r.rc)) return restart();
    if (r.rc == ZNONODE) return restart(); // directory reaped: our node is gone with it
    if (r.rc != ZOK)
        return fail(make_error_code(errc::server_error),
                    std::string("list ") + dir_ + ": " + zerror(r.rc));
    std::vector<std::string> strangers;
    const auto sorted = sort_children(r.children, &strangers);
    if (!strangers.empty()) {
        // The server answers: report after our node is gone again (as give_up() does).
        const auto path = dir_ + "/" + own_;
        own_.clear();
        ++gen_;
        guaranteed_delete(session_, path, [self = shared_from_this(), strangers](int) {
            self->fail(make_error_code(errc::configuration_error),
                       "the lock directory " + self->dir_ +
                           " holds a child that is not a lock node ('" + strangers.front() +
                           "'); keep other data out of lock directories (Curator would sort "
                           "it by its whole name)");
        });
        return;
    }
    const auto d = decide(sorted, own_);
    if (!d.found) return restart(); // deleted under us (unlock --force, expiry)
    queue_ = sorted;
    if (permits_ != 0) {
        // InterProcessSemaphoreV2: held while the leases (own included) are at most permits.
        if (sorted.size() <= permits_) return granted();
        if (wait_over()) return give_up();
        if (std::exchange(changed_, false)) return list();
        waiting_ = true; // the children watch set by this listing wakes us
        backend_->note_wait();
        return;
    }
    if (d.holds) return granted();
    if (wait_over()) return give_up();
    watch(d.watch);
}

void acquisition::watch(const std::string& child) {
    waiting_ = true;
    const auto gen = gen_;
    std::weak_ptr<acquisition> w = shared_from_this();
    session_->get(
        dir_ + "/" + child,
        [w, gen, child](int type) {
            auto self = w.lock();
            if (!self || self->finished_ || gen != self->gen_) return;
            ++self->wakes_;
            self->backend_->note_wake();
            self->predecessor_went(type == ZOO_DELETED_EVENT ? child : std::string());
        },
        [w, gen, child](reply&& r) {
            auto self = w.lock();
            if (!self || self->finished_ || gen != self->gen_) return;
            if (r.rc == ZOK) return self->backend_->note_wait();       // wait for the watch
            if (r.rc == ZNONODE) return self->predecessor_went(child); // gone already
            if (transport_loss(r.rc)) return self->retry_when_connected(&acquisition::list);
            if (session_gone(r.rc)) return self->restart();
            self->fail(make_error_code(errc::server_error),
                       std::string("watch ") + self->dir_ + ": " + zerror(r.rc));
        });
}

void acquisition::predecessor_went(const std::string& child) {
    // The queue as last listed, less the child that went: when that alone makes this node
    // first, the lock is ours without another listing (names.hpp, decide_without), one round
    // trip less per hand-off than Curator. Otherwise list again, as Curator does.
    if (!child.empty() && decide_without(queue_, own_, child).holds) return granted();
    list();
}

void acquisition::granted() {
    auto h = std::make_shared<zk_hold>(*backend_, session_, name_, dir_ + "/" + own_, czxid_,
                                       kind_ == lock_kind::read);
    h->start();
    own_.clear(); // the hold owns the node now
    count({}, true);
    finish({}, std::move(h));
}

void acquisition::give_up() {
    ++gen_;
    waiting_ = false;
    if (own_.empty()) {
        count({}, false);
        return finish({}, nullptr);
    }
    // Curator's deleteOurPath: a guaranteed delete; the result waits for its answer so that a
    // retry by the same caller does not queue behind its own old node.
    const auto path = dir_ + "/" + own_;
    own_.clear();
    guaranteed_delete(session_, path, [self = shared_from_this()](int) {
        self->count({}, false);
        self->finish({}, nullptr);
    });
}

void acquisition::restart() {
    if (finished_) return;
    ++gen_;
    waiting_ = false;
    own_.clear();
    if (wait_over()) return give_up();
    if (permits_ != 0) return finish(retry_error(), nullptr); // again through the mutex
    if (++restarts_ > max_restarts)
        return fail(make_error_code(errc::unavailable),
                    "lock node of " + dir_ + " kept vanishing (session expiries)");
    connect();
}

void acquisition::session_ended(session_end) {
    if (finished_ || !session_) return;
    own_.clear(); // gone with the session
    restart();
}

void acquisition::cancel() {
    if (finished_) return;
    fail(make_error_code(errc::cancelled), "the ZooKeeper backend shut down");
}

void acquisition::fail(std::error_code ec, std::string why) {
    if (finished_) return;
    if (!why.empty()) backend_->set_error(why);
    if (!own_.empty() && session_) guaranteed_delete(session_, dir_ + "/" + own_, [](int) {});
    own_.clear();
    count(ec, false);
    finish(ec, nullptr);
}

void acquisition::finish(std::error_code ec, std::shared_ptr<hold> h) {
    if (finished_) return;
    finished_ = true;
    ++gen_;
    wait_timer_.cancel();
    hard_timer_.cancel();
    auto self = shared_from_this(); // untrack() may drop the last other reference
    backend_->untrack(this);
    auto done = std::move(done_);
    done(ec, std::move(h));
}

} // namespace dlock::detail::zk
