// The acquisition front-end: prepare, new_owner, the first attempt on the sync lane and
// acquire_blocking, make_hold, undo and abandon. The acquire operation is acquire_op.cpp.
#include "redis/acquire.hpp"

#include "core/random.hpp"
#include "redis/acquire_impl.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <charconv>
#include <iterator>

namespace dlock::detail {

std::error_code prepare(redis_client& c, const lock_protocol& p, lock_keys keys,
                        const acquire_options& opts, std::string owner, acquire_request& req) {
    if (opts.lease && opts.lease->count() < 1) return make_error_code(errc::invalid_argument);
    if (p.queues_on_server() && c.options().fair_waiter_timeout.count() < 3)
        return make_error_code(errc::invalid_argument);
    if (opts.retry && (opts.retry->attempts == 0 || opts.retry->delay.count() < 0 ||
                       opts.retry->jitter.count() < 0))
        return make_error_code(errc::invalid_argument);
    req.started_at = clock::now();
    req.protocol = &p;
    req.where = &c.router().for_slot(keys.slot);
    req.keys = std::move(keys);
    req.owner = std::move(owner);
    req.wait = opts.wait;
    if (req.wait && req.wait->count() < 0) req.wait = std::chrono::milliseconds(0);
    req.lease = opts.lease ? *opts.lease : c.options().watchdog_lease;
    req.watchdog = !opts.lease;
    req.retry = opts.retry;
    return {};
}

void append_owner(std::string& out, const std::string& client_id, std::uint64_t n) {
    char digits[20];
    const auto end = std::to_chars(std::begin(digits), std::end(digits), n).ptr;
    out.append(client_id).append(1, ':').append(digits, end);
}

namespace {
std::string owner_string(const std::string& client_id, std::uint64_t n) {
    std::string s;
    s.reserve(client_id.size() + owner_digits_max + 1);
    append_owner(s, client_id, n);
    return s;
}
} // namespace

std::string new_owner(const redis_client& c, const lock_protocol& p, bool thread_bound) {
    if (!p.reentrant()) return random_token();
    return owner_string(c.id(), thread_bound ? this_thread_owner_id() : new_owner_id());
}

std::string thread_owner(const redis_client& c) {
    return owner_string(c.id(), this_thread_owner_id());
}

namespace {

/// The first attempt on the calling thread (the sync lane): the uncontended case is one round
/// trip with no I/O-thread involvement. True when that decided the acquisition (`res`, `ec`);
/// false when the acquire operation continues (refused: `req.refused_*` set; a moving master;
/// the lane not usable now).
bool first_attempt_on_lane(redis_client& c, acquire_request& req, acquire_result& res,
                           std::error_code& ec) {
    auto* lane = c.lane_for(*req.where);
    // Not on the lane: a WAIT that must follow the attempt on the same connection, or a
    // lock-delay that the operation waits out.
    if (!lane || c.shut_down() || c.on_io_thread() || may_queue(c, req) || polite_wait(c, req) ||
        waits_for_replicas(c) || paused_for(req).count() > 0)
        return false;
    command cmd;
    build_attempt(c, req, cmd);
    const auto sent_at = clock::now();
    resp3::value reply;
    if (lane->call(req.where->conn(), cmd.args(), cmd.eval_fallback(),
                   sent_at + c.options().command_timeout, reply,
                   ec) != net::sync_lane::result::done) {
        ec.clear();
        return false;
    }
    const auto out = req.protocol->read_attempt(ec, reply);
    ec.clear();
    switch (out.what) {
    case attempt_outcome::kind::error:
        if (out.ec == errc::ambiguous) undo(c, req);
        // A moving master: the operation tries again within the wait.
        if (req.where->follows_master() && transient_error(out.ec)) return false;
        ec = out.ec;
        return true;
    case attempt_outcome::kind::acquired:
    case attempt_outcome::kind::reentered:
        if (out.what == attempt_outcome::kind::acquired && req.fresh_owner &&
            paused_for(req).count() > 0) {
            undo(c, req); // the master changed during the call: its lock-delay applies
            return false;
        }
        if (out.what == attempt_outcome::kind::acquired && late_grant(req, sent_at)) {
            undo(c, req); // valid nowhere any more (see late_grant): not acquired
            return req.wait && req.wait->count() == 0;
        }
        res = acquired(c, req, out.what == attempt_outcome::kind::reentered, out.count, out.token,
                       sent_at);
        return true;
    case attempt_outcome::kind::held:
        break;
    }
    if (req.wait) {
        if (req.wait->count() == 0) return true; // one try: not acquired
        const auto spent =
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - sent_at);
        req.wait = std::max(std::chrono::milliseconds(1), *req.wait - spent);
    }
    req.refused_ttl = out.ttl_ms;
    req.refused_sent_at = sent_at;
    return false;
}

} // namespace

acquire_result acquire_blocking(redis_client& c, acquire_request& req, std::error_code& ec) {
    ec.clear();
    acquire_result res;
    if (first_attempt_on_lane(c, req, res, ec)) {
        count(c, req, ec, res);
        return res;
    }
    completion_flag done;
    acquire_async(c, req, [&](std::error_code e, acquire_result r, const acquire_request&) {
        ec = e;
        res = r;
        done.set();
    });
    done.wait();
    return res;
}

namespace {
/// make_hold() with the keys and owner given apart (copied or taken from `req`).
std::shared_ptr<redis_hold> hold_of(redis_client& c, const acquire_request& req, lock_keys keys,
                                    std::string owner, const acquire_result& r) {
    auto h = std::make_shared<redis_hold>();
    h->client = c.weak_from_this();
    h->where = req.where;
    h->protocol = req.protocol;
    h->keys = std::move(keys);
    h->owner = std::move(owner);
    if (req.protocol->has_fencing_token()) h->token = r.token;
    h->lease = req.lease;
    h->watchdog = req.watchdog;
    h->count = static_cast<int>(r.count);
    h->acquired_at = r.sent_at;
    h->set_valid_until(r.sent_at + req.lease - drift_for(req.lease));
    if (!r.reentered) h->counted_locally(); // local_begin ran when it was acquired
    c.renewal().add(h);
    return h;
}
} // namespace

std::shared_ptr<redis_hold> make_hold(redis_client& c, const acquire_request& req,
                                      const acquire_result& r) {
    return hold_of(c, req, req.keys, req.owner, r);
}

std::shared_ptr<redis_hold> make_hold(redis_client& c, acquire_request&& req,
                                      const acquire_result& r) {
    auto keys = std::move(req.keys);
    auto owner = std::move(req.owner);
    return hold_of(c, req, std::move(keys), std::move(owner), r);
}

void undo(redis_client& c, const acquire_request& req) {
    abandon(c, req);
    if (!req.fresh_owner) return;
    auto keep = std::make_shared<const acquire_request>(req);
    submit_detached(c, *req.where, keep,
                    [&](command& cmd) {
                        req.protocol->release(cmd, keep->keys, keep->owner, keep->lease,
                                              keep->where->pubsub_mode());
                    },
                    {});
}

void abandon(redis_client& c, const acquire_request& req) {
    if (req.wait && req.wait->count() == 0) return; // one try: it announced nothing
    command probe; // most kinds announce nothing: no copy of the request for them
    if (!req.protocol->abandon(probe, req.keys, req.owner, req.where->pubsub_mode())) return;
    auto keep = std::make_shared<const acquire_request>(req);
    submit_detached(c, *req.where, keep,
                    [&](command& cmd) {
                        keep->protocol->abandon(cmd, keep->keys, keep->owner,
                                                keep->where->pubsub_mode());
                    },
                    {});
}

} // namespace dlock::detail
