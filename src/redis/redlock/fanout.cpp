// redis/redlock/fanout.cpp: one round on every master, the answers' readers, delete_everywhere.
#include "redis/redlock/redlock_impl.hpp"

namespace dlock::detail {

fanout::fanout(redlock_impl& r, std::size_t rounds, std::optional<std::chrono::milliseconds> lease)
    : r_(r)
    , ecs_(rounds, std::vector<std::error_code>(r.size()))
    , reported_(rounds, 0)
    , timer_(r.io()) {
    const auto now = clock::now();
    rounds_.reserve(rounds);
    for (std::size_t k = 0; k < rounds; ++k)
        rounds_.emplace_back(r.size(), now, r.options().node_timeout, lease);
}

void fanout::start(std::shared_ptr<const void> keep, const fill_fn& fill, read_fn read,
                   decided_fn decided, late_fn late, finished_fn finished) {
    read_ = std::move(read);
    decided_ = std::move(decided);
    late_ = std::move(late);
    finished_ = std::move(finished);
    outstanding_ = r_.size();
    sending_ = true; // a master that fails at once answers inside submit()
    for (std::size_t i = 0; i < r_.size(); ++i) {
        auto* call = new node_call();
        fill(call->cmd);
        call->args = call->cmd.args();
        call->eval_fallback = call->cmd.eval_fallback();
        call->deadline = clock::now() + r_.command_timeout(i);
        call->done = [self = shared_from_this(), keep, i](std::error_code ec, resp3::value&& v) {
            self->on_answer(i, ec, v);
        };
        r_.at(i).conn().submit(*call);
    }
    sending_ = false;
    for (std::size_t k = 0; k < rounds_.size(); ++k)
        if (rounds_[k].state() != quorum_round::verdict::open) report(k);
    if (outstanding_ == 0) finish();
    if (open_rounds() == 0) return;
    // Weak: the commands in flight keep an open round alive; a handler left in the queue
    // at shutdown must not keep the redlock alive through the round's callbacks.
    timer_.expires_at(rounds_.front().deadline());
    timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        if (auto self = w.lock(); self && !ec) self->on_deadline();
    });
}

void fanout::on_answer(std::size_t i, std::error_code ec, const resp3::value& v) {
    answers_.assign(rounds_.size(), answer{vote::failed, {}});
    read_(ec, v, answers_);
    const auto now = clock::now();
    for (std::size_t k = 0; k < rounds_.size(); ++k) {
        auto& q = rounds_[k];
        if (q.votes()[i] != vote::pending) continue; // timed out already
        const bool open = q.state() == quorum_round::verdict::open;
        ecs_[k][i] = answers_[k].second;
        q.on_vote(i, answers_[k].first, now);
        if (!open) {
            if (late_) late_(*this, k, i);
        } else if (!sending_ && q.state() != quorum_round::verdict::open) {
            report(k);
        }
    }
    // The last answer has every vote in, so every round is decided (or start() decides
    // them when it came inside submit()).
    if (--outstanding_ == 0 && !sending_) finish();
}

void fanout::on_deadline() {
    const auto now = clock::now();
    for (std::size_t k = 0; k < rounds_.size(); ++k) {
        auto& q = rounds_[k];
        if (q.state() != quorum_round::verdict::open) continue;
        for (std::size_t i = 0; i < r_.size(); ++i)
            if (q.votes()[i] == vote::pending && !r_.at(i).conn().connected())
                ecs_[k][i] = make_error_code(errc::unavailable);
        q.on_deadline(now);
        report(k);
    }
}

void fanout::report(std::size_t k) {
    if (reported_[k]) return;
    reported_[k] = 1;
    if (open_rounds() == 0) timer_.cancel();
    decided_(*this, k);
}

// The three kinds of round, on the simple-lock layout.

void read_set(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    const auto a = layout().read_attempt(ec, v);
    switch (a.what) {
    case attempt_outcome::kind::acquired:
        out[0] = {vote::yes, {}};
        break;
    case attempt_outcome::kind::held:
        out[0] = {vote::refused, {}};
        break;
    default:
        out[0] = {vote::failed, a.ec ? a.ec : make_error_code(errc::protocol_error)};
    }
}

void read_delete(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    const auto a = layout().read_release(ec, v);
    switch (a.what) {
    case release_outcome::kind::released:
        out[0] = {vote::yes, {}};
        break;
    case release_outcome::kind::not_owner:
        out[0] = {vote::refused, {}};
        break;
    default:
        out[0] = {vote::failed, a.ec ? a.ec : make_error_code(errc::protocol_error)};
    }
}

/// simple/renew.lua over out.size() locks: 1 extended, 0 not ours (any more).
void read_pexpire(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    if (!ec) ec = reply_error(v);
    std::vector<char> ok;
    if (!ec && !lock_protocol::read_renew({}, v, out.size(), ok))
        ec = make_error_code(errc::protocol_error);
    for (std::size_t k = 0; k < out.size(); ++k)
        out[k] = ec ? answer{vote::failed, ec} : answer{ok[k] ? vote::yes : vote::refused, {}};
}

void delete_everywhere(redlock_impl& r, std::shared_ptr<const redlock_ref> ref) {
    auto fo = std::make_shared<fanout>(r, 1, std::nullopt);
    const auto& k = *ref;
    r.add_delete();
    fo->start(
        ref,
        [&](command& c) { layout().release(c, k.keys, k.token, k.lease, pubsub::mode::classic); },
        &read_delete, [](fanout&, std::size_t) {}, {}, [&r](fanout&) { r.end_delete(); });
}

} // namespace dlock::detail
