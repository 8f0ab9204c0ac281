// detail::lock_object: what a thread-bound lock object (dlock::basic_mutex) asks of its lock, on
// any backend. A backend makes its own (lock_backend::make_lock_object): Redis counts re-entries
// on the server (redis/lock_object.cpp); a backend without server-side counts gets the locally
// counted object of core/local_lock_object.hpp, as Curator counts its InterProcessMutex.
#pragma once

#include "core/hold.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace dlock::detail {

class lock_object {
public:
    lock_object() = default;
    lock_object(const lock_object&) = delete;
    lock_object& operator=(const lock_object&) = delete;
    virtual ~lock_object() = default;

    virtual const std::string& name() const noexcept = 0;
    /// Blocking: up to `wait` (nullopt = forever) plus one request timeout. Errors:
    /// errc::invalid_argument on the backend's I/O thread, or for a second hold of a kind that
    /// is not reentrant; otherwise as lock_backend::acquire().
    virtual bool acquire(std::optional<std::chrono::milliseconds> wait,
                         std::optional<std::chrono::milliseconds> lease, std::error_code& ec) = 0;
    virtual void release(std::error_code& ec) = 0;
    virtual bool force_unlock(std::error_code& ec) = 0;
    virtual bool is_locked(std::error_code& ec) = 0;
    virtual int hold_count(std::error_code& ec) = 0;
    virtual std::optional<std::chrono::milliseconds> remaining_lease(std::error_code& ec) = 0;
    /// The calling thread's hold (also when lost, for its stop token), or null.
    virtual std::shared_ptr<hold> thread_hold() const = 0;
    /// The calling thread's live hold, or null.
    std::shared_ptr<hold> current() const {
        auto h = thread_hold();
        return h && !h->lost() && !h->released() ? h : nullptr;
    }
};

} // namespace dlock::detail
