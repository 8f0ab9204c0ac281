// Release paths: blocking, detached (no waiting caller) and the local hand-over. Every reply is
// read by the hold's protocol (read_release / read_handover), so all paths agree.
#include "redis/release.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {
namespace {

/// How long a hand-over trusts its last PUBSUB NUMSUB check that no other client waits. A
/// waiter of another process that subscribes in between waits at most this long (plus the
/// critical sections in it) before releases publish again.
constexpr auto handover_recheck = std::chrono::milliseconds(1);

/// How long a polite release holds this client back from the lock it released: enough for a
/// woken waiter of another client to receive the message and have its attempt reach the
/// server (about one round trip plus scheduling), short enough to cost little when none does.
constexpr auto polite_head_start = std::chrono::milliseconds(2);

/// Metrics of a release's outcome (a re-entrant release that leaves the lock held is none).
void count_release(redis_client& c, const release_outcome& out) noexcept {
    using r = client_metrics::release_result;
    switch (out.what) {
    case release_outcome::kind::released:
        return c.metrics().release(r::released);
    case release_outcome::kind::not_owner:
        return c.metrics().release(r::not_owner);
    case release_outcome::kind::error:
        return c.metrics().release(r::failed);
    case release_outcome::kind::still_held:
        return;
    }
}

/// After a final release: if the unlock message reached connections other than (at most) this
/// client's own subscriber, the next acquisition of the lock here waits for a head start.
void note_release(redis_client& c, const redis_hold& h, const release_outcome& out) {
    count_release(c, out);
    if (out.what != release_outcome::kind::released || out.receivers < 1) return;
    // This client's own subscriber may be among the receivers (it lingers after its waiters
    // leave): one receiver while this client listens is most likely itself.
    if (out.receivers == 1 && c.registry().has_waiters()) return;
    c.registry().polite_begin(*h.protocol, h.keys.key,
                              std::chrono::steady_clock::now() + polite_head_start);
}

/// One command in flight without a waiting caller.
struct detached final : request {
    command cmd;
    std::shared_ptr<const void> keep;
    std::function<void(std::error_code, resp3::value&&)> done;
    void complete(std::error_code ec, resp3::value&& v) override {
        if (done) done(ec, std::move(v));
        delete this;
    }
};

/// Final as far as this client knows, and an acquisition of this client waits: the release
/// may hand the lock over (decided on the I/O thread, where waiters live).
bool handover_possible(redis_client& c, const redis_hold& h) noexcept {
    return c.options().handover && h.protocol->has_handover() && h.count <= 1 &&
           c.registry().has_waiters() && !c.shut_down();
}

void plain_release(redis_client& c, std::shared_ptr<const redis_hold> h, release_done done) {
    const redis_hold& r = *h;
    submit_detached(
        c, *r.where, h,
        [&](command& cmd) {
            r.protocol->release(cmd, r.keys, r.owner, r.lease, r.where->pubsub_mode());
        },
        [&c, self = c.shared_from_this(), h, done = std::move(done)](std::error_code ec,
                                                                     resp3::value&& v) {
            const auto out = h->protocol->read_release(ec, v);
            note_release(c, *h, out);
            if (done) done(out);
        });
}

/// I/O thread only. If a waiter of this client sleeps on the lock `h` finally releases, one
/// hand-over script passes the lock to it; otherwise the normal release runs.
void release_or_handover(redis_client& c, std::shared_ptr<const redis_hold> h, release_done done) {
    auto& sub = h->where->subscriber();
    pubsub::waiter* w = nullptr;
    if (c.shut_down()) {
    } else if (!h->protocol->queues_on_server()) {
        w = sub.take_sleeping(h->keys.channel,
                              [&](const pubsub::waiter& x) { return x.takes_handover_of(*h); });
    } else if (const auto q = c.registry().queued_waiters.find(h->keys.key);
               q != c.registry().queued_waiters.end() && !q->second.empty()) {
        // The first of this client's waiters in the server's queue, on its own channel: the
        // script hands it the lock only if it is the head.
        auto* first = q->second.front();
        w = sub.take_sleeping(
            h->protocol->waiter_channel(h->keys, first->owner()),
            [&](const pubsub::waiter& x) { return &x == first && x.takes_handover_of(*h); });
    }
    if (!w) return plain_release(c, std::move(h), std::move(done));
    const auto now = std::chrono::steady_clock::now();
    auto& checked = c.registry().handover_checked;
    auto last = checked.find(h->keys.channel);
    const bool check = last == checked.end() || now - last->second >= handover_recheck;
    auto waiter = w->share();
    waiter->handover_begin(now);
    auto keep = std::make_shared<
        std::pair<std::shared_ptr<const redis_hold>, std::shared_ptr<pubsub::waiter>>>(h, waiter);
    submit_detached(
        c, *h->where, keep,
        [&](command& cmd) {
            h->protocol->handover(cmd, *h, waiter->owner(), waiter->lease(), check,
                                  h->where->pubsub_mode());
        },
        [&c, self = c.shared_from_this(), keep, check, now,
         done = std::move(done)](std::error_code ec, resp3::value&& v) {
            const auto& hold = *keep->first;
            const auto r = hold.protocol->read_handover(ec, v);
            auto& times = c.registry().handover_checked;
            if (r.waiter == handover_result::handed_over && check)
                times[hold.keys.channel] = now;
            else if (r.waiter == handover_result::published)
                times.erase(hold.keys.channel);
            if (r.waiter == handover_result::published) // another client waits
                c.registry().polite_begin(*hold.protocol, hold.keys.key, now + polite_head_start);
            if (times.size() > 1024)
                std::erase_if(times,
                              [&](const auto& e) { return now - e.second >= handover_recheck; });
            keep->second->handover_done(r.waiter, r.token);
            count_release(c, r.releaser);
            if (done) done(r.releaser);
        });
}

} // namespace

void submit_detached(redis_client& c, node& n, std::shared_ptr<const void> keep,
                     const std::function<void(command&)>& fill,
                     std::function<void(std::error_code, resp3::value&&)> done) {
    auto* op = new detached();
    op->keep = std::move(keep);
    op->done = std::move(done);
    fill(op->cmd);
    op->args = op->cmd.args();
    op->eval_fallback = op->cmd.eval_fallback();
    op->deadline = std::chrono::steady_clock::now() + c.options().command_timeout;
    n.conn().submit(*op);
}

release_outcome release_blocking(redis_client& c, const std::shared_ptr<redis_hold>& hp) {
    const redis_hold& h = *hp;
    if (handover_possible(c, h) && !c.on_io_thread()) {
        completion_flag flag;
        release_outcome out;
        asio::post(c.io(), [&] {
            release_or_handover(c, hp, [&](release_outcome o) {
                out = o;
                flag.set();
            });
        });
        flag.wait();
        return out;
    }
    command cmd;
    h.protocol->release(cmd, h.keys, h.owner, h.lease, h.where->pubsub_mode());
    std::error_code ec;
    const auto v = c.run_release(*h.where, cmd, ec);
    const auto out = h.protocol->read_release(ec, v);
    note_release(c, h, out);
    return out;
}

void release_async(redis_client& c, const std::shared_ptr<redis_hold>& h, release_done done) {
    if (!handover_possible(c, *h)) return plain_release(c, h, std::move(done));
    if (c.on_io_thread()) return release_or_handover(c, h, std::move(done));
    asio::post(c.io(),
               [&c, self = c.shared_from_this(), hold = h, done = std::move(done)]() mutable {
                   release_or_handover(c, std::move(hold), std::move(done));
               });
}

} // namespace dlock::detail
