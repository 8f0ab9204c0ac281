// redis/redlock/watchdog.cpp: extension rounds (extend_all) and the watchdog's tick; its loss
// timer is core's deadline_watch.
#include "redis/redlock/redlock_impl.hpp"

namespace dlock::detail {

void extend_all(redlock_impl& r, std::vector<std::shared_ptr<redlock_hold>> holds,
                std::chrono::milliseconds lease,
                std::function<void(const redlock_hold&, std::error_code)> each,
                std::function<void()> all) {
    struct batch {
        std::vector<std::shared_ptr<redlock_hold>> holds;
        std::size_t open = 0;
    };
    auto b = std::make_shared<batch>();
    b->holds = std::move(holds);
    b->open = b->holds.size();
    for (auto& h : b->holds)
        h->set_extending(true);
    auto fo = std::make_shared<fanout>(r, b->holds.size(), lease);
    fo->start(
        b,
        [&](command& c) {
            // simple/renew.lua: KEYS = the locks, ARGV = lease, then each lock's token.
            c.script(script_id::simple_renew).number(static_cast<std::int64_t>(b->holds.size()));
            for (const auto& h : b->holds)
                c.arg(h->ref().keys.key);
            c.number(lease.count());
            for (const auto& h : b->holds)
                c.arg(h->ref().token);
        },
        &read_pexpire,
        [&r, b, each = std::move(each), all = std::move(all)](fanout& f, std::size_t k) {
            auto& h = *b->holds[k];
            h.set_extending(false);
            h.set_votes(f.votes(k));
            const auto& q = f.round(k);
            std::error_code ec;
            if (h.released() || h.lost() || h.releasing()) {
                ec = make_error_code(errc::not_owner);
            } else if (q.state() == quorum_round::verdict::won) {
                r.metrics().renewal_slack(h.valid_until());
                h.set_valid_until(q.valid_until());
            } else if (q.refused_by_quorum()) {
                r.unwatch(&h);
                h.end_lost(loss_cause::undetermined); // a quorum said "not ours": gone or taken
                ec = make_error_code(errc::not_owner);
            } else {
                ec = make_error_code(errc::unavailable);
            }
            if (each) each(h, ec);
            if (--b->open == 0 && all) all();
        },
        [b](fanout& f, std::size_t k, std::size_t i) { b->holds[k]->set_vote(f.vote_of(k, i)); });
}

void redlock_impl::watch(const std::shared_ptr<redlock_hold>& h) {
    watch_.add(h);
}

void redlock_impl::unwatch(const redlock_hold* h) {
    watch_.remove(h);
}

bool redlock_impl::expiry::releasing(const redlock_hold& h) noexcept {
    return h.releasing();
}

void redlock_impl::expiry::expire(redlock_hold& h) {
    h.end_lost(loss_cause::deadline);
}

void redlock_impl::arm_tick() {
    tick_timer_.expires_after(opts_.watchdog_lease / 3);
    tick_timer_.async_wait([this](std::error_code ec) {
        if (ec) return;
        tick();
        arm_tick();
    });
}

void redlock_impl::tick() {
    std::vector<std::shared_ptr<redlock_hold>> due;
    std::size_t late = 0; // still in the round of the last tick: no quorum answered yet
    const redlock_hold* first_late = nullptr;
    const bool open = watch_.for_each([&](const std::shared_ptr<redlock_hold>& h) {
        if (!h->watchdog() || h->releasing()) return;
        if (!h->extending()) return due.push_back(h);
        if (late++ == 0) first_late = h.get();
    });
    if (!open) return;
    if (first_late != nullptr)
        log_renewal_failed(metrics_.log(), late, first_late->ref().keys.key, "simple",
                           "no quorum of masters answered the last renewal, sent a third of the "
                           "lease ago");
    // One fan-out per batch of up to batch_size holds: every master gets one renew script
    // over the batch's keys, and each hold is decided by its own quorum round.
    for (std::size_t first = 0; first < due.size(); first += batch_size) {
        const auto last = std::min(due.size(), first + batch_size);
        std::vector<std::shared_ptr<redlock_hold>> batch(
            due.begin() + static_cast<std::ptrdiff_t>(first),
            due.begin() + static_cast<std::ptrdiff_t>(last));
        // Holds no quorum renewed (masters unreachable or silent): "lock renewal failed".
        struct failures {
            std::size_t count = 0;
            std::string first;
        };
        auto failed = std::make_shared<failures>();
        extend_all(
            *this, std::move(batch), opts_.watchdog_lease,
            [failed](const redlock_hold& h, std::error_code ec) {
                if (ec != errc::unavailable) return;
                if (failed->count++ == 0) failed->first = h.ref().keys.key;
            },
            [this, failed] {
                log_renewal_failed(metrics_.log(), failed->count, failed->first, "simple",
                                   "no quorum of masters renewed it");
                watch_.check();
            });
    }
}

} // namespace dlock::detail
