#include "zookeeper/semaphore.hpp"

#include "zookeeper/acquire.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail::zk {
namespace {
constexpr int max_rounds = 20;
} // namespace

semaphore_acquisition::semaphore_acquisition(zk_backend& b, std::string name, std::string dir,
                                             const acquire_options& opts, done_fn done)
    : backend_(&b)
    , name_(std::move(name))
    , dir_(std::move(dir))
    , opts_(opts)
    , started_(clock::now())
    , done_(std::move(done)) {
    if (opts.wait) deadline_ = started_ + std::max(*opts.wait, std::chrono::milliseconds(0));
}

void semaphore_acquisition::start() {
    take_gate();
}

std::optional<std::chrono::milliseconds> semaphore_acquisition::remaining() const {
    if (!deadline_) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - clock::now());
    return std::max(left, std::chrono::milliseconds(0));
}

void semaphore_acquisition::take_gate() {
    acquire_options o = opts_;
    o.kind = lock_kind::reentrant;
    o.wait = remaining();
    auto a = std::make_shared<acquisition>(
        *backend_, name_, dir_ + "/" + std::string(semaphore_gate), o,
        [self = shared_from_this()](std::error_code ec, std::shared_ptr<hold> h) {
            self->on_gate(ec, std::move(h));
        });
    a->internal();
    backend_->track(a);
    a->start();
}

void semaphore_acquisition::on_gate(std::error_code ec, std::shared_ptr<hold> gate) {
    if (ec || !gate) {
        backend_->counters().acquisition(static_cast<std::size_t>(lock_kind::semaphore), ec, false,
                                         false, clock::now() - started_);
        auto done = std::move(done_);
        return done(ec, nullptr);
    }
    gate_ = std::move(gate);
    take_lease();
}

void semaphore_acquisition::take_lease() {
    acquire_options o = opts_;
    o.wait = remaining();
    auto a = std::make_shared<acquisition>(
        *backend_, name_, dir_ + "/" + std::string(semaphore_leases), o,
        [self = shared_from_this()](std::error_code ec, std::shared_ptr<hold> h) {
            self->on_lease(ec, std::move(h));
        });
    backend_->track(a);
    a->start();
}

void semaphore_acquisition::open_gate() {
    // Curator releases its mutex in `finally`: the next client may count the leases now.
    if (auto g = std::move(gate_)) g->release_async([g](std::error_code) {});
}

void semaphore_acquisition::on_lease(std::error_code ec, std::shared_ptr<hold> lease) {
    open_gate();
    if (ec == acquisition::retry_error()) {
        // The lease node or the session vanished while counting: again through the gate.
        const auto left = remaining();
        if (++rounds_ <= max_rounds && (!left || left->count() > 0)) return take_gate();
        ec = rounds_ > max_rounds ? make_error_code(errc::unavailable) : std::error_code{};
        if (ec) backend_->set_error("lease node of " + dir_ + " kept vanishing (session expiries)");
    }
    auto done = std::move(done_);
    done(ec, std::move(lease));
}

} // namespace dlock::detail::zk
