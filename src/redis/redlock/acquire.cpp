// redis/redlock/acquire.cpp: redlock_acquire_op, an acquisition's rounds until won, given up or
// cancelled.
#include "redis/redlock/redlock_impl.hpp"

#include <random>

namespace dlock::detail {

void redlock_acquire_op::start() {
    self_ = shared_from_this(); // alive until finish(); handlers hold weak references
    r_->track(self_);
    asio::post(r_->io(), [w = weak_from_this()] {
        if (auto self = w.lock()) self->round();
    });
}

void redlock_acquire_op::cancel() {
    if (finished_) return;
    timer_.cancel();
    if (current_) delete_everywhere(*r_, current_);
    finish(make_error_code(errc::cancelled), {});
}

void redlock_acquire_op::round() {
    if (finished_) return;
    if (r_->shut_down()) return finish(make_error_code(errc::cancelled), {});
    ++rounds_;
    auto ref = std::make_shared<redlock_ref>();
    ref->keys = keys_;
    ref->token = random_token();
    ref->lease = lease_;
    current_ = ref;
    // The hold a won round made, for answers that come after the decision (the op may be
    // gone by then).
    auto won = std::make_shared<std::weak_ptr<redlock_hold>>();
    auto fo = std::make_shared<fanout>(*r_, 1, lease_);
    fo->start(
        ref, [&](command& c) { layout().attempt(c, ref->keys, ref->token, ref->lease); }, &read_set,
        [w = weak_from_this(), ref, won](fanout& f, std::size_t) {
            if (auto self = w.lock()) *won = self->decided(f, ref);
        },
        [won](fanout& f, std::size_t, std::size_t i) {
            if (auto h = won->lock()) h->set_vote(f.vote_of(0, i));
        });
}

std::weak_ptr<redlock_hold> redlock_acquire_op::decided(fanout& f,
                                                        const std::shared_ptr<redlock_ref>& ref) {
    if (finished_) return {}; // cancelled meanwhile: cancel() deleted the token
    const auto& q = f.round();
    if (q.state() == quorum_round::verdict::won) {
        current_.reset();
        auto h = std::make_shared<redlock_hold>(r_, name_, ref, watchdog_, f.votes());
        h->set_valid_until(q.valid_until());
        r_->watch(h);
        finish({}, {access::make_lease(h), f.votes(), rounds_});
        return h;
    }
    delete_everywhere(*r_, ref);
    current_.reset();
    last_votes_ = f.votes();
    const auto now = clock::now();
    thread_local std::minstd_rand rng{std::random_device{}()};
    const auto next = schedule_.next(rounds_, now, static_cast<std::uint32_t>(rng()));
    const auto& deadline = schedule_.wait_deadline;
    const bool attempts_left = schedule_.attempts == 0 || rounds_ < schedule_.attempts;
    if (!next && !(attempts_left && deadline && now < *deadline)) {
        finish({}, {lease{}, std::move(last_votes_), rounds_});
        return {};
    }
    // No time for another round before the wait ends: the timeout is answered when the wait
    // ends, as on every backend (a timed-out acquire takes its whole wait).
    const bool last = !next;
    timer_.expires_at(last ? *deadline : *next);
    timer_.async_wait([w = weak_from_this(), last](std::error_code ec) {
        auto self = w.lock();
        if (!self || ec || self->finished_) return;
        if (!last) return self->round();
        self->finish({}, {lease{}, std::move(self->last_votes_), self->rounds_});
    });
    return {};
}

void redlock_acquire_op::finish(std::error_code ec, redlock_acquisition a) {
    finished_ = true;
    // Counted under the simple kind: Redlock takes the simple-lock layout on every master.
    r_->metrics().acquisition(metrics_slot(lock_kind::simple), ec, static_cast<bool>(a.held), false,
                              clock::now() - started_at_);
    if (a.votes.empty()) a.votes = std::move(last_votes_);
    if (a.rounds == 0) a.rounds = rounds_;
    r_->untrack(this);
    auto keep = std::move(self_);
    auto done = std::move(done_);
    done(ec, std::move(a));
}

} // namespace dlock::detail
