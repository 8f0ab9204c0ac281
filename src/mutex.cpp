// dlock::basic_mutex: thread-bound TimedLockable locks over the lock object that the client's
// backend makes (lock_backend::make_lock_object): server-counted re-entry on Redis, locally
// counted where the server keeps no counts. Nothing here depends on which backend it is.
#include "access.hpp"
#include "core/lock_backend.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <algorithm>

namespace dlock {

namespace {
/// The throwing form of a call that takes an error_code.
template <class F>
auto or_throw(F&& f) {
    std::error_code ec;
    auto r = f(ec);
    throw_if(ec);
    return r;
}
} // namespace

basic_mutex::basic_mutex(client& c, std::string name, lock_kind kind)
    : obj_(detail::access::backend(c)->make_lock_object(detail::access::backend(c), std::move(name),
                                                        kind)) {}
basic_mutex::basic_mutex(basic_mutex&&) noexcept = default;
basic_mutex& basic_mutex::operator=(basic_mutex&&) noexcept = default;
basic_mutex::~basic_mutex() = default;

void basic_mutex::lock() {
    std::error_code ec;
    lock(ec);
    throw_if(ec);
}
void basic_mutex::lock(fixed_lease lease) {
    std::error_code ec;
    lock(lease, ec);
    throw_if(ec);
}
void basic_mutex::lock(std::error_code& ec) {
    obj_->acquire(std::nullopt, std::nullopt, ec);
}
void basic_mutex::lock(fixed_lease lease, std::error_code& ec) {
    obj_->acquire(std::nullopt, lease.duration, ec);
}

bool basic_mutex::try_lock() {
    return try_lock_impl(milliseconds(0), std::nullopt);
}
bool basic_mutex::try_lock(std::error_code& ec) {
    return obj_->acquire(milliseconds(0), std::nullopt, ec);
}
bool basic_mutex::try_lock_for(milliseconds wait, std::error_code& ec) {
    return obj_->acquire(std::max(wait, milliseconds(0)), std::nullopt, ec);
}
bool basic_mutex::try_lock_for(milliseconds wait, fixed_lease lease, std::error_code& ec) {
    return obj_->acquire(std::max(wait, milliseconds(0)), lease.duration, ec);
}
bool basic_mutex::try_lock_impl(milliseconds wait, std::optional<milliseconds> lease) {
    return or_throw([&](std::error_code& ec) {
        return obj_->acquire(std::max(wait, milliseconds(0)), lease, ec);
    });
}

void basic_mutex::unlock() {
    std::error_code ec;
    unlock(ec);
    throw_if(ec);
}
void basic_mutex::unlock(std::error_code& ec) {
    obj_->release(ec);
}

bool basic_mutex::force_unlock() {
    return or_throw([&](std::error_code& ec) { return force_unlock(ec); });
}
bool basic_mutex::force_unlock(std::error_code& ec) {
    return obj_->force_unlock(ec);
}
bool basic_mutex::is_locked() {
    return or_throw([&](std::error_code& ec) { return is_locked(ec); });
}
bool basic_mutex::is_locked(std::error_code& ec) {
    return obj_->is_locked(ec);
}
bool basic_mutex::is_held_by_this_thread() {
    return or_throw([&](std::error_code& ec) { return is_held_by_this_thread(ec); });
}
bool basic_mutex::is_held_by_this_thread(std::error_code& ec) {
    return obj_->hold_count(ec) > 0;
}
int basic_mutex::hold_count() {
    return or_throw([&](std::error_code& ec) { return hold_count(ec); });
}
int basic_mutex::hold_count(std::error_code& ec) {
    return obj_->hold_count(ec);
}
std::optional<std::chrono::milliseconds> basic_mutex::remaining_lease() {
    return or_throw([&](std::error_code& ec) { return remaining_lease(ec); });
}
std::optional<std::chrono::milliseconds> basic_mutex::remaining_lease(std::error_code& ec) {
    return obj_->remaining_lease(ec);
}

std::optional<std::uint64_t> basic_mutex::fencing_token() const {
    auto h = obj_->current();
    return h ? h->fencing_token() : std::nullopt;
}

std::stop_token basic_mutex::stop_token() const {
    auto h = obj_->thread_hold();
    return h ? h->stop_token() : std::stop_token{};
}

std::chrono::steady_clock::time_point basic_mutex::valid_until() const {
    auto h = obj_->current();
    return h ? h->valid_until() : std::chrono::steady_clock::time_point{};
}

void basic_mutex::on_lost(std::function<void()> cb) {
    if (auto h = obj_->thread_hold()) h->on_lost(std::move(cb));
}

const std::string& basic_mutex::name() const noexcept {
    return obj_->name();
}

} // namespace dlock
