// dlock::lease: the RAII handle of one acquisition by an owner id of its own. Backend-neutral:
// everything it does goes through detail::hold (core/hold.hpp), which the single-node Redis
// hold and the Redlock hold implement.
#include "core/hold.hpp"

#include <dlock/lease.hpp>

namespace dlock {

lease::lease(lease&&) noexcept = default;

lease& lease::operator=(lease&& o) noexcept {
    if (this != &o) {
        std::error_code ignore;
        release(ignore);
        state_ = std::move(o.state_);
    }
    return *this;
}

lease::~lease() {
    std::error_code ignore;
    release(ignore);
}

const std::string& lease::name() const {
    static const std::string empty;
    return state_ ? state_->name() : empty;
}

std::optional<std::uint64_t> lease::token() const {
    return state_ ? state_->fencing_token() : std::nullopt;
}

std::chrono::steady_clock::time_point lease::valid_until() const {
    return state_ ? state_->held_until() : std::chrono::steady_clock::time_point{};
}

bool lease::lost() const noexcept {
    return state_ && state_->lost();
}

std::stop_token lease::stop_token() const {
    return state_ ? state_->stop_token() : std::stop_token{};
}

std::optional<dlock::loss_cause> lease::loss_cause() const noexcept {
    if (!state_ || !state_->lost()) return std::nullopt;
    return state_->cause();
}

void lease::on_lost(std::function<void()> cb) {
    if (state_) state_->on_lost(std::move(cb));
}

std::stop_token lease::warning_token() const {
    return state_ ? state_->warning_token() : std::stop_token{};
}

void lease::on_warning(std::function<void()> cb) {
    if (state_) state_->on_warning(std::move(cb));
}

bool lease::warned() const noexcept {
    return state_ && state_->warned();
}

void lease::release() {
    std::error_code ec;
    release(ec);
    throw_if(ec);
}

void lease::release(std::error_code& ec) {
    ec.clear();
    auto h = std::move(state_);
    if (h) h->release_blocking(ec);
}

void lease::extend(std::chrono::milliseconds lease_ms) {
    std::error_code ec;
    extend(lease_ms, ec);
    throw_if(ec);
}

void lease::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    ec.clear();
    if (!state_) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    state_->extend(lease_ms, ec);
}

asio::any_io_executor lease::executor_of(const std::shared_ptr<detail::hold>& h) {
    return h ? h->executor() : asio::any_io_executor{};
}

void lease::start_extend(std::shared_ptr<detail::hold> h, std::chrono::milliseconds lease_ms,
                         std::function<void(std::error_code)> done) {
    if (!h) return done(make_error_code(errc::not_owner));
    h->extend_async(lease_ms, std::move(done));
}

void lease::start_release(std::shared_ptr<detail::hold> h,
                          std::function<void(std::error_code)> done) {
    if (!h) return done({});
    h->release_async(std::move(done));
}

} // namespace dlock
