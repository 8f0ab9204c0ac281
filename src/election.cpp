// Leader election's public facade (dlock/election.hpp): dlock::leadership, dlock::observation and
// client::campaign / leader / observe over the backend seam (core/lock_backend.hpp). Nothing
// here depends on which backend it is.
#include "access.hpp"
#include "core/hold.hpp"
#include "core/lock_backend.hpp"
#include "core/observe_queue.hpp"

#include <dlock/client.hpp>
#include <dlock/election.hpp>

namespace dlock {

// ---- leadership ----------------------------------------------------------------------------

leadership::leadership(dlock::lease l, std::weak_ptr<detail::lock_backend> b) noexcept
    : lease_(std::move(l))
    , backend_(std::move(b)) {}

leadership::leadership(leadership&&) noexcept = default;

leadership& leadership::operator=(leadership&& o) noexcept {
    if (this != &o) {
        std::error_code ignore;
        resign(ignore);
        lease_ = std::move(o.lease_);
        backend_ = std::move(o.backend_);
    }
    return *this;
}

leadership::~leadership() {
    std::error_code ignore;
    resign(ignore);
}

const std::string& leadership::name() const {
    return lease_.name();
}

std::uint64_t leadership::epoch() const {
    return lease_.token().value_or(0);
}

void leadership::proclaim(std::string value) {
    std::error_code ec;
    proclaim(std::move(value), ec);
    throw_if(ec);
}

void leadership::proclaim(std::string value, std::error_code& ec) {
    ec.clear();
    const auto& h = detail::access::state(lease_);
    auto b = backend_.lock();
    if (!h || !b || h->lost() || h->released()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    if (value.size() > max_value_size || b->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    b->proclaim(*h, std::move(value), ec);
}

void leadership::resign() {
    std::error_code ec;
    resign(ec);
    throw_if(ec);
}

void leadership::resign(std::error_code& ec) {
    ec.clear();
    // A copy: the handle keeps the hold until the delete is confirmed, so that a resign that
    // timed out (errc::ambiguous) can be retried and waits for the same delete.
    auto h = detail::access::state(lease_);
    if (!h) return;
    h->release_blocking(ec);
    if (ec == errc::not_owner) ec.clear(); // lost: nothing left to delete
    if (!ec) (void)detail::access::take(lease_);
}

// ---- observation ---------------------------------------------------------------------------

observation::observation(observation&&) noexcept = default;

observation& observation::operator=(observation&& o) noexcept {
    if (this != &o) {
        stop();
        state_ = std::move(o.state_);
        queue_ = std::move(o.queue_);
        executor_ = std::move(o.executor_);
    }
    return *this;
}

observation::~observation() {
    stop();
}

void observation::stop() noexcept {
    if (auto s = std::move(state_)) s->stop();
    // After the observer: no state comes once the queue is closed.
    if (auto q = std::move(queue_)) q->close();
}

void observation::start_async_next(
    std::function<void(std::error_code, std::optional<leader_info>)> done) const {
    if (queue_) return queue_->next(std::move(done));
    // Stopped (or empty), or made with a callback, which gets the states instead.
    done(make_error_code(state_ ? errc::invalid_argument : errc::cancelled), std::nullopt);
}

// ---- client --------------------------------------------------------------------------------

namespace {

/// The backend for a blocking election call, or null with errc::invalid_argument on its I/O
/// thread (it would wait for itself).
detail::lock_backend* blocking_backend(const std::shared_ptr<detail::lock_backend>& b,
                                       std::error_code& ec) {
    ec = b->on_io_thread() ? make_error_code(errc::invalid_argument) : std::error_code{};
    return ec ? nullptr : b.get();
}

} // namespace

leadership client::campaign(std::string_view name, std::string value,
                            const campaign_options& opts) {
    std::error_code ec;
    auto l = campaign(name, std::move(value), opts, ec);
    if (ec == errc::invalid_argument)
        if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
    throw_with_detail(ec);
    throw_if(ec);
    return l;
}

leadership client::campaign(std::string_view name, std::string value, const campaign_options& opts,
                            std::error_code& ec) {
    auto* b = blocking_backend(backend_, ec);
    if (!b) return {};
    if (value.size() > leadership::max_value_size) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    auto h = b->campaign(name, std::move(value), opts, ec);
    if (!h || ec) return {};
    return detail::access::make_leadership(detail::access::make_lease(std::move(h)), backend_);
}

void client::start_async_campaign(std::string name, std::string value, const campaign_options& opts,
                                  std::function<void(std::error_code, leadership)> done) {
    std::weak_ptr<detail::lock_backend> b = backend_;
    backend_->async_campaign(
        std::move(name), std::move(value), opts,
        [b, done = std::move(done)](std::error_code e, std::shared_ptr<detail::hold> h) {
            if (e || !h) return done(e, leadership{});
            done(e, detail::access::make_leadership(detail::access::make_lease(std::move(h)), b));
        });
}

std::optional<leader_info> client::leader(std::string_view name) {
    std::error_code ec;
    auto l = leader(name, ec);
    if (ec == errc::invalid_argument)
        if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
    throw_with_detail(ec);
    throw_if(ec);
    return l;
}

std::optional<leader_info> client::leader(std::string_view name, std::error_code& ec) {
    auto* b = blocking_backend(backend_, ec);
    return b ? b->leader(name, ec) : std::nullopt;
}

observation client::observe(std::string_view name) {
    std::error_code ec;
    auto o = observe(name, ec);
    if (ec == errc::invalid_argument)
        if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
    throw_with_detail(ec);
    throw_if(ec);
    return o;
}

observation client::observe(std::string_view name, std::error_code& ec) {
    auto q = std::make_shared<detail::observe_queue>();
    auto o = observe(
        name, [q](const std::optional<leader_info>& s) { q->put(s); }, ec);
    if (ec) return {};
    return detail::access::make_observation(detail::access::observer_of(o), std::move(q),
                                            get_executor());
}

observation client::observe(std::string_view name,
                            std::function<void(const std::optional<leader_info>&)> cb) {
    std::error_code ec;
    auto o = observe(name, std::move(cb), ec);
    if (ec == errc::invalid_argument)
        if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
    throw_with_detail(ec);
    throw_if(ec);
    return o;
}

observation client::observe(std::string_view name,
                            std::function<void(const std::optional<leader_info>&)> cb,
                            std::error_code& ec) {
    auto* b = blocking_backend(backend_, ec);
    if (!b) return {};
    if (!cb) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    auto o = b->observe(name, std::move(cb), ec);
    if (!o || ec) return {};
    return detail::access::make_observation(std::move(o));
}

} // namespace dlock
