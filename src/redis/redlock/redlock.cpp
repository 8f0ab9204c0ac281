// redis/redlock/redlock.cpp: redlock_impl (I/O thread, shutdown drain).
#include "redis/redlock/redlock_impl.hpp"

namespace dlock::detail {

// ---- redlock_impl ----------------------------------------------------------------------------

namespace {

const redlock_options& checked(const redlock_options& o) {
    using std::chrono::milliseconds;
    if (o.masters.empty()) throw error(errc::configuration_error, "dlock: Redlock needs masters");
    for (const auto& m : o.masters)
        if (m.kind != topology::standalone)
            throw error(errc::configuration_error,
                        "dlock: every Redlock master must be a standalone server (" + to_string(m) +
                            ")");
    if (o.node_timeout <= milliseconds(0) || o.retry_delay < milliseconds(0) ||
        o.retry_jitter < milliseconds(0))
        throw error(errc::configuration_error,
                    "dlock: Redlock node_timeout must be positive and retry_delay/jitter "
                    "not negative");
    if (o.watchdog_lease < milliseconds(30) || o.watchdog_lease <= o.node_timeout)
        throw error(errc::configuration_error,
                    "dlock: Redlock watchdog_lease must be at least 30 ms and above node_timeout");
    return o;
}

net::target target_of(const client_options& o) {
    net::target t;
    if (!o.unix_socket.empty()) {
        t.unix_socket = o.unix_socket;
    } else {
        t.host = o.endpoints.at(0).host;
        t.port = o.endpoints.at(0).port;
    }
    return t;
}

} // namespace

redlock_impl::redlock_impl(redlock_options opts)
    : metrics_(opts.masters.empty() ? log_options{} : opts.masters.front().log)
    , opts_(checked(opts))
    , tick_timer_(rt_.io())
    , drain_timer_(rt_.io())
    , watch_(rt_.io()) {
    for (auto m : opts_.masters) {
        if (m.command_timeout <= std::chrono::milliseconds(0) ||
            m.connect_timeout <= std::chrono::milliseconds(0))
            throw error(errc::configuration_error, "dlock: timeouts must be positive");
        // Every call goes through the I/O thread (rounds are decided there): no sync lane.
        m.sync_io = blocking_io::io_thread;
        addresses_.push_back(to_string(m));
        nodes_.push_back(std::make_unique<node>(rt_.io(), m, target_of(m), pubsub::mode::classic));
    }
}

redlock_impl::~redlock_impl() {
    shutdown();
}

void redlock_impl::start() {
    for (auto& n : nodes_)
        n->start();
    rt_.post([this] { arm_tick(); });
    rt_.start();
}

void redlock_impl::shutdown() {
    shut_.store(true); // seq_cst: begin_delete() counts, then reads shut_
    if (!rt_.running()) return;
    rt_.post([this] { drain(); });
    // On the I/O thread the thread detaches and the drain goes on after this returns;
    // elsewhere this joins, until stop_io() stopped the loop.
    rt_.finish();
}

/// I/O thread: cancels the acquisitions (their rounds are deleted everywhere) and the watchdog,
/// then waits until every delete in flight completed, for at most the longest command_timeout
/// (each command times out by then; the timer is a backstop), and stops.
void redlock_impl::drain() {
    std::vector<std::shared_ptr<redlock_acquire_op>> ops;
    {
        std::lock_guard lk(ops_mu_);
        for (auto& [p, w] : ops_)
            if (auto op = w.lock()) ops.push_back(std::move(op));
    }
    for (auto& op : ops)
        op->cancel();
    watch_.stop();
    tick_timer_.cancel();
    draining_ = true;
    auto bound = std::chrono::milliseconds(0);
    for (const auto& m : opts_.masters)
        bound = std::max(bound, m.command_timeout);
    // The connection checks its deadlines every command_timeout / 10, at most 100 ms.
    drain_timer_.expires_after(bound + std::chrono::milliseconds(200));
    drain_timer_.async_wait([this](std::error_code ec) {
        if (!ec) stop_io();
    });
    drained();
}

void redlock_impl::drained() {
    if (draining_ && deletes_.load() == 0) stop_io();
}

void redlock_impl::stop_io() {
    if (stopping_) return;
    stopping_ = true;
    drain_timer_.cancel();
    for (auto& n : nodes_)
        n->stop();
    rt_.release_work();
    rt_.stop_after_queued();
}

void redlock_impl::track(const std::shared_ptr<redlock_acquire_op>& op) {
    std::lock_guard lk(ops_mu_);
    ops_.emplace(op.get(), op);
}

void redlock_impl::untrack(const redlock_acquire_op* op) {
    std::lock_guard lk(ops_mu_);
    ops_.erase(op);
}

} // namespace dlock::detail
