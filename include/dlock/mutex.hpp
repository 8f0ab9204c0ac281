// dlock/mutex.hpp: thread-bound lock objects that meet the standard TimedLockable requirements,
// so std::unique_lock, std::scoped_lock and std::lock work with them.
//
// dlock::mutex        Redisson RLock-compatible reentrant lock: hash N {"<client-id>:<thread-id>"
//                     -> hold count}, unlock channel redisson_lock__channel:{N}, fencing counter
//                     redisson_lock_token:{N}. A Java Redisson client and dlock exclude and wake
//                     each other on the same name.
// dlock::simple_mutex SET N <128-bit token> NX PX lease, compare-and-delete release; not
//                     reentrant (locking it again from the holding thread is
//                     errc::invalid_argument rather than a self-deadlock).
//
// Ownership is per thread: the thread that locked must unlock (errc::not_owner otherwise). For
// code that is not thread-bound use client::acquire(), which returns a dlock::lease.
//
// Waiting never polls: the waiter subscribes to the unlock channel before its last attempt, is
// woken by the unlock message (one local waiter per message), and otherwise retries after the
// TTL the acquire script returned, so a lost message costs at most one TTL.
//
// Leases: without an explicit lease the client's watchdog renews the lock every lease/3 (default
// lease 30 s). With a dlock::fixed_lease, the lock simply expires. Loss of a held lock is signalled
// through stop_token(), on_lost() callbacks and valid_until(), per holding thread.
#pragma once

#include <dlock/error.hpp>
#include <dlock/lock_options.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace dlock {

class client;

namespace detail {
class lock_object;
}

/// What every thread-bound lock object offers (dlock::mutex, fair_mutex, simple_mutex and the
/// two sides of rw_mutex): the TimedLockable members plus queries, fencing and loss signals.
/// Objects come from client::make_mutex() and its siblings; they are movable, not copyable,
/// and are best destroyed before their client.
class basic_mutex {
public:
    /// The unit of waits and leases; finer durations are rounded up.
    using milliseconds = std::chrono::milliseconds;

    ///@{
    /// Blocks until acquired, with the watchdog's lease (renewed) or a fixed one (>= 1 ms).
    /// Errors: throws dlock::error (unavailable, auth_failed, ...); the ec forms do not throw.
    /// Thread safety: any thread except the client's I/O thread.
    void lock();
    void lock(fixed_lease lease);
    void lock(std::error_code& ec);
    void lock(fixed_lease lease, std::error_code& ec);
    ///@}

    ///@{
    /// One attempt, no waiting. False when another owner holds the lock.
    [[nodiscard]] bool try_lock();
    [[nodiscard]] bool try_lock(std::error_code& ec);
    ///@}

    ///@{
    /// Waits up to `wait` (negative = zero) with the watchdog or a fixed lease.
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
        return try_lock_impl(ceil_ms(wait), std::nullopt);
    }
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                    fixed_lease lease) {
        ///@}
        return try_lock_impl(ceil_ms(wait), lease.duration);
    }
    /// Waits until `deadline` of any clock; the remaining time is measured on steady_clock once.
    template <class Clock, class Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_for(deadline - Clock::now());
    }
    /// Non-throwing forms of try_lock_for(): false and `ec` set on an error.
    ///@{
    [[nodiscard]] bool try_lock_for(milliseconds wait, std::error_code& ec);
    [[nodiscard]] bool try_lock_for(milliseconds wait, fixed_lease lease, std::error_code& ec);
    ///@}

    ///@{
    /// Releases one hold of the calling thread. Errors: errc::not_owner if this thread does not
    /// hold the lock (also when it was lost); unlock(ec) does not throw.
    void unlock();
    void unlock(std::error_code& ec);
    ///@}

    ///@{
    /// Deletes the lock whoever holds it and wakes waiters. Returns true if a lock existed.
    bool force_unlock();
    bool force_unlock(std::error_code& ec);
    ///@}

    ///@{
    /// Queries of the server (one round trip each). Errors: as lock(); a reply that is not
    /// what the kind stores is errc::protocol_error. The ec forms return false / 0 / nullopt.
    bool is_locked();
    bool is_locked(std::error_code& ec);
    ///@}
    /// True when the calling thread holds the lock, as the server says (one round trip).
    ///@{
    bool is_held_by_this_thread();
    bool is_held_by_this_thread(std::error_code& ec);
    ///@}
    ///@{
    /// Hold count of the calling thread as stored on the server (0 when not held).
    int hold_count();
    int hold_count(std::error_code& ec);
    ///@}
    ///@{
    /// Remaining lease of the lock (whoever holds it); nullopt when it does not exist.
    std::optional<milliseconds> remaining_lease();
    std::optional<milliseconds> remaining_lease(std::error_code& ec);
    ///@}

    /// Fencing token of the calling thread's current hold (nullopt: not held, or simple lock).
    std::optional<std::uint64_t> fencing_token() const;
    /// Loss signals of the calling thread's current hold (a never-requested token, a time point
    /// in the past and a no-op when the thread holds nothing).
    std::stop_token stop_token() const;
    /// Steady-clock instant until which the calling thread's hold is known to be held (a lower
    /// bound); in the past when the thread holds nothing or the hold was lost.
    std::chrono::steady_clock::time_point valid_until() const;
    /// Runs `cb` once when the calling thread's hold is lost: on the client's I/O thread when
    /// the watchdog or the lease deadline finds it, on the thread calling unlock() when the
    /// server says so, at once when it is lost already (see lease::on_lost).
    void on_lost(std::function<void()> cb);

    /// The lock's name as given to make_mutex() and its siblings.
    const std::string& name() const noexcept;

    /// Moves the lock object; holds stay with it. The moved-from object must not be used.
    basic_mutex(basic_mutex&&) noexcept;
    /// Move assignment: as the move constructor; the object assigned to stops renewing its holds.
    basic_mutex& operator=(basic_mutex&&) noexcept;
    /// Stops renewing holds still open (they expire after their lease); never blocks.
    ~basic_mutex();

protected:
    /// Used by the derived types; `kind` picks the protocol.
    basic_mutex(client& c, std::string name, lock_kind kind);

private:
    template <class D>
    static milliseconds ceil_ms(const D& d) {
        auto ms = std::chrono::ceil<milliseconds>(d);
        return ms.count() < 0 ? milliseconds(0) : ms;
    }
    bool try_lock_impl(milliseconds wait, std::optional<milliseconds> lease);

    std::shared_ptr<detail::lock_object> obj_;
};

/// Redisson RLock-compatible reentrant lock.
class mutex : public basic_mutex {
public:
    /// The lock `name` on `c` (same as c.make_mutex(name)).
    mutex(client& c, std::string name)
        : basic_mutex(c, std::move(name), lock_kind::reentrant) {}
};

/// Redisson RFairLock-compatible fair lock: reentrant like dlock::mutex, and waiters (of every
/// process and thread) are served in the order they arrived, each woken on its own channel.
/// A waiter that vanishes is dropped after client_options::fair_waiter_timeout.
class fair_mutex : public basic_mutex {
public:
    /// The fair lock `name` on `c` (same as c.make_fair_mutex(name)).
    fair_mutex(client& c, std::string name)
        : basic_mutex(c, std::move(name), lock_kind::fair) {}
};

/// Simple (non-reentrant) SET NX PX lock.
class simple_mutex : public basic_mutex {
public:
    /// The simple lock `name` on `c` (same as c.make_simple_mutex(name)).
    simple_mutex(client& c, std::string name)
        : basic_mutex(c, std::move(name), lock_kind::simple) {}
};

} // namespace dlock
