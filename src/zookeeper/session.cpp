#include "zookeeper/session.hpp"

#include "core/drift.hpp"
#include "core/log.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

using namespace std::chrono_literals;

/// True when the server answered (the rc says something about the data, not the transport).
bool server_answered(int rc) {
    return rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZCLOSING &&
           rc != ZSESSIONEXPIRED && rc != ZINVALIDSTATE && rc != ZSYSTEMERROR &&
           rc != ZMARSHALLINGERROR;
}

node_stat copy_stat(const Stat& s) {
    node_stat n;
    n.czxid = s.czxid;
    n.ctime = s.ctime;
    n.mtime = s.mtime;
    n.ephemeral_owner = s.ephemeralOwner;
    n.version = s.version;
    n.cversion = s.cversion;
    n.num_children = s.numChildren;
    return n;
}

} // namespace

/// What the C client reads and writes during a multi, alive until its completion.
struct multi_buffers {
    std::vector<multi_op> ops;
    std::vector<zoo_op_t> zops;
    std::vector<zoo_op_result_t> results;
    std::vector<Stat> stats;
    std::vector<std::vector<char>> created; // create: the path buffer
};

struct session::op {
    std::unique_ptr<multi_buffers> multi{};
    std::weak_ptr<session> owner;
    asio::any_io_executor ex;
    callback done;
    clock::time_point sent{};
    // A watch registered with this request: removed again when the request set none.
    std::string watch_path{};
    bool child_watch = false;
    bool exists_watch = false; // exists() sets its watch also when the node is missing
    std::uint64_t watch_id = 0;
};

// C-client completions (run by zookeeper_process on the I/O thread): copy, then post to the
// same executor, so that the lock logic never runs inside the C client.
struct session_access {
    static void post(session::op* o, reply&& r) {
        asio::post(o->ex, [o, r = std::move(r)]() mutable {
            std::unique_ptr<session::op> own(o);
            if (auto s = o->owner.lock())
                s->complete(own.release(), std::move(r));
            else
                o->done(std::move(r));
        });
    }
    static void on_string_stat(int rc, const char* value, const Stat* st, const void* data) {
        reply r;
        r.rc = rc;
        if (rc == ZOK && value) r.path = value;
        if (rc == ZOK && st) r.stat = copy_stat(*st);
        post(static_cast<session::op*>(const_cast<void*>(data)), std::move(r));
    }
    static void on_void(int rc, const void* data) {
        reply r;
        r.rc = rc;
        post(static_cast<session::op*>(const_cast<void*>(data)), std::move(r));
    }
    static void on_stat(int rc, const Stat* st, const void* data) {
        reply r;
        r.rc = rc;
        if (rc == ZOK && st) r.stat = copy_stat(*st);
        post(static_cast<session::op*>(const_cast<void*>(data)), std::move(r));
    }
    static void on_data(int rc, const char* value, int len, const Stat* st, const void* data) {
        reply r;
        r.rc = rc;
        if (rc == ZOK && value && len > 0) r.data.assign(value, static_cast<std::size_t>(len));
        if (rc == ZOK && st) r.stat = copy_stat(*st);
        post(static_cast<session::op*>(const_cast<void*>(data)), std::move(r));
    }
    static void on_multi(int rc, const void* data) {
        auto* o = static_cast<session::op*>(const_cast<void*>(data));
        reply r;
        r.rc = rc;
        if (o->multi)
            for (const auto& res : o->multi->results)
                r.results.push_back(res.err);
        post(o, std::move(r));
    }
    static void on_children(int rc, const String_vector* v, const Stat* st, const void* data) {
        reply r;
        r.rc = rc;
        if (rc == ZOK && v)
            for (int i = 0; i < v->count; ++i)
                r.children.emplace_back(v->data[i]);
        if (rc == ZOK && st) r.stat = copy_stat(*st);
        post(static_cast<session::op*>(const_cast<void*>(data)), std::move(r));
    }
};

session::session(asio::any_io_executor ex, zk_url url, log_options log)
    : ex_(std::move(ex))
    , url_(std::move(url))
    , log_(std::move(log))
    , timer_(std::in_place, ex_)
    , io_timer_(std::in_place, ex_)
    , created_(clock::now()) { // before zookeeper_init2: the creation is later
    if (url_.server_lag) settle_lag(*url_.server_lag);
}

session::~session() {
    close();
}

void session::global_watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<session*>(ctx);
    asio::post(self->ex_, [w = self->weak_from_this(), state] {
        if (auto s = w.lock()) s->on_state(state);
    });
}

void session::path_watcher(zhandle_t*, int type, int, const char* path, void* ctx) {
    if (type == ZOO_SESSION_EVENT || !path) return; // state changes come to global_watcher
    auto* self = static_cast<session*>(ctx);
    asio::post(self->ex_, [w = self->weak_from_this(), type, p = std::string(path)] {
        if (auto s = w.lock()) s->on_path_event(type, p);
    });
}

void session::note_error(std::string m) {
    std::lock_guard lk(err_mu_);
    last_error_ = std::move(m);
}

std::pair<std::int64_t, std::string> session::credentials() const {
    std::lock_guard lk(err_mu_);
    return {id(), password_};
}

std::string session::last_error() const {
    // dlock's own words only: the C client's log lines (log_sink above) never reach a message.
    std::lock_guard lk(err_mu_);
    return last_error_;
}

void session::on_state(int state) {
    if (ended() || !zh_) return;
    if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
        const auto* cid = zoo_client_id(zh_);
        id_.store(cid ? cid->client_id : 0, std::memory_order_release);
        if (cid) {
            std::lock_guard lk(err_mu_);
            password_.assign(cid->passwd, sizeof cid->passwd);
        }
        negotiated_ms_.store(zoo_recv_timeout(zh_), std::memory_order_release);
        connected_.store(true, std::memory_order_release);
        (ever_connected_ ? reconnects_ : connects_).fetch_add(1, std::memory_order_relaxed);
        if (ever_connected_) log_reconnected(log_, "zookeeper", url_.display(), "session");
        ever_connected_ = true;
        auto waiters = std::move(connect_waiters_);
        connect_waiters_.clear();
        for (auto& w : waiters)
            w({});
        last_ping_ = clock::time_point{}; // ping now: it starts the lease clock
        tick();
        return;
    }
    if (state == ZOO_EXPIRED_SESSION_STATE) {
        note_error("ZooKeeper session " + std::to_string(id()) + " expired on " + url_.display());
        log(log_, log_level::warning, "session expired",
            {{"backend", "zookeeper"}, {"address", url_.display()}});
        end(session_end::expired);
        return;
    }
    if (state == ZOO_AUTH_FAILED_STATE) {
        note_error("ZooKeeper authentication failed on " + url_.display());
        end(session_end::closed);
        return;
    }
    if (connected()) {
        note_error("disconnected from ZooKeeper " + url_.display() + ", reconnecting");
        log_connection_lost(log_, "zookeeper", url_.display(), "session", "disconnected");
        // The session's ping is what renews every hold on it: it cannot be answered now.
        log_session_renewal_failed(log_, observers_,
                                   "disconnected from the session's server; the locks are lost "
                                   "when the session timeout passes without a reconnect");
    }
    connected_.store(false, std::memory_order_release);
}

void session::end(session_end why) {
    if (ended_.exchange(true, std::memory_order_acq_rel) && !zh_) return;
    connected_.store(false, std::memory_order_release);
    valid_until_.store(0, std::memory_order_release);
    // Holds keep the session, and a lease may outlive its client: the timer goes now, on the
    // I/O thread, not with the last hold after the backend's I/O loop is gone.
    timer_.reset();
    watches_.clear();
    auto waiters = std::move(connect_waiters_);
    connect_waiters_.clear();
    auto observers = std::move(observers_);
    observers_.clear();
    for (auto& o : observers)
        if (auto p = o.lock()) p->session_ended(why);
    for (auto& w : waiters)
        w(make_error_code(errc::unavailable));
    // The handle is dead (expired) or must not come back (deadline: the server will expire
    // it; the locks were given up). Closing it here also deletes the ephemeral nodes at once
    // when the server can still be reached.
    close();
}

void session::when_connected(std::function<void(std::error_code)> fn) {
    if (ended()) {
        fn(make_error_code(errc::unavailable));
        return;
    }
    if (connected()) {
        fn({});
        return;
    }
    connect_waiters_.push_back(std::move(fn));
}

void session::add_observer(std::weak_ptr<session_observer> o) {
    std::erase_if(observers_, [](const auto& w) { return w.expired(); });
    observers_.push_back(std::move(o));
}

void session::settle_lag(std::chrono::milliseconds lag) {
    lag_ = lag;
    touches_.emplace(lag, created_);
    if (answered_unsettled_ != clock::time_point{}) answered(answered_unsettled_);
}

void session::answered(clock::time_point sent) {
    if (!touches_) {
        answered_unsettled_ = std::max(answered_unsettled_, sent);
        return;
    }
    const auto proven = touches_->answered(sent);
    const auto timeout = negotiated();
    if (timeout <= 0ms) return;
    const auto until = proven + timeout - drift_for(timeout);
    if (until.time_since_epoch().count() <= valid_until_.load(std::memory_order_acquire)) return;
    valid_until_.store(until.time_since_epoch().count(), std::memory_order_release);
    // The observers (every hold) hear of it once it moved by 1 % of the timeout since they last
    // did (a ping's answer always does): under load every answer renews the session, and one
    // call per hold per answer was O(holds) of work per request (50 holds: B's client CPU
    // per pair 0.94 x without it, docs/design/zookeeper.md). A hold's valid_until so lags the
    // session's by less than that, on the safe side; the session's own deadline (tick()) is exact.
    if (until - told_until_ < timeout / 100) return;
    told_until_ = until;
    for (auto& o : observers_)
        if (auto p = o.lock()) p->session_valid_until(until);
}

std::chrono::milliseconds session::ping_period() const {
    const auto timeout = negotiated() > 0ms ? negotiated() : url_.session_timeout;
    const auto lag = lag_;
    if (lag <= 0ms) return timeout / 3;
    return std::max(std::chrono::milliseconds(50), (timeout - lag - lag / 8) / 4);
}

void session::schedule_tick() {
    if (ended() || !timer_) return;
    const auto every = ping_period();
    auto next = clock::now() + every;
    if (connected() && !ping_in_flight_) next = std::min(next, last_ping_ + every);
    if (const auto vu = valid_until(); vu.time_since_epoch().count() != 0)
        next = std::min(next, vu);
    timer_->expires_at(next);
    timer_->async_wait([w = weak_from_this()](std::error_code ec) {
        if (ec) return;
        if (auto s = w.lock()) s->tick();
    });
}

void session::tick() {
    if (ended()) return;
    const auto now = clock::now();
    if (const auto vu = valid_until(); vu.time_since_epoch().count() != 0 && now >= vu) {
        note_error("no answer from ZooKeeper " + url_.display() +
                   " within the session timeout: the session counts as expired");
        end(session_end::deadline);
        return;
    }
    if (connected() && !ping_in_flight_ && now >= last_ping_ + ping_period()) {
        ping_in_flight_ = true;
        last_ping_ = now;
        exists("/", {}, [w = weak_from_this()](reply&&) {
            if (auto s = w.lock()) s->ping_in_flight_ = false;
        });
    }
    schedule_tick();
}

session::op* session::make_op(callback done) {
    auto* o = new op;
    o->owner = weak_from_this();
    o->ex = ex_;
    o->done = std::move(done);
    o->sent = clock::now();
    requests_.fetch_add(1, std::memory_order_relaxed);
    cork_this_turn(); // the zoo_a* call that follows sends the request
    return o;
}

void session::add_watch(op* o, const std::string& path, bool child, watch_fn watch) {
    o->watch_path = path;
    o->child_watch = child;
    o->watch_id = next_watch_++;
    watches_[{path, child}].emplace_back(o->watch_id, std::move(watch));
}

void session::submit(op* o, int rc) {
    if (rc == ZOK) { // sent, or queued until connected: the completion will come
        pump();
        return;
    }
    reply r;
    r.rc = rc;
    session_access::post(o, std::move(r));
}

void session::complete(op* o, reply&& r) {
    std::unique_ptr<op> own(o);
    if (server_answered(r.rc))
        answered(o->sent);
    else if (r.rc != ZCONNECTIONLOSS)
        note_error(std::string("ZooKeeper request failed: ") + zerror(r.rc));
    if (o->watch_id != 0) {
        // getData/getChildren set a watch only on ZOK, exists also on ZNONODE.
        const bool set = r.rc == ZOK || (o->exists_watch && r.rc == ZNONODE);
        if (!set) {
            auto it = watches_.find({o->watch_path, o->child_watch});
            if (it != watches_.end()) {
                std::erase_if(it->second, [&](const auto& p) { return p.first == o->watch_id; });
                if (it->second.empty()) watches_.erase(it);
            }
        }
    }
    o->done(std::move(r));
}

void session::on_path_event(int type, const std::string& path) {
    std::vector<watch_fn> fire;
    const auto take = [&](bool child) {
        auto it = watches_.find({path, child});
        if (it == watches_.end()) return;
        for (auto& p : it->second)
            fire.push_back(std::move(p.second));
        watches_.erase(it);
    };
    if (type == ZOO_CHILD_EVENT) {
        take(true);
    } else if (type == ZOO_DELETED_EVENT) {
        take(false);
        take(true);
    } else if (type == ZOO_CREATED_EVENT || type == ZOO_CHANGED_EVENT) {
        take(false);
    }
    for (auto& f : fire)
        f(type);
}

void session::create(const std::string& path, const std::string& data, int mode, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    submit(o, zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                           &ZOO_OPEN_ACL_UNSAFE, mode, &session_access::on_string_stat, o));
}

void session::remove(const std::string& path, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    submit(o, zoo_adelete(zh_, path.c_str(), -1, &session_access::on_void, o));
}

void session::exists(const std::string& path, watch_fn watch, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    if (!watch) return submit(o, zoo_aexists(zh_, path.c_str(), 0, &session_access::on_stat, o));
    add_watch(o, path, false, std::move(watch));
    o->exists_watch = true;
    submit(o, zoo_awexists(zh_, path.c_str(), &session::path_watcher, this,
                           &session_access::on_stat, o));
}

void session::get(const std::string& path, watch_fn watch, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    if (!watch) return submit(o, zoo_aget(zh_, path.c_str(), 0, &session_access::on_data, o));
    add_watch(o, path, false, std::move(watch));
    submit(o,
           zoo_awget(zh_, path.c_str(), &session::path_watcher, this, &session_access::on_data, o));
}

void session::get_config(callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    submit(o, zoo_agetconfig(zh_, 0, &session_access::on_data, o));
}

void session::set(const std::string& path, const std::string& data, int version, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    submit(o, zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version,
                       &session_access::on_stat, o));
}

void session::children(const std::string& path, watch_fn watch, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    if (!watch)
        return submit(o, zoo_aget_children2(zh_, path.c_str(), 0, &session_access::on_children, o));
    add_watch(o, path, true, std::move(watch));
    submit(o, zoo_awget_children2(zh_, path.c_str(), &session::path_watcher, this,
                                  &session_access::on_children, o));
}

} // namespace dlock::detail::zk

namespace dlock::detail::zk {

void session::multi(std::vector<multi_op> ops, callback done) {
    auto* o = make_op(std::move(done));
    if (!zh_) return submit(o, ZSESSIONEXPIRED);
    auto mb = std::make_unique<multi_buffers>();
    mb->ops = std::move(ops);
    const auto n = mb->ops.size();
    mb->zops.resize(n);
    mb->results.resize(n);
    mb->stats.resize(n);
    mb->created.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto& m = mb->ops[i];
        switch (m.what) {
        case multi_op::type::check:
            zoo_check_op_init(&mb->zops[i], m.path.c_str(), m.version);
            break;
        case multi_op::type::set:
            zoo_set_op_init(&mb->zops[i], m.path.c_str(), m.data.data(),
                            static_cast<int>(m.data.size()), m.version, &mb->stats[i]);
            break;
        case multi_op::type::create:
            mb->created[i].resize(m.path.size() + 16);
            zoo_create_op_init(&mb->zops[i], m.path.c_str(), m.data.data(),
                               static_cast<int>(m.data.size()), &ZOO_OPEN_ACL_UNSAFE, m.mode,
                               mb->created[i].data(), static_cast<int>(mb->created[i].size()));
            break;
        }
    }
    auto* zops = mb->zops.data();
    auto* results = mb->results.data();
    o->multi = std::move(mb);
    submit(o, zoo_amulti(zh_, static_cast<int>(n), zops, results, &session_access::on_multi, o));
}

} // namespace dlock::detail::zk
