#include "etcd/acquire.hpp"

#include "etcd/hold.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail::etcd {
namespace {

constexpr int max_restarts = 20;
constexpr std::chrono::milliseconds retry_delay{100};
/// A waiter's watch proves its member alive this often (watch.hpp).
constexpr std::chrono::milliseconds probe_every{1000};

} // namespace

acquisition::acquisition(etcd_backend& b, std::string name, std::string range,
                         const acquire_options& opts, done_fn done)
    : backend_(&b)
    , name_(std::move(name))
    , range_(std::move(range))
    , kind_(opts.kind)
    , blockers_(rw_side(opts.kind) ? rw_blockers(range_, opts.kind) : std::string())
    , permits_(opts.kind == lock_kind::semaphore ? std::max(opts.permits, 1U) : 0U)
    , semaphore_keys_(permits_ != 0 ? semaphore_range(range_) : std::string())
    , started_(clock::now())
    , done_(std::move(done))
    , wait_timer_(b.executor())
    , hard_timer_(b.executor())
    , retry_timer_(b.executor()) {
    if (opts.wait) deadline_ = started_ + std::max(*opts.wait, std::chrono::milliseconds(0));
}

void acquisition::start() {
    auto self = shared_from_this();
    if (deadline_) {
        wait_timer_.expires_at(*deadline_);
        wait_timer_.async_wait([self](std::error_code ec) {
            if (ec || self->finished_) return;
            if (self->waiting_ || !self->queued_) // on a watch, or behind this client's own
                self->give_up();
            else
                self->late_ = true; // a request is in flight: decided at its answer
        });
        hard_timer_.expires_at(*deadline_ + backend_->url().connect_timeout);
        hard_timer_.async_wait([self](std::error_code ec) {
            if (ec || self->finished_) return;
            self->fail(make_error_code(errc::unavailable),
                       "no answer from etcd " + self->backend_->url().display() +
                           " within the wait plus connect_timeout");
        });
    }
    if (rw_side(kind_) || permits_ != 0) { // unique keys: no local queue (acquire.hpp)
        queued_ = true;
        return connect();
    }
    ticket_ = backend_->enter(range_, [w = weak_from_this()] {
        auto a = w.lock();
        if (!a || a->finished_) return;
        a->queued_ = true;
        a->connect();
    });
}

bool acquisition::wait_over() const {
    return late_ || (deadline_ && clock::now() >= *deadline_);
}

void acquisition::connect() {
    const auto gen = ++gen_;
    backend_->with_lease(
        [self = shared_from_this(), gen](std::error_code ec, std::shared_ptr<lease_session> l) {
            if (self->finished_ || gen != self->gen_) return;
            if (ec == errc::unavailable) // a grant that met a silent member: again
                return self->retry_later(ec, &acquisition::connect);
            if (ec) return self->fail(ec, {});
            self->lease_ = std::move(l);
            self->lease_->add_observer(std::weak_ptr<lease_observer>(self));
            self->key_ = self->new_key();
            self->put();
        });
}

void acquisition::put() {
    const auto gen = ++gen_;
    const auto lease = lease_->id();
    auto txn = permits_ != 0        ? semaphore_txn(key_, semaphore_keys_, lease, permits_)
               : !blockers_.empty() ? rw_txn(key_, blockers_, lease)
                                    : lock_txn(key_, range_, lease, value_ ? &*value_ : nullptr);
    backend_->client().txn(std::move(txn),
                           [self = shared_from_this(), gen](grpc::Status s, pb::TxnResponse&& r) {
                               if (self->finished_ || gen != self->gen_) return;
                               self->on_put(std::move(s), std::move(r));
                           });
}

void acquisition::on_put(grpc::Status s, pb::TxnResponse&& r) {
    if (s.error_code() == grpc::StatusCode::NOT_FOUND &&
        s.error_message().find("lease not found") != std::string::npos)
        return std::shared_ptr(lease_)->found_gone(); // lease_ended() starts again
    if (!s.ok()) return failed(s, &acquisition::put, "lock txn");
    if (permits_ != 0) return on_semaphore_put(std::move(r));
    if (!blockers_.empty()) return on_rw_put(std::move(r));
    if (r.responses_size() < 2) return fail(make_error_code(errc::protocol_error), "lock txn");
    if (r.succeeded()) { // the own key is the newest of the range: it holds if it is alone
        rev_ = r.header().revision();
        if (r.responses(1).response_range().count() == 1) return granted(r.header().revision());
        if (wait_over()) return give_up();
        return next_predecessor();
    } else {
        const auto& mine = r.responses(0).response_range().kvs();
        if (mine.empty()) return put(); // deleted between compare and read: again
        rev_ = mine[0].create_revision();
    }
    const auto& owner = r.responses(1).response_range().kvs();
    if (owner.empty() || owner[0].create_revision() == rev_) return granted(r.header().revision());
    if (wait_over()) return give_up();
    next_predecessor();
}

std::string acquisition::new_key() {
    if (permits_ != 0) return semaphore_key(range_, backend_->unique_ns());
    if (!blockers_.empty()) return rw_key(range_, kind_, backend_->unique_ns());
    return own_key(range_, lease_->id());
}

void acquisition::on_rw_put(pb::TxnResponse&& r) {
    if (!r.succeeded()) { // another client's key of the same nanosecond: a new one
        key_ = new_key();
        return put();
    }
    if (r.responses_size() < 2) return fail(make_error_code(errc::protocol_error), "rw txn");
    rev_ = r.header().revision();
    for (const auto& kv : r.responses(1).response_range().kvs())
        if (kv.key() != key_) { // the newest older blocker: wait for it at once
            if (wait_over()) return give_up();
            return wait_for(kv.key(), r.header().revision(), kv.create_revision());
        }
    granted(r.header().revision());
}

void acquisition::on_semaphore_put(pb::TxnResponse&& r) {
    if (!r.succeeded()) { // another client's key of the same nanosecond: a new one
        key_ = new_key();
        return put();
    }
    if (r.responses_size() < 2) return fail(make_error_code(errc::protocol_error), "txn");
    rev_ = r.header().revision();
    // Every other key of the range was created before the own one, in this Txn: the line.
    in_line(r.responses(1).response_range(), r.header().revision(), false);
}

void acquisition::in_line(const pb::RangeResponse& keys, std::int64_t revision, bool watching) {
    if (!permits_match(keys)) return;
    // Under the watch, deletions it brought already may be of revisions after the one this
    // read was served at (the stream and the answer do not wait for each other): `gone_` keeps
    // them off the line. Keys are never put again.
    ahead_.clear();
    for (const auto& kv : keys.kvs())
        if (kv.create_revision() < rev_ && !gone_.contains(kv.key())) ahead_.insert(kv.key());
    gone_.clear();
    settled_ = true;
    if (ahead_.size() < permits_) return granted(revision);
    if (watching) return; // the watch, created before this read, brings every later deletion
    if (wait_over()) return give_up();
    wait_in_line(revision);
}

bool acquisition::permits_match(const pb::RangeResponse& holders) {
    // The `permits` oldest keys hold; each names the permits it was acquired with.
    std::vector<const mvccpb::KeyValue*> by_age;
    for (const auto& kv : holders.kvs())
        by_age.push_back(&kv);
    const auto n = std::min<std::size_t>(by_age.size(), permits_);
    std::partial_sort(
        by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(n), by_age.end(),
        [](const auto* x, const auto* y) { return x->create_revision() < y->create_revision(); });
    const auto permits = std::to_string(permits_);
    for (std::size_t i = 0; i < n; ++i)
        if (by_age[i]->value() != permits) {
            fail(make_error_code(errc::invalid_argument),
                 "the etcd semaphore '" + name_ + "' is held with " +
                     by_age[i]->value().substr(0, 20) + " permits; this acquisition asked for " +
                     permits);
            return false;
        }
    return true;
}

void acquisition::line() {
    const auto gen = ++gen_;
    waiting_ = false;
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    read_line(gen, false);
}

void acquisition::read_line(std::uint64_t gen, bool watching) {
    backend_->client().txn(
        semaphore_line(key_, semaphore_keys_, rev_),
        [self = shared_from_this(), gen, watching](grpc::Status s, pb::TxnResponse&& r) {
            if (self->finished_ || gen != self->gen_) return;
            if (!s.ok()) return self->failed(s, &acquisition::line, "semaphore line");
            if (r.responses_size() < 2)
                return self->fail(make_error_code(errc::protocol_error), "semaphore line");
            const auto& own = r.responses(1).response_range().kvs();
            if (own.empty() || own[0].create_revision() != self->rev_) return self->restart();
            self->in_line(r.responses(0).response_range(), r.header().revision(), watching);
        });
}

void acquisition::wait_in_line(std::int64_t read_at) {
    const auto gen = ++gen_;
    waiting_ = true;
    settled_ = false;
    gone_.clear();
    if (watch_) watch_->cancel();
    // From etcd's current revision (0), not from read_at + 1: a watch from a revision already
    // passed (another client wrote since the read, as busy semaphores do) waits for etcd's
    // catch-up loop, up to 100 ms, before its first event.
    watch_ = std::make_shared<key_watch>(
        backend_->client(), semaphore_keys_, 0,
        [w = weak_from_this(), gen](key_watch::result) {
            auto a = w.lock();
            if (!a || a->finished_ || gen != a->gen_) return;
            a->line(); // broken: read the line again
        },
        range_end(semaphore_keys_));
    watch_->on_created([w = weak_from_this(), gen, read_at](std::int64_t created_at) {
        auto a = w.lock();
        if (!a || a->finished_ || gen != a->gen_) return;
        if (created_at <= read_at) { // nothing was written between the read and the watch
            a->settled_ = true;
            return;
        }
        a->read_line(gen, true); // deletions between them were not seen: read it again
    });
    watch_->each_deletion([w = weak_from_this(), gen](const std::string& key, std::int64_t rev) {
        auto a = w.lock();
        if (!a || a->finished_ || gen != a->gen_) return;
        if (key == a->key_) return a->restart(); // gone with the lease, or forced away
        if (!a->settled_) a->gone_.insert(key);  // the line's read may be of an older revision
        if (a->ahead_.erase(key) != 0 && a->settled_ && a->ahead_.size() < a->permits_)
            a->granted(rev);
    });
    watch_->probe(probe_every);
    watch_->start();
}

void acquisition::next_predecessor() {
    if (permits_ != 0) return line();
    const auto gen = ++gen_;
    waiting_ = false;
    // The own key and what is ahead of it, in one read: a waiter woken by a deletion holds
    // after this one round trip.
    backend_->client().txn(
        still_mine_then(key_, rev_,
                        blockers_.empty() ? predecessor(range_, rev_)
                                          : last_before(blockers_, rev_)),
        [self = shared_from_this(), gen](grpc::Status s, pb::TxnResponse&& r) {
            if (self->finished_ || gen != self->gen_) return;
            if (!s.ok()) return self->failed(s, &acquisition::next_predecessor, "txn");
            if (!r.succeeded()) return self->restart(); // gone with the lease, or forced away
            if (r.responses_size() < 1)
                return self->fail(make_error_code(errc::protocol_error), "waiter txn");
            const auto& ahead = r.responses(0).response_range().kvs();
            if (ahead.empty()) return self->granted(r.header().revision());
            if (self->wait_over()) return self->give_up();
            self->wait_for(ahead[0].key(), r.header().revision(), ahead[0].create_revision());
        });
}

void acquisition::wait_for(const std::string& key, std::int64_t read_at, std::int64_t created) {
    const auto gen = ++gen_;
    waiting_ = true;
    if (watch_) watch_->cancel(); // a recheck's answer may come while it is still open
    watch_ = std::make_shared<key_watch>(
        backend_->client(), key, 0, [w = weak_from_this(), gen](key_watch::result) {
            auto a = w.lock();
            if (!a || a->finished_ || gen != a->gen_) return;
            a->next_predecessor(); // deleted, or broken: read again either way
        });
    watch_->on_created([w = weak_from_this(), gen, read_at, key, created](std::int64_t at) {
        auto a = w.lock();
        if (!a || a->finished_ || gen != a->gen_ || at <= read_at) return;
        a->recheck(gen, key, created); // written to since the read: is the key still there?
    });
    watch_->probe(probe_every);
    watch_->start();
}

void acquisition::recheck(std::uint64_t gen, const std::string& key, std::int64_t created) {
    backend_->client().range(one_key(key), [self = shared_from_this(), gen,
                                            created](grpc::Status s, pb::RangeResponse&& r) {
        if (self->finished_ || gen != self->gen_) return;
        if (!s.ok()) return self->failed(s, &acquisition::next_predecessor, "range");
        // Still there: the watch, created before this read, brings its deletion.
        if (!r.kvs().empty() && r.kvs(0).create_revision() == created) return;
        self->next_predecessor();
    });
}

void acquisition::granted(std::int64_t seen_revision) {
    if (finished_) return;
    auto h = std::make_shared<etcd_hold>(*backend_, lease_, name_, range_, key_, rev_, ticket_);
    queued_ = false; // the hold leaves the queue when it ends
    key_.clear();
    h->start(seen_revision + 1);
    backend_->counters().acquisition(metrics_slot(kind_), {}, true, false, clock::now() - started_);
    finish({}, std::move(h));
}

void acquisition::give_up() {
    ++gen_;
    waiting_ = false;
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    backend_->counters().acquisition(metrics_slot(kind_), {}, false, false,
                                     clock::now() - started_);
    if (key_.empty() || rev_ == 0) return finish({}, nullptr);
    // The own key goes before the answer, so that a retry by the same caller does not find it.
    const auto key = std::exchange(key_, {});
    backend_->client().txn(delete_if(key, rev_),
                           [self = shared_from_this()](grpc::Status, pb::TxnResponse&&) {
                               self->finish({}, nullptr);
                           });
}

void acquisition::restart() {
    if (finished_) return;
    ++gen_;
    waiting_ = false;
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    key_.clear();
    rev_ = 0;
    lease_.reset();
    if (wait_over()) return give_up();
    if (++restarts_ > max_restarts)
        return fail(make_error_code(errc::unavailable),
                    "the lock key under " + range_ + " kept vanishing (lease expiries)");
    connect();
}

void acquisition::lease_ended(loss_cause) {
    if (finished_ || !lease_) return;
    key_.clear(); // gone with the lease
    rev_ = 0;
    restart();
}

void acquisition::failed(const grpc::Status& s, void (acquisition::*retry)(), const char* doing) {
    const auto ec = to_error(s);
    backend_->set_error(std::string(doing) + " on etcd " + backend_->url().display() + ": " +
                        s.error_message());
    if (!transient(s)) return fail(ec, {});
    retry_later(ec, retry);
}

void acquisition::retry_later(std::error_code ec, void (acquisition::*retry)()) {
    if (!deadline_ && clock::now() - started_ > std::chrono::hours(1))
        return fail(ec, {}); // bound an endless wait's retries of a dead cluster
    const auto gen = ++gen_;
    retry_timer_.expires_after(retry_delay);
    retry_timer_.async_wait([self = shared_from_this(), gen, retry](std::error_code e) {
        if (e || self->finished_ || gen != self->gen_) return;
        ((*self).*retry)();
    });
}

void acquisition::cancel() {
    fail(make_error_code(errc::cancelled), "the etcd backend shut down");
}

void acquisition::fail(std::error_code ec, std::string why) {
    if (finished_) return;
    if (!why.empty()) backend_->set_error(why);
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    if (!key_.empty() && rev_ != 0 && !backend_->shut())
        backend_->client().txn(delete_if(key_, rev_), [](grpc::Status, pb::TxnResponse&&) {});
    key_.clear();
    backend_->counters().acquisition(metrics_slot(kind_), ec, false, false,
                                     clock::now() - started_);
    finish(ec, nullptr);
}

void acquisition::finish(std::error_code ec, std::shared_ptr<hold> h) {
    if (finished_) return;
    finished_ = true;
    ++gen_;
    wait_timer_.cancel();
    hard_timer_.cancel();
    retry_timer_.cancel();
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    if (!h) backend_->leave(range_, ticket_); // a hold leaves when it ends
    auto self = shared_from_this();           // untrack() may drop the last other reference
    backend_->untrack(this);
    auto done = std::move(done_);
    done(ec, std::move(h));
}

} // namespace dlock::detail::etcd
