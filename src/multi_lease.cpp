// dlock::multi_lease: the handle of a multi-lock's members (dlock/multi_lock.hpp): loss, lease
// and release of all of them as one.
#include "access.hpp"
#include "core/hold.hpp"
#include "multi_state.hpp"

#include <dlock/multi_lock.hpp>

#include <mutex>

namespace dlock {

// ---- multi_lease -------------------------------------------------------------------------

multi_lease::multi_lease(std::shared_ptr<detail::multi_state> s) noexcept
    : state_(std::move(s)) {}

multi_lease::multi_lease(multi_lease&&) noexcept = default;

multi_lease& multi_lease::operator=(multi_lease&& o) noexcept {
    if (this != &o) {
        std::error_code ignore;
        release(ignore);
        state_ = std::move(o.state_);
    }
    return *this;
}

multi_lease::~multi_lease() {
    std::error_code ignore;
    release(ignore);
}

std::span<const lease> multi_lease::members() const noexcept {
    if (!state_) return {};
    return state_->members;
}

std::chrono::steady_clock::time_point multi_lease::valid_until() const {
    if (!state_ || state_->members.empty()) return {};
    return detail::earliest(state_->members);
}

bool multi_lease::lost() const noexcept {
    return state_ && state_->lost();
}

std::stop_token multi_lease::stop_token() const {
    return state_ ? state_->stop_token() : std::stop_token{};
}

void multi_lease::on_lost(std::function<void()> cb) {
    if (state_) state_->on_lost(std::move(cb));
}

void multi_lease::release() {
    std::error_code ec;
    release(ec);
    throw_if(ec);
}

void multi_lease::release(std::error_code& ec) {
    ec.clear();
    auto s = std::move(state_);
    if (!s || s->released()) return;
    for (std::size_t j = s->members.size(); j-- > 0;) {
        std::error_code e;
        s->members[j].release(e);
        if (!ec) ec = e;
    }
    s->end_released();
}

void multi_lease::extend(std::chrono::milliseconds lease_ms) {
    std::error_code ec;
    extend(lease_ms, ec);
    throw_if(ec);
}

void multi_lease::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    ec.clear();
    if (!state_ || state_->released()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    for (auto& m : state_->members) {
        std::error_code e;
        m.extend(lease_ms, e);
        if (!ec) ec = e;
    }
}

asio::any_io_executor multi_lease::executor_of(const std::shared_ptr<detail::multi_state>& s) {
    // The backend's I/O executor, as a member's hold knows it (empty once it is gone).
    if (!s || s->members.empty()) return {};
    const auto& h = detail::access::state(s->members.front());
    return h ? h->executor() : asio::any_io_executor{};
}

void multi_lease::start_release(std::shared_ptr<detail::multi_state> s,
                                std::function<void(std::error_code)> done) {
    if (!s || s->released()) return done({});
    const std::size_t n = s->members.size();
    if (n == 0) {
        s->end_released();
        return done({});
    }
    struct countdown {
        std::mutex mu;
        std::size_t left;
        std::vector<std::error_code> errors; // by member
        std::function<void(std::error_code)> done;
    };
    auto cd = std::make_shared<countdown>();
    cd->left = n;
    cd->errors.resize(n);
    cd->done = std::move(done);
    for (std::size_t j = n; j-- > 0;)
        s->members[j].async_release([s, cd, j](std::error_code ec) {
            {
                std::lock_guard lk(cd->mu);
                cd->errors[j] = ec;
                if (--cd->left != 0) return;
            }
            s->end_released();
            std::error_code first; // in release order: the last member first
            for (std::size_t k = cd->errors.size(); k-- > 0;)
                if (!first) first = cd->errors[k];
            cd->done(first);
        });
}

} // namespace dlock
