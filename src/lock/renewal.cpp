#include "lock/renewal.hpp"

#include "client_impl.hpp"

#include <algorithm>
#include <functional>

namespace dlock::detail {
namespace {

/// One batched renewal script call: owns its arguments and the holds it renews.
class renew_op final : public request {
public:
    using done_fn = std::function<void(renew_op&, std::error_code, resp3::value&&)>;
    std::vector<std::shared_ptr<hold_state>> holds;
    std::vector<std::string> storage;
    std::vector<std::string_view> views;
    std::chrono::steady_clock::time_point sent_at;
    done_fn done;

    void complete(std::error_code ec, resp3::value&& reply) override {
        done(*this, ec, std::move(reply));
        delete this;
    }
};

} // namespace

renewal_service::renewal_service(client_impl& c)
    : c_(c), tick_timer_(c.io()), loss_timer_(c.io()) {}

void renewal_service::add(std::shared_ptr<hold_state> h) {
    asio::post(c_.io(), [this, h = std::move(h)]() mutable {
        if (stopped_ || h->released() || h->lost()) return;
        auto* key = h.get();
        if (!holds_.emplace(key, std::move(h)).second) return;
        if (key->watchdog) {
            ++watchdog_holds_;
            arm_tick();
        }
        arm_loss();
    });
}

void renewal_service::remove(const std::shared_ptr<hold_state>& h) {
    asio::post(c_.io(), [this, h] { forget(h.get()); });
}

void renewal_service::forget(hold_state* h) {
    auto it = holds_.find(h);
    if (it == holds_.end()) return;
    if (h->watchdog) --watchdog_holds_;
    holds_.erase(it);
}

void renewal_service::stop() {
    stopped_ = true;
    tick_timer_.cancel();
    loss_timer_.cancel();
    holds_.clear();
    watchdog_holds_ = 0;
}

void renewal_service::arm_tick() {
    if (tick_armed_ || stopped_ || watchdog_holds_ == 0) return;
    tick_armed_ = true;
    tick_timer_.expires_after(c_.options().watchdog_lease / 3);
    tick_timer_.async_wait([this](std::error_code ec) {
        tick_armed_ = false;
        if (ec || stopped_) return;
        tick();
        arm_tick();
    });
}

void renewal_service::tick() {
    ticks_.fetch_add(1, std::memory_order_relaxed);
    // A previous round still unanswered (server stalled): do not pile up more; the deadlines
    // decide loss.
    if (inflight_ != 0) return;
    const auto lease = c_.options().watchdog_lease;
    const std::string lease_ms = std::to_string(lease.count());
    for (lock_kind kind : {lock_kind::reentrant, lock_kind::simple}) {
        std::vector<std::shared_ptr<hold_state>> batch;
        const auto flush = [&] {
            if (batch.empty()) return;
            auto* op = new renew_op();
            op->holds.swap(batch);
            const auto n = op->holds.size();
            const auto& s = get_script(kind == lock_kind::reentrant ? script_id::lock_renew
                                                                    : script_id::simple_renew);
            op->storage.reserve(2 * n + 2);
            op->storage.push_back(std::to_string(n));
            for (auto& h : op->holds) op->storage.push_back(h->keys.key);
            op->storage.push_back(lease_ms);
            for (auto& h : op->holds) op->storage.push_back(h->owner);
            op->views.reserve(op->storage.size() + 2);
            op->views.push_back("EVALSHA");
            op->views.push_back(s.sha);
            op->views.insert(op->views.end(), op->storage.begin(), op->storage.end());
            op->args = op->views;
            op->eval_fallback = s.text;
            op->sent_at = std::chrono::steady_clock::now();
            op->deadline = op->sent_at + c_.options().command_timeout;
            op->done = [this, lease](renew_op& o, std::error_code ec, resp3::value&& v) {
                --inflight_;
                if (stopped_) return;
                const bool ok = !ec && v.kind == resp3::type::array &&
                                v.elements.size() == o.holds.size();
                if (ok) {
                    const auto until = o.sent_at + lease - drift_for(lease);
                    for (std::size_t i = 0; i < o.holds.size(); ++i) {
                        auto& h = o.holds[i];
                        if (h->released() || h->lost() || h->releasing) continue;
                        if (v.elements[i].integer == 1) {
                            h->set_valid_until(until);
                        } else {
                            forget(h.get());
                            h->mark_lost();
                        }
                    }
                }
                // Errors: nothing renewed; check_deadlines() declares loss when it is due.
                check_deadlines();
            };
            ++inflight_;
            batches_.fetch_add(1, std::memory_order_relaxed);
            c_.conn().submit(*op);
        };
        for (auto& [p, h] : holds_) {
            if (!h->watchdog || h->kind != kind || h->released() || h->lost() || h->releasing)
                continue;
            batch.push_back(h);
            if (batch.size() == batch_size) flush();
        }
        flush();
    }
}

void renewal_service::check_deadlines() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<hold_state>> lost;
    for (auto& [p, h] : holds_)
        if (!h->released() && !h->releasing && h->valid_until() <= now) lost.push_back(h);
    for (auto& h : lost) {
        forget(h.get());
        h->mark_lost();
    }
    arm_loss();
}

void renewal_service::arm_loss() {
    if (stopped_ || holds_.empty()) {
        loss_timer_.cancel();
        return;
    }
    auto earliest = std::chrono::steady_clock::time_point::max();
    for (auto& [p, h] : holds_) earliest = std::min(earliest, h->valid_until());
    if (loss_timer_.expiry() == earliest) return;
    loss_timer_.expires_at(earliest);
    loss_timer_.async_wait([this](std::error_code ec) {
        if (ec || stopped_) return;
        check_deadlines();
    });
}

} // namespace dlock::detail
