// detail::redlock_backend (backend.hpp): the seam's Redlock side: acquisition (the rounds of
// redlock_acquire_op), the client's identity, metrics and errors. The queries are in queries.cpp.
#include "redis/redlock/backend.hpp"

#include "access.hpp"
#include "redis/redlock/redlock_impl.hpp"

namespace dlock::detail {

redlock_backend::redlock_backend(redlock_options opts)
    : r_(std::make_shared<redlock_impl>(std::move(opts)))
    , id_(random_uuid()) {
    r_->start();
}

redlock_backend::~redlock_backend() {
    shutdown();
}

void redlock_backend::shutdown() noexcept {
    r_->shutdown();
}

asio::any_io_executor redlock_backend::executor() const {
    return r_->io().get_executor();
}
bool redlock_backend::on_io_thread() const noexcept {
    return r_->on_io_thread();
}
metrics_snapshot redlock_backend::metrics() const {
    return r_->metrics_snapshot_now();
}

std::string redlock_backend::last_error_detail() const {
    std::string out;
    for (std::size_t i = 0; i < r_->size(); ++i) {
        const auto why = r_->at(i).conn().last_failure();
        if (why.empty()) continue;
        if (!out.empty()) out += "; ";
        // The connection names its address in most reasons; the master's index says which.
        out += "master " + std::to_string(i) + ": " + why;
    }
    return out;
}

std::error_code redlock_backend::check_name(std::string_view name, lock_kind kind) const {
    if (!supports(kind)) return make_error_code(errc::unsupported);
    std::error_code ec;
    (void)layout().keys(name, ec);
    return ec;
}

void redlock_backend::start_acquire(
    std::string name, const acquire_options& opts,
    std::function<void(std::error_code, redlock_acquisition)> done) {
    auto r = r_;
    std::error_code ec = check_name(name, opts.kind);
    const auto keys = ec ? lock_keys{} : layout().keys(name, ec);
    const auto lease_ms = opts.lease.value_or(r->options().watchdog_lease);
    if (!ec &&
        (lease_ms <= r->options().node_timeout || (opts.retry && opts.retry->attempts == 0) ||
         (opts.retry && (opts.retry->delay.count() < 0 || opts.retry->jitter.count() < 0))))
        ec = make_error_code(errc::invalid_argument);
    if (!ec && r->shut_down()) ec = make_error_code(errc::cancelled);
    if (ec) return asio::post(r->io(), [done = std::move(done), ec] { done(ec, {}); });
    retry_schedule s;
    const auto wait = opts.wait ? std::max(*opts.wait, std::chrono::milliseconds(0))
                                : std::optional<std::chrono::milliseconds>{};
    if (wait) s.wait_deadline = clock::now() + *wait;
    if (wait && wait->count() == 0) s.attempts = 1;
    s.delay = r->options().retry_delay;
    s.jitter = r->options().retry_jitter;
    if (opts.retry) {
        s.attempts = s.attempts == 1 ? 1 : opts.retry->attempts;
        s.delay = opts.retry->delay;
        s.jitter = opts.retry->jitter;
    }
    auto op = std::make_shared<redlock_acquire_op>(r, std::move(name), keys, lease_ms,
                                                   !opts.lease.has_value(), s, std::move(done));
    op->start();
}

redlock_acquisition redlock_backend::acquire_with_votes(std::string_view name,
                                                        const acquire_options& opts,
                                                        std::error_code& ec) {
    ec.clear();
    if (on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    if (!supports(opts.kind)) { // synchronously, as the seam's contract asks
        ec = make_error_code(errc::unsupported);
        return {};
    }
    completion_flag flag;
    redlock_acquisition out;
    start_acquire(std::string(name), opts, [&](std::error_code e, redlock_acquisition a) {
        ec = e;
        out = std::move(a);
        flag.set();
    });
    flag.wait();
    return out;
}

std::shared_ptr<hold> redlock_backend::acquire(std::string_view name, const acquire_options& opts,
                                               std::error_code& ec) {
    auto a = acquire_with_votes(name, opts, ec);
    return ec ? nullptr : access::take(a.held);
}

void redlock_backend::async_acquire(
    std::string name, const acquire_options& opts,
    std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    start_acquire(std::move(name), opts,
                  [done = std::move(done)](std::error_code ec, redlock_acquisition a) {
                      done(ec, ec ? nullptr : access::take(a.held));
                  });
}

} // namespace dlock::detail
