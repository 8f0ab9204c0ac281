#include "redis/renewal.hpp"

#include "core/log.hpp"
#include "redis/client.hpp"
#include "redis/hold.hpp"

#include <asio/post.hpp>

#include <algorithm>
#include <functional>
#include <future>
#include <iterator>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock::detail {
namespace {

/// One batched renewal script call: owns its arguments and the holds it renews.
class renew_op final : public request {
public:
    using done_fn = std::function<void(renew_op&, std::error_code, resp3::value&&)>;
    std::vector<std::shared_ptr<redis_hold>> holds;
    std::vector<const lock_holder*> raw;
    std::vector<char> ok;
    command cmd;
    std::chrono::steady_clock::time_point sent_at;
    done_fn done;

    void complete(std::error_code ec, resp3::value&& reply) override {
        done(*this, ec, std::move(reply));
        delete this;
    }
};

bool active(const redis_hold& h) {
    return !h.released() && !h.lost() && !h.releasing;
}

} // namespace

renewal_service::renewal_service(redis_client& c)
    : c_(c)
    , tick_timer_(c.io())
    , watch_(c.io()) {}

void renewal_service::start() {
    asio::post(c_.io(), [this] { arm_tick(); });
}

void renewal_service::stop() {
    stopped_ = true;
    due_.clear();
    watch_.stop();
    tick_timer_.cancel();
}

void renewal_service::expiry::expire(redis_hold& h) {
    h.end_lost(h.renew_server_error.load(std::memory_order_relaxed) ? loss_cause::server_error
                                                                    : loss_cause::deadline);
}

void renewal_service::arm_tick() {
    // The tick runs for the client's whole life (one wake-up per lease/3 when idle), so adding
    // the first watchdog hold never needs a hop to this thread.
    tick_timer_.expires_after(c_.options().watchdog_lease / 3);
    tick_timer_.async_wait([this](std::error_code ec) {
        if (ec) return;
        tick();
        arm_tick();
    });
}

void renewal_service::tick() {
    ticks_.fetch_add(1, std::memory_order_relaxed);
    // A previous round still unanswered or unsent (server stalled): do not pile up more; the
    // deadlines decide loss. Said once per round: its holds are not being renewed.
    if (round_open()) return stalled();
    // One batch per (node, slot where the topology needs it, kind): a script's keys must be
    // on one node (and, on a Cluster, in one slot), and one script renews one kind.
    struct group_key {
        node* where;
        std::uint16_t slot;
        const lock_protocol* protocol;
        bool operator==(const group_key&) const = default;
    };
    struct group_hash {
        std::size_t operator()(const group_key& k) const noexcept {
            return std::hash<const void*>{}(k.where) ^ (std::size_t{k.slot} << 1) ^
                   (std::hash<const void*>{}(k.protocol) << 3);
        }
    };
    std::unordered_map<group_key, std::vector<std::shared_ptr<redis_hold>>, group_hash> groups;
    const bool by_slot = c_.router().batches_by_slot();
    // Cluster: the slot's node as of the latest map, not the one the hold was taken on
    // (after a resharding that one would answer MOVED to every renewal).
    const bool open = watch_.for_each([&](const std::shared_ptr<redis_hold>& h) {
        if (h->watchdog && active(*h))
            groups[{by_slot ? &c_.router().for_slot(h->keys.slot) : h->where,
                    by_slot ? h->keys.slot : std::uint16_t{0}, h->protocol}]
                .push_back(h);
    });
    if (!open) return;
    for (auto& [group, holds] : groups)
        for (std::size_t first = 0; first < holds.size(); first += batch_size) {
            const auto last = std::min(holds.size(), first + batch_size);
            due_.push_back(
                {group.where,
                 group.protocol,
                 {std::make_move_iterator(holds.begin() + static_cast<std::ptrdiff_t>(first)),
                  std::make_move_iterator(holds.begin() + static_cast<std::ptrdiff_t>(last))}});
        }
    send_due();
}

void renewal_service::send_due() {
    const auto lease = c_.options().watchdog_lease;
    while (!stopped_ && inflight_ < max_inflight && !due_.empty()) {
        auto batch = std::move(due_.back());
        due_.pop_back();
        auto* op = new renew_op();
        // A hold released while its batch waited is not renewed (its answer would be ignored).
        for (auto& h : batch.holds)
            if (active(*h)) op->holds.push_back(std::move(h));
        if (op->holds.empty()) {
            delete op;
            continue;
        }
        op->raw.reserve(op->holds.size());
        for (auto& h : op->holds)
            op->raw.push_back(h.get());
        batch.protocol->renew(op->cmd, op->raw, lease);
        op->args = op->cmd.args();
        op->eval_fallback = op->cmd.eval_fallback();
        op->sent_at = std::chrono::steady_clock::now();
        op->deadline = op->sent_at + c_.options().command_timeout;
        op->done = [this, lease](renew_op& o, std::error_code ec, resp3::value&& v) {
            --inflight_;
            if (!round_open()) stall_logged_ = false;
            if (lock_protocol::read_renew(ec, v, o.holds.size(), o.ok)) {
                const auto until = o.sent_at + lease - drift_for(lease);
                std::uint64_t renewed = 0;
                for (std::size_t i = 0; i < o.holds.size(); ++i) {
                    auto& h = o.holds[i];
                    if (!active(*h)) continue;
                    if (o.ok[i]) {
                        c_.metrics().renewal_slack(h->valid_until());
                        h->set_valid_until(until);
                        h->renew_server_error.store(false, std::memory_order_relaxed);
                        ++renewed;
                    } else {
                        remove(h);
                        h->end_lost(); // "not yours": gone or taken (end_lost asks)
                    }
                }
                c_.metrics().renewals(renewed, 0);
            } else {
                // Errors: nothing renewed; the watch declares loss when it is due.
                renewal_failed(o.holds, ec, v);
            }
            send_due();
            watch_.check();
        };
        ++inflight_;
        batches_.fetch_add(1, std::memory_order_relaxed);
        c_.metrics().renewal_batch(op->holds.size());
        batch.where->conn().submit(*op);
    }
}

std::optional<std::pair<std::uint64_t, std::uint64_t>>
renewal_service::between_rounds(std::chrono::milliseconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    do {
        std::promise<std::optional<std::pair<std::uint64_t, std::uint64_t>>> p;
        asio::post(c_.io(), [&] {
            p.set_value(round_open() ? std::nullopt
                                     : std::optional(std::pair(ticks(), batches_sent())));
        });
        if (auto v = p.get_future().get()) return v;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } while (std::chrono::steady_clock::now() < give_up);
    return std::nullopt;
}

void renewal_service::stalled() {
    const auto& log_opts = c_.options().log;
    if (std::exchange(stall_logged_, true) || !log_enabled(log_opts, log_level::warning)) return;
    std::size_t holds = 0;
    const redis_hold* first = nullptr;
    watch_.for_each([&](const std::shared_ptr<redis_hold>& h) {
        if (!h->watchdog || !active(*h)) return;
        if (holds++ == 0) first = h.get();
    });
    if (first != nullptr)
        log_renewal_failed(log_opts, holds, first->keys.key, first->protocol->name(),
                           "the last renewal, sent a third of the lease ago, is not answered");
}

void renewal_service::renewal_failed(const std::vector<std::shared_ptr<redis_hold>>& holds,
                                     std::error_code ec, const resp3::value& v) {
    c_.metrics().renewals(0, holds.size());
    const bool server_error = !ec && v.is_error();
    for (auto& h : holds)
        h->renew_server_error.store(server_error, std::memory_order_relaxed);
    const auto& log_opts = c_.options().log;
    if (!log_enabled(log_opts, log_level::warning) || holds.empty()) return;
    const auto why =
        ec ? ec.message() : std::string(server_error ? bounded(v.str) : "malformed reply");
    // The first lock names the batch (all of one kind on one node); never owners or tokens.
    log_renewal_failed(log_opts, holds.size(), holds.front()->keys.key,
                       holds.front()->protocol->name(), why);
}

} // namespace dlock::detail
