// dlock/lease.hpp: the movable RAII handle of one acquisition, for code that is not bound to a
// thread (async handlers, coroutines, a lock handed to another thread).
//
// A lease is one hold of one lock by one owner id that belongs to this handle alone (not to
// the calling thread). Its loss cannot be missed: when the watchdog finds the lock gone or
// owned by someone else, the lease deadline passes without a successful renewal, or its
// acquire_options::max_hold passes (then dlock releases the lock itself), the handle flips to
// lost, stop_token() is requested, every on_lost() callback runs, valid_until() is in the past,
// and loss_cause() says why. Before that, a lease that stops being renewed warns (warning_token(),
// on_warning()) while a margin of its validity is left.
#pragma once

#include <dlock/detail/deliver.hpp>
#include <dlock/error.hpp>
#include <dlock/metrics.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace dlock {

class lease;

namespace detail {
class hold;
struct access;
} // namespace detail

/// The movable RAII handle of one acquisition (see the top of this file): made by
/// client::acquire(), redlock::acquire_with_votes() and their async twins. One thread uses a handle
/// at a time; lost(), stop_token() and on_lost() may be called from any thread.
class lease {
public:
    lease() noexcept = default; ///< empty: not acquired
    /// Moves the hold; the moved-from handle is empty.
    lease(lease&&) noexcept;
    /// Releases what this handle holds (as the destructor), then takes the other's hold.
    lease& operator=(lease&&) noexcept;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    /// Releases the lock if still held (errors are swallowed; call release() to see them).
    ~lease();

    /// True when this handle holds (or held, until release) a lock. Empty means "not acquired".
    explicit operator bool() const noexcept { return state_ != nullptr; }

    /// The lock's name; empty for an empty handle.
    const std::string& name() const;
    /// Fencing token of this acquisition; nullopt for kinds without a sound counter (simple
    /// lock, Redlock). Strictly increasing across acquisitions of the same name on one master.
    std::optional<std::uint64_t> token() const;
    /// Steady-clock instant until which the lease is known to be held (a lower bound: measured
    /// from before the acquire or renewal was sent). In the past once lost or released. Never
    /// after grant + acquire_options::max_hold.
    std::chrono::steady_clock::time_point valid_until() const;
    /// True once the lease was lost (never for a normal release).
    bool lost() const noexcept;
    /// Why the lease was lost: nullopt while it is not (and for an empty handle). Set when
    /// lost() becomes true, except on Redis when the server said "not yours": that cause
    /// (gone, taken or undetermined) is known once a follow-up EXISTS is answered. A lease
    /// ended by acquire_options::max_hold says loss_cause::max_hold.
    std::optional<dlock::loss_cause> loss_cause() const noexcept;
    /// Requested when the lease is lost (not on a normal release).
    std::stop_token stop_token() const;
    /// Runs `cb` once when the lease is lost.
    /// Thread safety: `cb` runs on the thread that detects the loss: the client's I/O thread
    /// when the watchdog, a renewal or the lease deadline finds it (then it must not block or
    /// call synchronous dlock functions, which fail there with errc::invalid_argument); the
    /// calling thread when release() or extend() learns it from the server; and at once, on
    /// the thread calling on_lost(), when the lease is lost already.
    void on_lost(std::function<void()> cb);

    ///@{
    /// The warning before a loss: requested (and every on_warning() callback run, once) when
    /// the lease's remaining validity falls below its margin without a successful renewal
    /// (server unreachable, renewals failing, a fixed lease near its end), or at the loss if
    /// that comes first (a lock deleted by someone else gives no time to warn). The margin is
    /// acquire_options::warn_margin, by default a third of the lease. A normal release never
    /// warns; a warning is not withdrawn when a later renewal succeeds (watch lost() for the
    /// end). Watching starts with the first call of either (an unwatched lease costs nothing);
    /// callbacks run as on_lost()'s do. An empty lease never warns.
    std::stop_token warning_token() const;
    void on_warning(std::function<void()> cb);
    ///@}
    /// True once the warning came (see warning_token()).
    bool warned() const noexcept;

    ///@{
    /// Releases the lock. Errors: errc::not_owner when the lock was lost meanwhile (the lease is
    /// then marked lost), errc::ambiguous / unavailable for transport failures.
    /// Edge values: releasing an empty or already released lease does nothing.
    void release();
    void release(std::error_code& ec);
    ///@}

    /// Async twin of release(): completes with void(std::error_code) on the token's associated
    /// executor (the client's I/O thread by default). The handle is empty afterwards.
    template <class CompletionToken>
    auto async_release(CompletionToken&& token);

    ///@{
    /// Extends the lease to now + `lease_ms` if still owned. Errors: errc::not_owner if lost.
    void extend(std::chrono::milliseconds lease_ms);
    void extend(std::chrono::milliseconds lease_ms, std::error_code& ec);
    ///@}
    /// Async twin of extend(): completes with void(std::error_code) on the token's associated
    /// executor (the client's I/O thread by default). The handle stays as it is.
    template <class CompletionToken>
    auto async_extend(std::chrono::milliseconds lease_ms, CompletionToken&& token);

private:
    friend struct detail::access;
    explicit lease(std::shared_ptr<detail::hold> s) noexcept
        : state_(std::move(s)) {}
    /// Releases `h` without blocking; `done` runs on the client's I/O thread, or inline when
    /// there is nothing to send (already released, lost, or the client is gone).
    static void start_release(std::shared_ptr<detail::hold> h,
                              std::function<void(std::error_code)> done);
    /// Sends the extension of `h` without blocking; `done` runs on the client's I/O thread, or
    /// inline when nothing is sent (not held, lost, bad lease, the client is gone).
    static void start_extend(std::shared_ptr<detail::hold> h, std::chrono::milliseconds lease_ms,
                             std::function<void(std::error_code)> done);
    /// The I/O executor of the client that owns `h`; empty when that client is gone.
    static asio::any_io_executor executor_of(const std::shared_ptr<detail::hold>& h);

    std::shared_ptr<detail::hold> state_;
};

template <class CompletionToken>
auto lease::async_release(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [](auto handler, std::shared_ptr<detail::hold> h) {
            detail::initiation_scope scope;
            asio::any_io_executor io = executor_of(h);
            if (!io) io = asio::system_executor();
            start_release(std::move(h),
                          detail::completion<std::error_code>(std::move(handler), io));
        },
        token, std::move(state_));
}

template <class CompletionToken>
auto lease::async_extend(std::chrono::milliseconds lease_ms, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [](auto handler, std::shared_ptr<detail::hold> h, std::chrono::milliseconds d) {
            detail::initiation_scope scope;
            asio::any_io_executor io = executor_of(h);
            if (!io) io = asio::system_executor();
            start_extend(std::move(h), d,
                         detail::completion<std::error_code>(std::move(handler), io));
        },
        token, state_, lease_ms);
}

} // namespace dlock
