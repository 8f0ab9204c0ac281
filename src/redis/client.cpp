#include "redis/client.hpp"

#include "core/log.hpp"
#include "core/random.hpp"
#include "redis/hold.hpp"
#include "redis/net/wire.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"
#include "redis/topology/cluster.hpp"

namespace dlock::detail {

namespace {
std::atomic<std::uint64_t> owner_counter{0};
} // namespace

std::uint64_t new_owner_id() noexcept {
    return owner_counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::uint64_t this_thread_owner_id() noexcept {
    thread_local const std::uint64_t id = new_owner_id();
    return id;
}

namespace {
const client_options& checked(const client_options& o) {
    if (o.watchdog_lease < std::chrono::milliseconds(30))
        throw error(errc::configuration_error, "dlock: watchdog_lease must be at least 30 ms");
    if (o.command_timeout <= std::chrono::milliseconds(0) ||
        o.connect_timeout <= std::chrono::milliseconds(0))
        throw error(errc::configuration_error, "dlock: timeouts must be positive");
    if (o.wait_replicas.replicas < 0 || o.wait_replicas.timeout.count() < 0)
        throw error(errc::configuration_error, "dlock: wait_replicas must not be negative");
    if (o.failover_lock_delay && o.failover_lock_delay->count() < 0)
        throw error(errc::configuration_error, "dlock: failover_lock_delay must not be negative");
    return o;
}

client_options adjusted(client_options o) {
    // A local hand-over writes the lock for the next owner inside a release script; with
    // replication safety on, every grant must be followed by its WAIT, which the hand-over
    // path does not do: waiters of this client then take the lock with their own attempt.
    if (o.wait_replicas.replicas > 0) o.handover = false;
    return o;
}
} // namespace

redis_client::redis_client(client_options opts)
    : metrics_(opts.log) // before opts_ (declared first): the sink every hold's loss reaches
    , opts_(adjusted(std::move(opts)))
    , id_(random_uuid())
    , router_(rt_.io(), checked(opts_))
    , renewal_(std::make_unique<renewal_service>(*this)) {}

redis_client::~redis_client() {
    shutdown();
}

void redis_client::start() {
    // A new master may not know every lock this client holds: find out now, not a third of a
    // lease later.
    router_.on_master_change([this](const std::string& address) {
        note_topology_change(address);
        renewal_->renew_now();
    });
    router_.start();
    renewal_->start();
    check_eviction_policy();
    rt_.start();
    // Cluster: the slot map, so that the first commands go to the right masters (bounded;
    // without it they reach the first seed's master and are MOVED).
    router_.wait_ready(std::chrono::steady_clock::now() + opts_.connect_timeout);
}

void redis_client::shutdown() {
    shut_.store(true, std::memory_order_release);
    if (!rt_.running()) return;
    rt_.post([this] {
        // Waiters sleeping on a timer or a message would never wake again: end them now.
        for (auto& w : registry_.take_tracked())
            if (auto op = w.lock()) op->cancel();
        renewal_->stop();
        router_.stop_subscribers();
    });
    router_.stop();
    rt_.release_work();
    // Give in-flight completions a chance, then stop the loop for good; on the I/O thread the
    // thread detaches and the loop ends after this handler.
    rt_.stop_after_queued();
    rt_.finish();
}

metrics_snapshot redis_client::metrics_snapshot_now() const {
    auto s = metrics_.snapshot();
    if constexpr (metrics_enabled) {
        for (const auto& n : router_.nodes())
            n->add_counters(s);
        // A Cluster owns its nodes (every shard seen); the router's list is empty there.
        if (auto* cl = router_.cluster_map())
            cl->for_each_node([&s](node& n) { n.add_counters(s); });
    }
    return s;
}

void redis_client::note_topology_change(std::string_view new_address) {
    metrics_.topology_change();
    log(opts_.log, log_level::warning, "topology changed: following a new master",
        {{"address", new_address}});
}

namespace {

/// CONFIG GET maxmemory-policy, queued for the first connection. Its deadline is a connect
/// plus a command budget (a queued request never blocks others, but one in flight with no
/// deadline would hide theirs from the timeout check); never written by then (server not up
/// yet), it queues itself again, until the client shuts down (cancelled).
struct policy_check final : request {
    std::string_view cmd[3] = {"CONFIG", "GET", "maxmemory-policy"};
    std::shared_ptr<net::connection> conn_;
    log_options log_;
    policy_check(std::shared_ptr<net::connection> c, log_options o)
        : conn_(std::move(c))
        , log_(std::move(o)) {
        args = cmd;
    }
    void submit() {
        const auto& o = conn_->options();
        deadline = std::chrono::steady_clock::now() + o.connect_timeout + o.command_timeout;
        conn_->submit(*this);
    }
    void complete(std::error_code ec, resp3::value&& v) override {
        if (ec == errc::unavailable) return submit(); // never written: try after the connect
        report(ec, v);
        delete this;
    }
    void report(std::error_code ec, const resp3::value& v) const {
        if (ec == errc::cancelled) return; // shut down before the first connect
        if (ec) {
            log(log_, log_level::info, "could not check the server's maxmemory-policy",
                {{"error", ec.message()}});
            return;
        }
        if (v.is_error()) {
            // CONFIG disabled or renamed (managed Redis): nothing to check.
            log(log_, log_level::info, "could not check the server's maxmemory-policy",
                {{"error", bounded(v.str)}});
            return;
        }
        std::string_view policy;
        for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
            if (v.elements[i].str == "maxmemory-policy") policy = v.elements[i + 1].str;
        if (policy.empty()) {
            log(log_, log_level::info, "could not check the server's maxmemory-policy",
                {{"error", "no value in the reply"}});
        } else if (policy != "noeviction") {
            log(log_, log_level::warning,
                "the server's maxmemory-policy may evict locks; use noeviction",
                {{"maxmemory-policy", policy}});
        } else {
            log(log_, log_level::debug, "the server's maxmemory-policy is noeviction");
        }
    }
};

} // namespace

void redis_client::check_eviction_policy() {
    if (!opts_.log.sink) return; // nobody to tell: no extra command
    auto& conn = router_.any().conn();
    (new policy_check(conn.shared_from_this(), opts_.log))->submit();
}

resp3::value redis_client::run(node& n, std::span<const std::string_view> args, std::error_code& ec,
                               std::string_view eval_fallback, bool lane_past_waiters) {
    if (on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    const auto deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    // The lane whether or not acquisitions of this client wait (lane_for() is for a first
    // attempt, which must not pass them): a command here is no attempt. A release is
    // (run_release(), client.hpp).
    if (auto* lane = lane_past_waiters ? n.lane() : lane_for(n)) {
        ec.clear();
        resp3::value out;
        // A master that moved answers READONLY (or LOADING...) here before the shared
        // connection noticed: that one re-sends it to the new master.
        if (lane->call(n.conn(), args, eval_fallback, deadline, out, ec) ==
                net::sync_lane::result::done &&
            !(n.follows_master() && net::topology_error(out)))
            return out;
    }
    sync_request r;
    r.args = args;
    r.eval_fallback = eval_fallback;
    r.deadline = deadline;
    n.conn().submit(r);
    r.wait();
    ec = r.ec_;
    return std::move(r.reply_);
}

// ---- redis_hold -----------------------------------------------------------------------------

void redis_hold::end_released() noexcept {
    const bool first = mark_released();
    if (!metrics_enabled && !local_counted_.load(std::memory_order_acquire)) return;
    const auto c = client.lock(); // one lock of the client for both
    if (first && c) c->metrics().hold_ended(std::chrono::steady_clock::now() - acquired_at);
    end_local(c.get());
}

void redis_hold::end_lost(std::optional<loss_cause> cause) {
    const auto c = client.lock();
    // The local count goes first: a callback that acquires again must not queue behind us.
    end_local(c.get());
    if (!mark_lost(cause) || !c) return;
    c->metrics().hold_ended(std::chrono::steady_clock::now() - acquired_at);
    report_loss(*c, std::static_pointer_cast<const redis_hold>(shared_from_this()), cause);
}

std::string_view redis_hold::kind_label() const noexcept {
    return protocol->name();
}

void redis_hold::end_local() noexcept {
    if (!local_counted_.load(std::memory_order_acquire)) return;
    end_local(client.lock().get());
}

void redis_hold::end_local(redis_client* c) noexcept {
    if (!local_counted_.exchange(false, std::memory_order_acq_rel)) return;
    if (c) c->registry().local_end(*protocol, keys.key);
}

// ---- losses ---------------------------------------------------------------------------------

namespace {

void count_loss(redis_client& c, const redis_hold& h, loss_cause cause) {
    h.set_cause(cause); // lease::loss_cause(): a "not yours" is diagnosed after the loss
    c.metrics().loss(cause);
    h.log_loss(); // "lock lost" with its cause, as every backend says it (core/warning.cpp)
}

} // namespace

void report_loss(redis_client& c, std::shared_ptr<const redis_hold> h,
                 std::optional<loss_cause> cause) {
    if (cause || c.shut_down() ||
        (!metrics_enabled && !log_enabled(c.options().log, log_level::warning)))
        return count_loss(c, *h, cause.value_or(loss_cause::undetermined));
    // "Not yours": ask whether the lock still exists (taken by another owner) or not (gone:
    // expired, deleted, evicted, lost in a failover). Racy by nature, and only a diagnosis.
    const redis_hold& r = *h;
    submit_detached(
        c, *r.where, h, [&](command& cmd) { r.protocol->locked_query(cmd, r.keys); },
        [&c, self = c.shared_from_this(), h](std::error_code ec, resp3::value&& v) {
            const auto why = ec || !v.is_integer() ? loss_cause::undetermined
                             : v.integer == 0      ? loss_cause::gone
                                                   : loss_cause::taken;
            count_loss(c, *h, why);
        });
}

} // namespace dlock::detail
