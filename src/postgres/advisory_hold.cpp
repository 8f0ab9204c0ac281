// postgres/advisory_hold.cpp: advisory_hold, the hold of an advisory lock on a holding session
// (advisory_sessions.hpp: its checks prove every hold on it), the fixed lease, release and loss.
#include "postgres/advisory_impl.hpp"
#include "postgres/advisory_sessions.hpp"
#include "postgres/election.hpp"

#include <algorithm>

namespace dlock::detail::pg {

advisory_hold::advisory_hold(std::shared_ptr<engine> e, std::string name, advisory_key key,
                             lock_kind kind, std::optional<std::uint64_t> token,
                             std::shared_ptr<holding_session> session, bool election)
    : pg_hold(std::move(e))
    , name_(std::move(name))
    , key_(std::move(key))
    , id_(key_id(key_))
    , kind_(kind)
    , token_(token)
    , session_(std::move(session))
    , lease_timer_(engine_->io())
    , election_(election) {}

advisory_hold::~advisory_hold() {
    // Dropped without release (only the engine's weak list, the session's weak entry and
    // timers' weak captures are left): unlock the key on the I/O thread.
    if (!ended_io_ && session_)
        engine_->post([s = session_, id = id_, st = unlock_statement()]() mutable {
            s->drop(id, std::move(st));
        });
}

statement advisory_hold::unlock_statement() const {
    return unlock_statement_for(key_, kind_);
}

void advisory_hold::start(std::optional<milliseconds> fixed_lease, clock::time_point sent) {
    acquired_at_ = clock::now();
    set_valid_until(sent + engine_->config().check_period);
    if (fixed_lease) arm_lease(*fixed_lease);
}

void advisory_hold::proven(clock::time_point until) {
    if (ended() || releasing_) return;
    if (lease_end_ && *lease_end_ < until) until = *lease_end_;
    if (until > valid_until()) {
        // A proved session renews its advisory locks.
        engine_->metrics().renewal_slack(valid_until());
        set_valid_until(until);
    }
}

void advisory_hold::arm_lease(milliseconds lease) {
    lease_end_ = clock::now() + lease;
    if (valid_until() > *lease_end_) set_valid_until(*lease_end_);
    lease_timer_.expires_at(*lease_end_);
    lease_timer_.async_wait([w = weak()](std::error_code ec) {
        // The fixed lease ran out: the lock must not outlive it (lose() unlocks it).
        if (auto h = w.lock(); h && !ec && !h->releasing_) h->lose(loss_cause::deadline);
    });
}

void advisory_hold::extend_io(milliseconds lease, std::function<void(std::error_code)> done) {
    if (ended() || releasing_) return done(make_error_code(errc::not_owner));
    if (lease_end_) arm_lease(lease);
    // A check in flight: its answer is as good as ours.
    if (session_->checking()) return done({});
    session_->check([w = weak(), done](std::error_code ec) {
        auto h = w.lock();
        if (!h || h->lost()) return done(make_error_code(errc::not_owner));
        done(ec);
    });
}

void advisory_hold::release_io(std::function<void(std::error_code)> done) {
    if (lost()) return done(make_error_code(errc::not_owner));
    if (ended() || releasing_) return done({});
    releasing_ = true;
    lease_timer_.cancel();
    auto& m = engine_->metrics();
    // A leader resigns: its row goes first, in the same batch (election.hpp).
    std::vector<statement> st;
    if (election_ && token_) st.push_back(resign_statement(name_, *token_));
    st.push_back(unlock_statement());
    const auto n = st.size();
    session_->conn().run(
        std::move(st), engine_->config().request_timeout,
        [self = self(), done, &m, n](std::error_code ec, std::vector<result>& r) {
            if (self->ended())
                return done(self->lost() ? make_error_code(errc::not_owner) : std::error_code{});
            self->ended_io_ = true;
            m.hold_ended(clock::now() - self->acquired_at_);
            auto s = std::move(self->session_);
            const bool answered =
                !ec && r.size() == n &&
                std::all_of(r.begin(), r.end(), [](const result& x) { return x.ok(); });
            if (answered && !r.back().bool_value(0, 0)) {
                // The server says this session did not hold it: lost before we knew.
                m.release(client_metrics::release_result::not_owner);
                m.loss(loss_cause::gone);
                s->remove(self->id_);
                self->mark_lost(loss_cause::gone);
                return done(make_error_code(errc::not_owner));
            }
            if (answered) {
                m.release(client_metrics::release_result::released);
                s->remove(self->id_);
            } else {
                // No answer or an error: ending the session frees the lock either way (and
                // ends the other holds on it, each with its loss signal).
                m.release(client_metrics::release_result::failed);
                s->fail_all(loss_cause::gone);
            }
            self->mark_released();
            done({});
        });
}

void advisory_hold::proclaim_io(std::string value, std::function<void(std::error_code)> done) {
    if (!election_ || !token_ || ended() || releasing_)
        return done(make_error_code(errc::not_owner));
    session_->conn().run(
        {proclaim_statement(name_, value, *token_)}, engine_->config().request_timeout,
        [w = weak(), done](std::error_code ec, std::vector<result>& r) {
            auto h = w.lock();
            if (!h || h->ended()) return done(make_error_code(errc::not_owner));
            if (ec) {
                // No answer: the session is gone (a timeout closes it), and the leadership
                // with it; the new value may have been written.
                h->session_->fail_all(loss_cause::gone);
                return done(make_error_code(errc::ambiguous));
            }
            if (r.empty() || !r[0].ok()) {
                if (!r.empty())
                    h->engine_->set_error(h->engine_->config().display + ": proclaim \"" +
                                          h->name_ + "\": " + r[0].message());
                return done(make_error_code(r.empty() ? errc::unavailable : error_of(r[0])));
            }
            done(r[0].rows() == 1 ? std::error_code{} : make_error_code(errc::not_owner));
        });
}

void advisory_hold::ended_as_lost(loss_cause cause) {
    ended_io_ = true;
    lease_timer_.cancel();
    auto& m = engine_->metrics();
    m.hold_ended(clock::now() - acquired_at_);
    m.loss(cause);
    mark_lost(cause);
}

void advisory_hold::lose(loss_cause cause) {
    if (ended() || releasing_) return;
    if (auto s = std::move(session_)) s->drop(id_, unlock_statement());
    ended_as_lost(cause);
}

void advisory_hold::session_lost(loss_cause cause, const std::string& why) {
    if (ended() || releasing_) return;
    if (!why.empty())
        engine_->set_error(engine_->config().display + ": lock \"" + name_ + "\" lost: " + why);
    session_.reset();
    ended_as_lost(cause);
}

} // namespace dlock::detail::pg
