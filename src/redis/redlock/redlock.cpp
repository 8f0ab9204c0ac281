// redis/redlock/redlock.cpp: redlock_impl (I/O thread, shutdown drain) and the public facade.
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
    : opts_(checked(opts))
    , tick_timer_(rt_.io())
    , loss_timer_(rt_.io())
    , drain_timer_(rt_.io()) {
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
    std::vector<std::shared_ptr<acquire_op>> ops;
    {
        std::lock_guard lk(ops_mu_);
        for (auto& [p, w] : ops_)
            if (auto op = w.lock()) ops.push_back(std::move(op));
    }
    for (auto& op : ops)
        op->cancel();
    {
        std::lock_guard lk(watch_mu_);
        stopped_ = true;
        holds_.clear();
    }
    tick_timer_.cancel();
    loss_timer_.cancel();
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

void redlock_impl::track(const std::shared_ptr<acquire_op>& op) {
    std::lock_guard lk(ops_mu_);
    ops_.emplace(op.get(), op);
}

void redlock_impl::untrack(const acquire_op* op) {
    std::lock_guard lk(ops_mu_);
    ops_.erase(op);
}

} // namespace dlock::detail

// ---- the public facade -----------------------------------------------------------------------

namespace dlock {

namespace {
redlock_options with_urls(const std::vector<std::string>& urls, redlock_options o) {
    o.masters.clear();
    for (const auto& u : urls)
        o.masters.push_back(parse_url(u));
    return o;
}
} // namespace

redlock::redlock(const std::vector<std::string>& urls, redlock_options opts)
    : redlock(with_urls(urls, std::move(opts))) {}

redlock::redlock(redlock_options opts)
    : impl_(std::make_shared<detail::redlock_impl>(std::move(opts))) {
    impl_->start();
}

redlock::~redlock() {
    if (impl_) impl_->shutdown();
}
redlock::redlock(redlock&&) noexcept = default;
redlock& redlock::operator=(redlock&& o) noexcept {
    if (this != &o) {
        if (impl_) impl_->shutdown();
        impl_ = std::move(o.impl_);
    }
    return *this;
}

const redlock_options& redlock::options() const noexcept {
    return impl_->options();
}
std::size_t redlock::masters() const noexcept {
    return impl_->size();
}
metrics_snapshot redlock::metrics() const {
    return impl_->metrics_snapshot_now();
}

std::size_t redlock::quorum() const noexcept {
    return detail::quorum_round::quorum_of(impl_->size());
}

lease redlock::acquire(std::string_view name, const acquire_options& opts) {
    std::error_code ec;
    auto l = acquire(name, opts, ec);
    throw_if(ec);
    return l;
}

lease redlock::acquire(std::string_view name, const acquire_options& opts, std::error_code& ec) {
    return acquire_with_votes(name, opts, ec).held;
}

redlock_acquisition redlock::acquire_with_votes(std::string_view name, const acquire_options& opts,
                                                std::error_code& ec) {
    ec.clear();
    if (impl_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    detail::completion_flag flag;
    redlock_acquisition out;
    start_acquire(std::string(name), opts, [&](std::error_code e, redlock_acquisition a) {
        ec = e;
        out = std::move(a);
        flag.set();
    });
    flag.wait();
    return out;
}

void redlock::start_acquire(std::string name, const acquire_options& opts,
                            std::function<void(std::error_code, redlock_acquisition)> done) {
    auto r = impl_;
    std::error_code ec;
    auto keys = detail::protocol_of(lock_kind::simple).keys(name, ec);
    const auto lease_ms = opts.lease.value_or(r->options().watchdog_lease);
    if (!ec &&
        (lease_ms <= r->options().node_timeout || (opts.retry && opts.retry->attempts == 0) ||
         (opts.retry && (opts.retry->delay.count() < 0 || opts.retry->jitter.count() < 0))))
        ec = make_error_code(errc::invalid_argument);
    if (!ec && r->shut_down()) ec = make_error_code(errc::cancelled);
    if (ec) return asio::post(r->io(), [done = std::move(done), ec] { done(ec, {}); });
    detail::retry_schedule s;
    const auto wait = opts.wait ? std::max(*opts.wait, std::chrono::milliseconds(0))
                                : std::optional<std::chrono::milliseconds>{};
    if (wait) s.wait_deadline = std::chrono::steady_clock::now() + *wait;
    if (wait && wait->count() == 0) s.attempts = 1;
    s.delay = r->options().retry_delay;
    s.jitter = r->options().retry_jitter;
    if (opts.retry) {
        s.attempts = s.attempts == 1 ? 1 : opts.retry->attempts;
        s.delay = opts.retry->delay;
        s.jitter = opts.retry->jitter;
    }
    auto op = std::make_shared<detail::acquire_op>(r, std::move(name), std::move(keys), lease_ms,
                                                   !opts.lease.has_value(), s, std::move(done));
    op->start();
}

std::vector<redlock_vote> redlock::votes(const lease& l) const {
    auto h = std::dynamic_pointer_cast<detail::redlock_hold>(detail::access::state(l));
    return h ? h->votes() : std::vector<redlock_vote>{};
}

asio::any_io_executor redlock::get_executor() const {
    return impl_->io().get_executor();
}

} // namespace dlock
