// redis/redlock/hold.cpp: redlock_hold, the Redlock hold behind a lease: release and extension.
#include "redis/redlock/redlock_impl.hpp"

namespace dlock::detail {

void redlock_hold::release_blocking(std::error_code& ec) {
    ec.clear();
    auto r = begin_release(ec);
    if (!r) return;
    auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
    if (r->on_io_thread()) return self->run_release(*r, {});
    completion_flag flag;
    asio::post(r->io(), [&, self, raw = r.get()] { // `r` on this stack keeps it alive
        self->run_release(*raw, [&](std::error_code e) {
            ec = e;
            flag.set();
        });
    });
    flag.wait();
}

void redlock_hold::release_async(std::function<void(std::error_code)> done) {
    std::error_code ec;
    auto r = begin_release(ec);
    if (!r) return done(ec);
    auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
    if (r->on_io_thread()) return run_release(*r, std::move(done));
    asio::post(r->io(), [self, w = std::weak_ptr(r), done = std::move(done)]() mutable {
        if (auto live = w.lock())
            self->run_release(*live, std::move(done));
        else
            done(make_error_code(errc::cancelled));
    });
}

void redlock_hold::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    ec.clear();
    if (released() || lost()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    auto r = r_.lock();
    if (!r || r->shut_down()) {
        ec = make_error_code(errc::cancelled);
        return;
    }
    if (lease_ms <= r->options().node_timeout) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    if (r->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
    completion_flag flag;
    asio::post(r->io(), [&, self, raw = r.get()] { // `r` on this stack keeps it alive
        self->run_extension(*raw, lease_ms, [&](std::error_code e) {
            ec = e;
            flag.set();
        });
    });
    flag.wait();
}

void redlock_hold::extend_async(std::chrono::milliseconds lease_ms,
                                std::function<void(std::error_code)> done) {
    if (released() || lost()) return done(make_error_code(errc::not_owner));
    auto r = r_.lock();
    if (!r || r->shut_down()) return done(make_error_code(errc::cancelled));
    if (lease_ms <= r->options().node_timeout) return done(make_error_code(errc::invalid_argument));
    auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
    if (r->on_io_thread()) return run_extension(*r, lease_ms, std::move(done));
    asio::post(r->io(), [self, lease_ms, w = std::weak_ptr(r), done = std::move(done)]() mutable {
        if (auto live = w.lock())
            self->run_extension(*live, lease_ms, std::move(done));
        else
            done(make_error_code(errc::cancelled));
    });
}

void redlock_hold::with_metrics(const std::function<void(client_metrics&)>& f) const {
    if (auto r = r_.lock()) f(r->metrics());
}

asio::any_io_executor redlock_hold::executor() const {
    auto r = r_.lock();
    return r && !r->shut_down() ? asio::any_io_executor(r->io().get_executor())
                                : asio::any_io_executor{};
}

void redlock_hold::run_extension(redlock_impl& r, std::chrono::milliseconds lease,
                                 std::function<void(std::error_code)> done) {
    if (released() || lost() || releasing()) {
        if (done) done(make_error_code(errc::not_owner));
        return;
    }
    std::vector<std::shared_ptr<redlock_hold>> one{
        std::static_pointer_cast<redlock_hold>(shared_from_this())};
    extend_all(r, std::move(one), lease,
               [done = std::move(done)](const redlock_hold&, std::error_code ec) {
                   if (done) done(ec);
               },
               {});
}

void redlock_hold::end_lost(loss_cause cause) {
    if (!mark_lost(cause)) return;
    if (auto r = r_.lock()) {
        r->metrics().hold_ended(clock::now() - acquired_at_);
        r->metrics().loss(cause); // "lock lost" was logged by mark_lost (core/warning.cpp)
    }
}

void redlock_hold::end_released() {
    if (!mark_released()) return;
    if (auto r = r_.lock()) r->metrics().hold_ended(clock::now() - acquired_at_);
}

std::shared_ptr<redlock_impl> redlock_hold::begin_release(std::error_code& ec) {
    if (released()) return nullptr;
    auto r = r_.lock();
    if (!r || !r->begin_delete()) {
        mark_released();
        ec = make_error_code(errc::cancelled);
        return nullptr;
    }
    r->unwatch(this);
    if (lost()) {
        r->end_delete();
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    releasing_.store(true, std::memory_order_release);
    return r;
}

void redlock_hold::run_release(redlock_impl& r, std::function<void(std::error_code)> done) {
    auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
    auto result = std::make_shared<std::error_code>();
    auto fo = std::make_shared<fanout>(r, 1, std::nullopt);
    const auto& k = *ref_;
    fo->start(
        ref_,
        [&](command& c) { layout().release(c, k.keys, k.token, k.lease, pubsub::mode::classic); },
        &read_delete,
        [self, result](fanout& f, std::size_t) {
            self->set_votes(f.votes());
            const auto& q = f.round();
            std::error_code ec;
            using rr = client_metrics::release_result;
            auto owner = self->r_.lock();
            if (q.state() == quorum_round::verdict::won) {
                self->end_released();
                if (owner) owner->metrics().release(rr::released);
            } else if (q.refused_by_quorum()) {
                self->end_lost(loss_cause::undetermined);
                if (owner) owner->metrics().release(rr::not_owner);
                ec = make_error_code(errc::not_owner);
            } else {
                self->end_released();
                if (owner) owner->metrics().release(rr::failed);
                for (std::size_t i = 0; i < q.nodes() && !ec; ++i)
                    ec = f.vote_of(0, i).ec;
                if (!ec) ec = make_error_code(errc::unavailable);
            }
            *result = ec;
        },
        [self](fanout& f, std::size_t, std::size_t i) { self->set_vote(f.vote_of(0, i)); },
        [&r, result, done = std::move(done)](fanout&) {
            if (done) done(*result);
            r.end_delete();
        });
}

} // namespace dlock::detail
