// postgres/advisory_hold.cpp: advisory_hold, the hold of an advisory lock: its session watched,
// proven alive every check_period / 2, the fixed lease, release and loss.
#include "postgres/advisory_impl.hpp"
#include "postgres/election.hpp"

#include <algorithm>

namespace dlock::detail::pg {

advisory_hold::advisory_hold(std::shared_ptr<engine> e, std::string name, advisory_key key,
                             lock_kind kind, std::optional<std::uint64_t> token,
                             std::shared_ptr<connection> session, bool election)
    : pg_hold(std::move(e))
    , name_(std::move(name))
    , key_(std::move(key))
    , kind_(kind)
    , token_(token)
    , session_(std::move(session))
    , tick_(engine_->io())
    , lease_timer_(engine_->io())
    , election_(election) {}

advisory_hold::~advisory_hold() {
    // Dropped without release (only the engine's weak list and timers' weak captures are
    // left): end the session on the I/O thread, which frees the lock.
    if (!ended_io_ && session_) engine_->post([s = session_] { s->close(); });
}

void advisory_hold::start(std::optional<milliseconds> fixed_lease) {
    acquired_at_ = clock::now();
    set_valid_until(acquired_at_ + engine_->config().check_period);
    if (fixed_lease) arm_lease(*fixed_lease);
    session_->on_closed([w = weak()](std::error_code) {
        if (auto h = w.lock()) h->lose(loss_cause::gone);
    });
    arm_tick();
}

void advisory_hold::arm_tick() {
    tick_.expires_after(engine_->config().check_period / 2);
    tick_.async_wait([w = weak()](std::error_code ec) {
        if (auto h = w.lock(); h && !ec) h->on_tick();
    });
}

void advisory_hold::on_tick() {
    if (ended() || releasing_) return;
    if (clock::now() >= valid_until()) return lose(loss_cause::deadline);
    if (!checking_ && session_->idle()) prove([](std::error_code) {});
    arm_tick();
}

void advisory_hold::prove(std::function<void(std::error_code)> done) {
    checking_ = true;
    const auto sent = clock::now();
    const auto period = engine_->config().check_period;
    session_->run({{"SELECT 1"}}, period,
                  [w = weak(), sent, period, done](std::error_code ec, std::vector<result>& r) {
                      auto h = w.lock();
                      if (!h) return done(make_error_code(errc::not_owner));
                      h->checking_ = false;
                      if (h->ended() || h->releasing_)
                          return done(h->lost() ? make_error_code(errc::not_owner)
                                                : std::error_code{});
                      if (ec || r.empty() || !r[0].ok()) {
                          h->lose(loss_cause::gone);
                          return done(make_error_code(errc::not_owner));
                      }
                      auto until = sent + period;
                      if (h->lease_end_ && *h->lease_end_ < until) until = *h->lease_end_;
                      if (until > h->valid_until()) {
                          // A proved session renews its advisory locks.
                          h->engine_->metrics().renewal_slack(h->valid_until());
                          h->set_valid_until(until);
                      }
                      done({});
                  });
}

void advisory_hold::arm_lease(milliseconds lease) {
    lease_end_ = clock::now() + lease;
    if (valid_until() > *lease_end_) set_valid_until(*lease_end_);
    lease_timer_.expires_at(*lease_end_);
    lease_timer_.async_wait([w = weak()](std::error_code ec) {
        // The fixed lease ran out: the lock must not outlive it; ending the session frees it.
        if (auto h = w.lock(); h && !ec && !h->releasing_) h->lose(loss_cause::deadline);
    });
}

void advisory_hold::extend_io(milliseconds lease, std::function<void(std::error_code)> done) {
    if (ended() || releasing_) return done(make_error_code(errc::not_owner));
    if (lease_end_) arm_lease(lease);
    if (checking_ || !session_->idle()) {
        // A check is in flight: its answer is as good as ours.
        return done({});
    }
    prove(std::move(done));
}

void advisory_hold::release_io(std::function<void(std::error_code)> done) {
    if (lost()) return done(make_error_code(errc::not_owner));
    if (ended() || releasing_) return done({});
    releasing_ = true;
    tick_.cancel();
    lease_timer_.cancel();
    const char* fn =
        shared_kind(kind_) ? "SELECT pg_advisory_unlock_shared" : "SELECT pg_advisory_unlock";
    auto& m = engine_->metrics();
    // A leader resigns: its row goes first, in the same batch (election.hpp).
    std::vector<statement> st;
    if (election_ && token_) st.push_back(resign_statement(name_, *token_));
    st.push_back(key_statement(key_call(fn, key_), key_));
    const auto n = st.size();
    session_->run(std::move(st), engine_->config().request_timeout,
                  [self = self(), done, &m, n](std::error_code ec, std::vector<result>& r) {
                      if (self->ended())
                          return done(self->lost() ? make_error_code(errc::not_owner)
                                                   : std::error_code{});
                      self->ended_io_ = true;
                      m.hold_ended(clock::now() - self->acquired_at_);
                      const bool answered =
                          !ec && r.size() == n &&
                          std::all_of(r.begin(), r.end(), [](const result& x) { return x.ok(); });
                      if (answered && !r.back().bool_value(0, 0)) {
                          // The server says this session did not hold it: lost before we knew.
                          m.release(client_metrics::release_result::not_owner);
                          m.loss(loss_cause::gone);
                          self->session_->close();
                          self->mark_lost(loss_cause::gone);
                          return done(make_error_code(errc::not_owner));
                      }
                      if (answered) {
                          m.release(client_metrics::release_result::released);
                          self->engine_->put_session(self->session_);
                      } else {
                          // No answer or an error: ending the session frees the lock either
                          // way.
                          m.release(client_metrics::release_result::failed);
                          self->session_->close();
                      }
                      self->session_.reset();
                      self->mark_released();
                      done({});
                  });
}

void advisory_hold::proclaim_io(std::string value, std::function<void(std::error_code)> done) {
    if (!election_ || !token_ || ended() || releasing_)
        return done(make_error_code(errc::not_owner));
    session_->run({proclaim_statement(name_, value, *token_)}, engine_->config().request_timeout,
                  [w = weak(), done](std::error_code ec, std::vector<result>& r) {
                      auto h = w.lock();
                      if (!h || h->ended()) return done(make_error_code(errc::not_owner));
                      if (ec) {
                          // No answer: the session is gone (a timeout closes it), and the
                          // leadership with it; the new value may have been written.
                          h->lose(loss_cause::gone);
                          return done(make_error_code(errc::ambiguous));
                      }
                      if (r.empty() || !r[0].ok()) {
                          if (!r.empty())
                              h->engine_->set_error(h->engine_->config().display + ": proclaim \"" +
                                                    h->name_ + "\": " + r[0].message());
                          return done(
                              make_error_code(r.empty() ? errc::unavailable : error_of(r[0])));
                      }
                      done(r[0].rows() == 1 ? std::error_code{} : make_error_code(errc::not_owner));
                  });
}

void advisory_hold::lose(loss_cause cause) {
    if (ended() || releasing_) return;
    ended_io_ = true;
    tick_.cancel();
    lease_timer_.cancel();
    auto& m = engine_->metrics();
    m.hold_ended(clock::now() - acquired_at_);
    m.loss(cause);
    if (session_) {
        if (!session_->error_text().empty())
            engine_->set_error(engine_->config().display + ": lock \"" + name_ +
                               "\" lost: " + session_->error_text());
        session_->on_closed(nullptr);
        session_->close();
        session_.reset();
    }
    mark_lost(cause);
}

} // namespace dlock::detail::pg
