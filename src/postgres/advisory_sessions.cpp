// postgres/advisory_sessions.cpp: the holding sessions of advisory locks (advisory_sessions.hpp).
#include "postgres/advisory_sessions.hpp"

#include "core/log.hpp"
#include "postgres/advisory_impl.hpp"

#include <algorithm>

namespace dlock::detail::pg {

session_choice choose_session(const std::vector<session_load>& sessions, std::size_t pool,
                              std::size_t opening) {
    using action = session_choice::action;
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
        const auto& s = sessions[i];
        if (s.has_key || s.exclusive) continue;
        if (!best || std::tie(s.in_flight, s.keys) <
                         std::tie(sessions[*best].in_flight, sessions[*best].keys))
            best = i;
    }
    if (best && sessions[*best].in_flight == 0) return {action::use, *best};
    std::size_t shared = 0;
    for (const auto& s : sessions)
        if (!s.exclusive) ++shared;
    if (shared + opening < pool) return {action::open, 0};
    if (best && sessions[*best].in_flight < max_batches_ahead + 1) return {action::use, *best};
    // No session may take the key, and none being opened will free up for it: beyond the pool.
    if (!best && opening == 0) return {action::open, 0};
    return {action::wait, 0};
}

std::string key_id(const advisory_key& k) {
    // Appended, not "h" + string: GCC 12 at -O3 warns falsely (-Wrestrict) on a literal + a
    // temporary string.
    std::string id(1, k.server_hash ? 'h' : (k.pair ? 'p' : 'b'));
    if (k.server_hash)
        id += k.text;
    else
        id += std::to_string(k.value);
    return id;
}

std::string holding_app_name(std::string_view name, std::size_t count) {
    if (count == 1) return app_name_for(name);
    return "dlock" + std::to_string(count);
}

// --- holding_session ------------------------------------------------------------------------

holding_session::holding_session(engine& e, std::shared_ptr<connection> c, bool exclusive)
    : e_(e)
    , conn_(std::move(c))
    , tick_(e.io())
    , exclusive_(exclusive) {
    // A batch done here may free the session for a waiting try.
    conn_->after_batch([&eng = e_] { eng.drain_tries(); });
}

session_load holding_session::load(const std::string& id) const {
    return {has(id), exclusive_, conn_->in_flight(), keys_.size()};
}

void holding_session::reserve(const std::string& id) {
    keys_.emplace(id, entry{});
}

void holding_session::remove(const std::string& id) {
    keys_.erase(id);
    leave_if_empty();
}

void holding_session::add(const std::string& id, const std::shared_ptr<advisory_hold>& h,
                          clock::time_point sent) {
    auto& x = keys_[id];
    x.hold = h;
    x.name = h->name();
    x.key = h->key();
    valid_until_ = std::max(valid_until_, sent + e_.config().check_period);
    if (!ticking_) {
        conn_->on_closed([w = weak_from_this()](std::error_code) {
            if (auto s = w.lock()) s->fail_all(loss_cause::gone);
        });
        arm_tick(e_.config().check_period / 2);
    }
}

void holding_session::drop(const std::string& id, statement unlock) {
    if (left_) return;
    conn_->run({std::move(unlock)}, e_.config().request_timeout,
               [self = shared_from_this(), id](std::error_code ec, std::vector<result>& r) {
                   if (self->left_) return;
                   // No answer or an error: only ending the session surely frees the lock.
                   if (ec || r.empty() || !r[0].ok()) return self->fail_all(loss_cause::gone);
                   self->remove(id);
               });
}

void holding_session::arm_tick(std::chrono::steady_clock::duration after) {
    ticking_ = true;
    tick_.expires_after(after);
    tick_.async_wait([w = weak_from_this()](std::error_code ec) {
        if (auto s = w.lock(); s && !ec) s->on_tick();
    });
}

// A check every check_period / 2; the tick after one comes a quarter period later, and finds
// it answered (the answer armed the next check instead: no extra wake-up) or late: then the
// renewal is failing, which is logged, and the next tick is the deadline.
void holding_session::on_tick() {
    ticking_ = false;
    if (left_) return;
    const auto now = clock::now();
    if (now >= valid_until_) return fail_all(loss_cause::deadline);
    if (checking_) {
        log_renewal_failed(e_.metrics().log(), keys_.size(),
                           keys_.empty() ? std::string_view{} : keys_.begin()->second.name,
                           "advisory",
                           "the session check is not answered; its locks are lost at the end "
                           "of dlock_check");
        return arm_tick(valid_until_ - now);
    }
    check([](std::error_code) {});
    arm_tick(e_.config().check_period / 4);
}

void holding_session::check(std::function<void(std::error_code)> done) {
    if (left_) return done(make_error_code(errc::not_owner));
    checking_ = true;
    const auto sent = clock::now();
    const auto period = e_.config().check_period;
    // Tries and unlocks never block, so the check may queue behind them.
    conn_->run(
        {{"SELECT 1"}}, period,
        [w = weak_from_this(), sent, period, done](std::error_code ec, std::vector<result>& r) {
            auto s = w.lock();
            if (!s || s->left_) return done(make_error_code(errc::not_owner));
            s->checking_ = false;
            if (ec || r.empty() || !r[0].ok()) {
                s->fail_all(loss_cause::gone);
                return done(make_error_code(errc::not_owner));
            }
            s->valid_until_ = std::max(s->valid_until_, sent + period);
            s->arm_tick(sent + period / 2 - clock::now()); // the next check
            // Holds may end in proven(); copy first.
            std::vector<std::shared_ptr<advisory_hold>> hs;
            for (auto& [id, x] : s->keys_)
                if (auto h = x.hold.lock()) hs.push_back(std::move(h));
            for (auto& h : hs)
                h->proven(sent + period);
            done({});
        });
}

void holding_session::fail_all(loss_cause cause) {
    if (left_) return;
    left_ = true;
    tick_.cancel();
    auto keys = std::move(keys_);
    keys_.clear();
    std::erase_if(e_.holding, [this](const auto& s) { return s.get() == this; });
    if (!e_.waiting_tries.empty()) // room in the pool for a try in line
        e_.post([&eng = e_] { eng.drain_tries(); });
    conn_->on_closed(nullptr);
    const std::string why = conn_->error_text();
    conn_->close();
    for (auto& [id, x] : keys)
        if (auto h = x.hold.lock()) h->session_lost(cause, why);
}

void holding_session::leave_if_empty() {
    if (left_ || !keys_.empty()) return;
    left_ = true;
    tick_.cancel();
    std::erase_if(e_.holding, [this](const auto& s) { return s.get() == this; });
    if (!e_.waiting_tries.empty()) // room in the pool for a try in line
        e_.post([&eng = e_] { eng.drain_tries(); });
    conn_->after_batch(nullptr);
    if (conn_->idle())
        e_.put_session(conn_); // clears on_closed
    else {
        conn_->on_closed(nullptr);
        conn_->close();
    }
}

void holding_session::names(
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::string>& out) const {
    for (const auto& [id, x] : keys_)
        if (!x.name.empty() && !x.key.server_hash)
            out[{x.key.classid(), x.key.objid(), x.key.objsubid()}] = x.name;
}

session_pick pick_session(engine& e, const std::string& id) {
    std::vector<session_load> loads;
    loads.reserve(e.holding.size());
    for (const auto& s : e.holding)
        loads.push_back(s->load(id));
    const auto c = choose_session(loads, e.config().pool, e.holding_opening);
    using action = session_choice::action;
    if (c.what == action::use) return {e.holding[c.index], false};
    return {nullptr, c.what == action::wait};
}

std::shared_ptr<holding_session> join_session(engine& e, std::shared_ptr<connection> c,
                                              bool exclusive) {
    auto s = std::make_shared<holding_session>(e, std::move(c), exclusive);
    e.holding.push_back(s);
    return s;
}

} // namespace dlock::detail::pg
