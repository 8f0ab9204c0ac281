// dlock/multi_lock.hpp: all of several locks or none (Redisson's RedissonMultiLock, fixed).
//
//   const dlock::lock_ref locks[] = {{"account:2"}, {"account:1"},
//                                    {"job", dlock::lock_kind::simple}};
//   if (auto all = c.acquire_all(locks, {.wait = 5s})) { use(all.stop_token()); }
//
// - Order: the members are taken in one global order, sorted by name (byte-wise), whatever
//   order the caller gives; two multi-locks over overlapping sets therefore cannot deadlock.
//   A name may appear once (whatever its kind): duplicates are errc::invalid_argument.
// - One wait for the set: each member waits, by notification as a single lock does, only for
//   what is left of acquire_options::wait. Not acquired within it, or an error: the members
//   taken so far are released (the releases completed, or failed and given up) before the
//   empty result or the error is reported. A member lost while later ones are awaited makes
//   the acquisition release everything and start over from the first member, within the wait.
// - Lease: acquire_options::lease nullopt: every member is renewed by the client's watchdog.
//   A fixed lease L: the members taken before the last get L plus what is left of the wait, so
//   none expires while the later ones are awaited (after a crash mid-acquisition they expire
//   within wait + L); once the set is complete every member's lease is cut to L (the last
//   was taken with L), so valid_until() is about completion + L. With no bound on the wait,
//   members get L and are extended to L again whenever a third of it is left while a later
//   one is awaited (that member's wait is then taken in rounds: a fair-lock member re-queues
//   at each round).
// - acquire_options::kind is ignored: each member has its own kind.
// - Backends: the same on every backend of dlock::client (Redis, ZooKeeper, PostgreSQL); a
//   member kind the backend does not offer is errc::unsupported. On ZooKeeper a name is a
//   znode path: spell each lock one way ("a/b", not also "/a/b"), the duplicate check compares
//   the names as given.
// - Loss: losing any member loses the multi-lock: lost() is true, stop_token() is requested and
//   every on_lost() callback runs once (on the thread that detected the member's loss, as for
//   a lease). Releasing releases every member, in reverse order.
#pragma once

#include <dlock/detail/deliver.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/system_executor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

namespace dlock {

/// One member of a multi-lock: a lock name and its kind.
struct lock_ref {
    /// The lock's name.
    std::string name;
    /// Its kind (default lock_kind::reentrant).
    lock_kind kind = lock_kind::reentrant;
};

class client;

namespace detail {
class multi_state;
struct multi_mutex_state;
struct access;
} // namespace detail

/// The movable RAII handle of a multi-lock: one lease per member. Thread safety as for lease:
/// one thread uses a handle at a time; lost(), stop_token() and on_lost() from any thread.
class multi_lease {
public:
    multi_lease() noexcept = default; ///< empty: not acquired
    /// Moves the members' holds; the moved-from handle is empty.
    multi_lease(multi_lease&&) noexcept;
    /// Releases what this handle holds (as the destructor), then takes the other's holds.
    multi_lease& operator=(multi_lease&&) noexcept;
    multi_lease(const multi_lease&) = delete;
    multi_lease& operator=(const multi_lease&) = delete;
    /// Releases every member still held (errors are swallowed; call release() to see them).
    ~multi_lease();

    /// True when this handle holds (or held, until release) every member.
    explicit operator bool() const noexcept { return state_ != nullptr; }

    /// The members in the order they were taken (sorted by name); empty once released. Each
    /// is a lease: name(), token(), valid_until(), lost().
    std::span<const lease> members() const noexcept;
    /// The minimum of the members' valid_until(); in the past once lost or released.
    std::chrono::steady_clock::time_point valid_until() const;
    /// True once any member was lost.
    bool lost() const noexcept;
    /// Requested when any member is lost (not on a normal release).
    std::stop_token stop_token() const;
    /// Runs `cb` once when the multi-lock is lost (the first member lost), on the thread that
    /// detects it (see lease::on_lost); at once when it is lost already.
    void on_lost(std::function<void()> cb);

    ///@{
    /// Releases every member, in reverse order, even after an error. Errors: the first one, in
    /// that order (errc::not_owner when a member was lost meanwhile: the multi-lock is then
    /// lost). Releasing an empty or released handle does nothing.
    void release();
    void release(std::error_code& ec);
    ///@}

    /// Async twin of release(): every member's release is sent at once; completes with
    /// void(std::error_code) (the first error in reverse member order) on the token's
    /// associated executor (the client's I/O thread by default). The handle is empty afterwards.
    template <class CompletionToken>
    auto async_release(CompletionToken&& token);

    ///@{
    /// Extends every member's lease to now + `lease_ms` (each member is tried). Errors: the
    /// first one in member order; errc::not_owner when a member was lost.
    void extend(std::chrono::milliseconds lease_ms);
    void extend(std::chrono::milliseconds lease_ms, std::error_code& ec);
    ///@}

private:
    friend struct detail::access;
    explicit multi_lease(std::shared_ptr<detail::multi_state> s) noexcept;
    /// Sends every member's release; `done` runs once with the first error, on the thread
    /// where the last member's release completed (the client's I/O thread, or inline).
    static void start_release(std::shared_ptr<detail::multi_state> s,
                              std::function<void(std::error_code)> done);
    static asio::any_io_executor executor_of(const std::shared_ptr<detail::multi_state>& s);

    std::shared_ptr<detail::multi_state> state_;
};

/// A thread-bound multi-lock that meets the standard TimedLockable requirements
/// (std::unique_lock, std::scoped_lock, std::lock), over client::acquire_all():
///
///   dlock::multi_mutex both(c, {{"account:1"}, {"account:2"}});
///   { std::scoped_lock g(both); ... }
///
/// The thread that locked must unlock (errc::not_owner otherwise). Not reentrant: locking it
/// again from the holding thread is errc::invalid_argument rather than a self-deadlock.
/// Thread safety: any threads at once, except the client's I/O thread.
class multi_mutex {
public:
    /// The unit of waits and leases; finer durations are rounded up.
    using milliseconds = std::chrono::milliseconds;

    /// Errors: errc::invalid_argument for an empty set, a name given twice or a bad name.
    multi_mutex(client& c, std::vector<lock_ref> locks);
    /// Moves the set and its hold; the moved-from object must not be used.
    multi_mutex(multi_mutex&&) noexcept;
    /// Releases what this object holds (as the destructor), then takes the other's set and hold.
    multi_mutex& operator=(multi_mutex&&) noexcept;
    /// Releases the set if still held (errors are swallowed).
    ~multi_mutex();

    ///@{
    /// Blocks until every member is held, with the watchdog's lease or a fixed one.
    void lock();
    void lock(fixed_lease lease);
    void lock(std::error_code& ec);
    ///@}
    /// One attempt per member, no waiting.
    [[nodiscard]] bool try_lock();
    ///@{
    /// Waits up to `wait` (negative = zero) for every member, with the watchdog or a fixed lease;
    /// false when not all were acquired within it (the ones taken are released).
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
        return try_lock_impl(ceil_ms(wait), std::nullopt);
    }
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                    fixed_lease lease) {
        return try_lock_impl(ceil_ms(wait), lease.duration);
    }
    ///@}
    /// Waits until `deadline` of any clock; the remaining time is measured on steady_clock once.
    template <class Clock, class Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_for(deadline - Clock::now());
    }
    /// Non-throwing form of try_lock_for(): false and `ec` set on an error.
    [[nodiscard]] bool try_lock_for(milliseconds wait, std::error_code& ec);

    ///@{
    /// Releases every member. Errors: errc::not_owner when the calling thread does not hold the
    /// set, or a member was lost; otherwise as multi_lease::release().
    void unlock();
    void unlock(std::error_code& ec);
    ///@}

    /// True when the calling thread holds the set through this object (no round trip).
    bool is_held_by_this_thread() const;
    /// Loss signals of the current hold (of whichever thread holds the set): a never-requested
    /// token, a past time point and a no-op when nobody holds it through this object.
    std::stop_token stop_token() const;
    /// The minimum of the members' validity (see multi_lease::valid_until()).
    std::chrono::steady_clock::time_point valid_until() const;
    /// Runs `cb` once when the current hold is lost (see multi_lease::on_lost()).
    void on_lost(std::function<void()> cb);
    /// The members, sorted by name (the order they are taken in).
    const std::vector<lock_ref>& locks() const noexcept;

private:
    template <class D>
    static milliseconds ceil_ms(const D& d) {
        auto r = std::chrono::ceil<milliseconds>(d);
        return r.count() < 0 ? milliseconds(0) : r;
    }
    bool try_lock_impl(std::optional<milliseconds> wait, std::optional<milliseconds> lease);
    bool lock_impl(std::optional<milliseconds> wait, std::optional<milliseconds> lease,
                   std::error_code& ec);

    std::unique_ptr<detail::multi_mutex_state> s_;
};

template <class CompletionToken>
auto multi_lease::async_release(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [](auto handler, std::shared_ptr<detail::multi_state> s) {
            detail::initiation_scope scope;
            asio::any_io_executor io = executor_of(s);
            if (!io) io = asio::system_executor();
            start_release(std::move(s),
                          detail::completion<std::error_code>(std::move(handler), io));
        },
        token, std::move(state_));
}

} // namespace dlock
