#include "redis/client_impl.hpp"

#include "core/random.hpp"
#include "redis/hold.hpp"
#include "redis/net/wire.hpp"
#include "redis/renewal.hpp"

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

client_impl::client_impl(client_options opts)
    : opts_(adjusted(std::move(opts)))
    , id_(random_uuid())
    , work_(asio::make_work_guard(io_))
    , router_(io_, checked(opts_))
    , renewal_(std::make_unique<renewal_service>(*this)) {}

client_impl::~client_impl() {
    shutdown();
}

void client_impl::start() {
    // A new master may not know every lock this client holds: find out now, not a third of a
    // lease later.
    router_.on_master_change([this] { renewal_->renew_now(); });
    router_.start();
    renewal_->start();
    thread_ = std::thread([this] {
        thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
        io_.run();
    });
    thread_id_.store(thread_.get_id(), std::memory_order_release);
    // Cluster: the slot map, so that the first commands go to the right masters (bounded;
    // without it they reach the first seed's master and are MOVED).
    router_.wait_ready(std::chrono::steady_clock::now() + opts_.connect_timeout);
}

void client_impl::shutdown() {
    shut_.store(true, std::memory_order_release);
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
        // Waiters sleeping on a timer or a message would never wake again: end them now.
        for (auto& w : registry_.take_tracked())
            if (auto op = w.lock()) op->cancel();
        renewal_->stop();
        router_.stop_subscribers();
    });
    router_.stop();
    work_.reset();
    // Give in-flight completions a chance, then stop the loop for good.
    asio::post(io_, [this] { io_.stop(); });
    if (on_io_thread())
        thread_.detach();
    else
        thread_.join();
}

bool client_impl::on_io_thread() const noexcept {
    return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire);
}

resp3::value client_impl::run(node& n, std::span<const std::string_view> args, std::error_code& ec,
                              std::string_view eval_fallback) {
    if (on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    const auto deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    if (auto* lane = lane_for(n)) {
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

// ---- hold_state -----------------------------------------------------------------------------

std::chrono::nanoseconds drift_for(std::chrono::milliseconds lease) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(lease) / 100 +
           std::chrono::milliseconds(2);
}

void hold_state::end_released() noexcept {
    mark_released();
    end_local();
}

void hold_state::end_lost() {
    // The local count goes first: a callback that acquires again must not queue behind us.
    end_local();
    mark_lost();
}

void hold_state::end_local() noexcept {
    if (!local_counted_.exchange(false, std::memory_order_acq_rel)) return;
    if (auto c = client.lock()) c->registry().local_end(*protocol, keys.key);
}

} // namespace dlock::detail
