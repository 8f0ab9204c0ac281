// dlock/rw_mutex.hpp: a read-write lock compatible with Redisson's RReadWriteLock. A Java
// Redisson client and dlock exclude and wake each other on the same name.
//
//   dlock::rw_mutex m = c.make_rw_mutex("catalog");
//   { std::shared_lock r(m); ... }   // many readers at once (SharedTimedLockable)
//   { std::unique_lock w(m); ... }   // one writer, no reader (TimedLockable)
//
// Layout (Redisson's): hash N {mode: read|write, "<client-id>:<thread-id>" -> read count,
// "<client-id>:<thread-id>:write" -> write count}; each read hold has its own timeout key
// {N}:<client-id>:<thread-id>:rwlock_timeout:<k> with its lease, and N lives as long as the
// longest of them, so the read holds of a crashed client expire on their own. Both sides
// publish on redisson_rwlock:{N}: a read unlock "0" (wakes one waiter per client), a write
// unlock "1" (wakes every waiter).
//
// Rules:
// - Ownership is per thread, as dlock::mutex: the thread that locked must unlock.
// - The writer may re-enter, and may take read holds under its write hold (the mode stays
//   write; its final write unlock turns the mode to read while its read holds remain).
// - A reader cannot upgrade: lock() (or try_lock*) while this thread holds only read fails
//   with errc::invalid_argument at once, where Redisson would wait for itself forever.
// - Writers are not starved by readers: a waiting dlock writer announces itself in
//   dlock_rwlock_writer:{N} (a 2 s marker it renews while it waits), and dlock readers that do
//   not hold the lock yet wait behind it (a reader re-entering, and the writer's own reads, do
//   not). Redisson readers ignore the marker: a mixed fleet's Redisson readers can still
//   starve a writer, and Redisson writers get no such priority over dlock readers. A thread
//   that holds read and asks for another read through a different owner (a lease handle,
//   another thread it waits for) can therefore wait for a writer that waits for it.
// - The write side has a fencing token (dlock_rwlock_token:{N}, taken at each fresh write
//   acquisition); readers have none (fencing_token() of the read side is nullopt).
// - For code that is not thread-bound, client::acquire(name, {.kind = lock_kind::read}) (or
//   ::write) returns a dlock::lease; each handle is an owner of its own.
#pragma once

#include <dlock/mutex.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace dlock {

namespace detail {
class lock_backend;
}

/// The read side alone, a lock object with every member of basic_mutex (Redisson's
/// readLock()). is_locked(): held in read mode, or in write mode with read holds under it.
/// fencing_token() is always nullopt.
class read_mutex final : public basic_mutex {
public:
    /// The read side of the read-write lock `name` on `c`.
    read_mutex(client& c, std::string name)
        : basic_mutex(c, std::move(name), lock_kind::read) {}
};

/// The write side alone (Redisson's writeLock()). is_locked(): held in write mode.
class write_mutex final : public basic_mutex {
public:
    /// The write side of the read-write lock `name` on `c`.
    write_mutex(client& c, std::string name)
        : basic_mutex(c, std::move(name), lock_kind::write) {}
};

/// The read-write lock (see the top of this file): the exclusive side meets TimedLockable
/// (std::unique_lock), the shared side SharedTimedLockable (std::shared_lock). Made by
/// client::make_rw_mutex(); movable, not copyable; best destroyed before its client.
class rw_mutex {
public:
    /// The unit of waits and leases; finer durations are rounded up.
    using milliseconds = std::chrono::milliseconds;

    /// Errors: errc::invalid_argument for a name no lock may have (see client::make_mutex).
    rw_mutex(client& c, std::string name);

    // Exclusive side (TimedLockable). Errors and thread rules as basic_mutex; additionally
    // errc::invalid_argument when the calling thread holds only read (no upgrade).
    ///@{
    /// Takes the write lock: as basic_mutex::lock().
    void lock() { w_.lock(); }
    void lock(fixed_lease lease) { w_.lock(lease); }
    void lock(std::error_code& ec) { w_.lock(ec); }
    void lock(fixed_lease lease, std::error_code& ec) { w_.lock(lease, ec); }
    ///@}
    ///@{
    /// One attempt at the write lock: as basic_mutex::try_lock().
    [[nodiscard]] bool try_lock() { return w_.try_lock(); }
    [[nodiscard]] bool try_lock(std::error_code& ec) { return w_.try_lock(ec); }
    template <class Rep, class Period>
    ///@}
    ///@{
    /// Waits for the write lock: as basic_mutex::try_lock_for() and try_lock_until().
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
        return w_.try_lock_for(wait);
    }
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                    fixed_lease lease) {
        return w_.try_lock_for(wait, lease);
    }
    template <class Clock, class Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return w_.try_lock_until(deadline);
    }
    [[nodiscard]] bool try_lock_for(milliseconds wait, std::error_code& ec) {
        return w_.try_lock_for(wait, ec);
    }
    [[nodiscard]] bool try_lock_for(milliseconds wait, fixed_lease lease, std::error_code& ec) {
        return w_.try_lock_for(wait, lease, ec);
    }
    ///@}
    ///@{
    /// Releases one write hold of the calling thread: as basic_mutex::unlock().
    void unlock() { w_.unlock(); }
    void unlock(std::error_code& ec) { w_.unlock(ec); }

    // Shared side (SharedTimedLockable).
    ///@}

    ///@{
    /// Takes a read hold: as basic_mutex::lock(); waits while a writer holds the lock or a dlock
    /// writer waits for it (unless this thread re-enters or holds the write lock).
    void lock_shared() { r_.lock(); }
    void lock_shared(fixed_lease lease) { r_.lock(lease); }
    void lock_shared(std::error_code& ec) { r_.lock(ec); }
    void lock_shared(fixed_lease lease, std::error_code& ec) { r_.lock(lease, ec); }
    ///@}
    ///@{
    /// One attempt at a read hold: as basic_mutex::try_lock().
    [[nodiscard]] bool try_lock_shared() { return r_.try_lock(); }
    [[nodiscard]] bool try_lock_shared(std::error_code& ec) { return r_.try_lock(ec); }
    template <class Rep, class Period>
    ///@}
    ///@{
    /// Waits for a read hold: as basic_mutex::try_lock_for() and try_lock_until().
    [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait) {
        return r_.try_lock_for(wait);
    }
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait,
                                           fixed_lease lease) {
        return r_.try_lock_for(wait, lease);
    }
    template <class Clock, class Duration>
    [[nodiscard]] bool
    try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return r_.try_lock_until(deadline);
    }
    [[nodiscard]] bool try_lock_shared_for(milliseconds wait, std::error_code& ec) {
        return r_.try_lock_for(wait, ec);
    }
    [[nodiscard]] bool try_lock_shared_for(milliseconds wait, fixed_lease lease,
                                           std::error_code& ec) {
        return r_.try_lock_for(wait, lease, ec);
    }
    ///@}
    ///@{
    /// Releases one read hold of the calling thread: as basic_mutex::unlock().
    void unlock_shared() { r_.unlock(); }
    void unlock_shared(std::error_code& ec) { r_.unlock(ec); }

    /// Fencing token of the calling thread's write hold (nullopt: no write hold).
    ///@}
    std::optional<std::uint64_t> fencing_token() const { return w_.fencing_token(); }

    ///@{
    /// Held in any mode (one round trip: EXISTS N). The ec form returns false.
    bool is_locked();
    bool is_locked(std::error_code& ec);
    ///@}
    ///@{
    /// Deletes the lock in any mode, whoever holds it, and wakes every waiter (payload "1").
    /// Redisson's readLock().forceUnlock() only breaks a read mode and writeLock()'s only a
    /// write mode; ours breaks either. Returns true if a lock existed.
    bool force_unlock() { return w_.force_unlock(); }
    bool force_unlock(std::error_code& ec) { return w_.force_unlock(ec); }
    ///@}

    ///@{
    /// The two sides as lock objects: hold counts, is_held_by_this_thread, stop_token,
    /// valid_until and on_lost of the calling thread's read or write hold.
    read_mutex& reader() noexcept { return r_; }
    write_mutex& writer() noexcept { return w_; }
    const read_mutex& reader() const noexcept { return r_; }
    const write_mutex& writer() const noexcept { return w_; }
    ///@}

    /// The lock's name.
    const std::string& name() const noexcept { return r_.name(); }

private:
    read_mutex r_;
    write_mutex w_;
    std::shared_ptr<detail::lock_backend> b_;
};

} // namespace dlock
