// detail::client_impl: what a dlock::client owns. One I/O thread runs one io_context; the
// command connection, the subscriber, the renewal service and every acquire operation live on
// it, so their state needs no locks (only connection::submit() is called from other threads).
#pragma once

#include "core/completion_flag.hpp"
#include "redis/locks/names.hpp"
#include "redis/net/connection.hpp"
#include "redis/net/sync_lane.hpp"
#include "redis/pubsub/subscriber.hpp"
#include "redis/scripts.hpp"

#include <dlock/client.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

class renewal_service;

/// Process-wide unique owner ids: one per thread (thread-bound locks) and one per lease handle.
std::uint64_t this_thread_owner_id() noexcept;
std::uint64_t new_owner_id() noexcept;

/// Safety margin subtracted from every lease when computing how long we may believe we hold
/// it: lease * 1% + 2 ms (the Redlock drift term, applied to single masters too).
std::chrono::nanoseconds drift_for(std::chrono::milliseconds lease) noexcept;

/// One acquisition (one owner's hold of one lock), shared by the object that holds it (mutex or
/// lease) and the renewal service.
class hold_state {
public:
    std::weak_ptr<client_impl> client;
    lock_kind kind{};
    lock_keys keys;
    std::string owner; ///< reentrant: "<client-id>:<owner-id>"; simple: the 32-hex token
    std::optional<std::uint64_t> token;
    std::chrono::milliseconds lease{};
    bool watchdog = false;
    int count = 0; ///< reentrant hold count as last seen (guarded by the holder)

    std::chrono::steady_clock::time_point valid_until() const noexcept;
    void set_valid_until(std::chrono::steady_clock::time_point t) noexcept;
    bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }
    bool released() const noexcept { return released_.load(std::memory_order_acquire); }
    /// Set while the final release is in flight: the watchdog skips the hold and ignores its
    /// renewal results (a renewal ordered after our own DEL would otherwise report a loss).
    std::atomic<bool> releasing{false};
    /// Marks the hold released (normal end): valid_until in the past, stop not requested.
    void mark_released() noexcept;
    /// Marks the hold lost: requests stop, runs callbacks (once). Any thread.
    void mark_lost();
    std::stop_token stop_token() const noexcept { return stop_.get_token(); }
    void on_lost(std::function<void()> cb);
    /// This hold was counted by client_impl::local_hold_begin (a fresh acquisition); the count
    /// is given back once, when the hold is released, lost or destroyed.
    void counted_locally() noexcept { local_counted_.store(true, std::memory_order_release); }
    void end_local() noexcept;
    hold_state() = default;
    hold_state(const hold_state&) = delete;
    hold_state& operator=(const hold_state&) = delete;
    ~hold_state() { end_local(); }

private:
    std::atomic<bool> local_counted_{false};
    std::atomic<std::int64_t> valid_until_ns_{0};
    std::atomic<bool> lost_{false};
    std::atomic<bool> released_{false};
    std::stop_source stop_;
    std::mutex cb_mu_;
    std::vector<std::function<void()>> callbacks_; // guarded by cb_mu_
};

/// Result of one acquire operation.
struct acquire_result {
    bool acquired = false;
    bool reentered = false;  ///< reentrant lock already held by this owner; count incremented
    std::int64_t count = 1;  ///< hold count after this acquisition (reentrant)
    std::uint64_t token = 0; ///< fresh reentrant acquisition
    std::chrono::steady_clock::time_point sent_at; ///< steady time before the winning attempt
};
using acquire_done = std::function<void(std::error_code, acquire_result)>;

struct acquire_request {
    lock_kind kind = lock_kind::reentrant;
    lock_keys keys;
    std::string owner;
    std::optional<std::chrono::milliseconds> wait; ///< nullopt: forever
    std::chrono::milliseconds lease{};
    bool fresh_owner = true; ///< no earlier hold by this owner (best-effort undo is safe)
    /// The caller already made the first attempt (on the sync lane) and was refused with this
    /// PTTL (-1: unknown): the operation starts by subscribing instead of trying again.
    std::optional<std::int64_t> refused_ttl;
    /// When that first attempt was sent (a subscription confirmed before it covers it).
    std::chrono::steady_clock::time_point refused_sent_at{};
    std::optional<retry_policy> retry; ///< poll instead of subscribing
};

/// An operation that must end (with errc::cancelled) when the client shuts down, instead of
/// waiting for a timer or a message that will never come. cancel() runs on the I/O thread.
class cancellable {
public:
    virtual void cancel() = 0;

protected:
    ~cancellable() = default;
};

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    explicit client_impl(client_options opts);
    ~client_impl();
    void start();
    void shutdown();

    const client_options& options() const noexcept { return opts_; }
    const std::string& id() const noexcept { return id_; }
    asio::io_context& io() noexcept { return io_; }
    net::connection& conn() noexcept { return *conn_; }
    net::subscriber& subscriber();
    renewal_service& renewal() noexcept { return *renewal_; }
    bool on_io_thread() const noexcept;
    std::string_view publish_cmd() const noexcept { return "PUBLISH"; }

    /// Runs a command synchronously. errc::invalid_argument when called on the I/O thread.
    resp3::value run(std::span<const std::string_view> args, std::error_code& ec,
                     std::string_view eval_fallback = {});
    /// EVALSHA with the EVAL fallback; `args` are everything after the script name
    /// (numkeys, keys..., argv...).
    resp3::value run_script(script_id id, std::span<const std::string_view> args,
                            std::error_code& ec);

    /// Starts an acquire on the I/O thread; `done` runs there.
    void async_acquire(acquire_request req, acquire_done done);
    /// What a first attempt on the calling thread decided.
    enum class first_attempt { finished, refused, not_taken };
    /// Blocking callers only: makes the first attempt of `req` on the sync lane. finished: `ec`
    /// or `res` is the answer (acquired, or not acquired with a zero wait); refused: held by
    /// another, `req.refused_ttl` is set and `req.wait` reduced by the time spent, continue
    /// with async_acquire(req); not_taken: nothing was sent.
    first_attempt try_first_attempt(acquire_request& req, acquire_result& res, std::error_code& ec);
    /// Builds the hold for a successful acquisition and registers it with the renewal service.
    std::shared_ptr<hold_state> make_hold(const acquire_request& req, const acquire_result& r,
                                          bool watchdog);
    /// Releases `h` once (one hold count for reentrant locks). Returns the script's reply kind:
    /// true = fully released (or handed over to a waiting owner of this client). Errors:
    /// errc::not_owner (and the hold is marked lost).
    bool release(const std::shared_ptr<hold_state>& h, std::error_code& ec);
    /// A raw release outcome, always shaped like the release script's reply (a hand-over is
    /// reported as "released": integer 1).
    using release_reply = std::function<void(std::error_code, resp3::value&&)>;
    /// True when a release of `h` should go through release_or_handover: local hand-over is on,
    /// the release is final as far as this client knows, and some acquire of this client waits.
    bool handover_possible(const hold_state& h) const noexcept {
        return opts_.handover && h.count <= 1 && waiters_.load(std::memory_order_relaxed) > 0;
    }
    /// I/O thread only. Releases one hold of `h`. If a waiter of this client sleeps on the same
    /// lock, one hand-over script passes the lock to it (see client_options::handover);
    /// otherwise the normal release script runs. `done` runs on the I/O thread.
    void release_or_handover(std::shared_ptr<const hold_state> h, release_reply done);

    /// Thread-bound holds (dlock::mutex), keyed by kind, owner and name: two mutex objects of
    /// the same name in one thread share the hold, as two Redisson RLock objects do.
    std::shared_ptr<hold_state> find_thread_hold(const std::string& key);
    void set_thread_hold(const std::string& key, std::shared_ptr<hold_state> h);
    void erase_thread_hold(const std::string& key, const hold_state* h);
    /// The full EVALSHA command line that releases one hold of `owner` (lock_release.lua or
    /// simple_release.lua), and the script to fall back to on NOSCRIPT. The one place that
    /// knows the release scripts' KEYS/ARGV layout.
    std::vector<std::string> release_command(lock_kind kind, const lock_keys& keys,
                                             const std::string& owner,
                                             std::chrono::milliseconds lease,
                                             std::string_view& eval_fallback) const;
    /// Sends a release without waiting; `done` (may be empty) gets the raw outcome on the I/O
    /// thread.
    void submit_release(std::vector<std::string> command, std::string_view eval_fallback,
                        std::function<void(std::error_code, resp3::value&&)> done);
    /// Fire-and-forget release (from the I/O thread, where blocking is not allowed).
    /// `done` (may be empty) runs on the I/O thread with the outcome; the hold is marked
    /// released, or lost on errc::not_owner.
    void release_detached(const std::shared_ptr<hold_state>& h,
                          std::function<void(std::error_code)> done);
    bool shut_down() const noexcept { return shut_.load(std::memory_order_acquire); }
    /// Acquire operations of this client that are subscribed and waiting (any lock). While
    /// there are any, blocking calls stay on the shared connection: a releasing thread that
    /// got its reply on the sync lane would otherwise race ahead of the I/O thread, which is
    /// about to wake the next waiter, and re-acquire first (measured: scenario C hand-offs
    /// took twice as long and 60-90% of acquisitions were re-acquisitions).
    void waiter_added() noexcept { waiters_.fetch_add(1, std::memory_order_relaxed); }
    void waiter_removed() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }
    /// The sync lane, or null (blocking_io::io_thread, TLS).
    const net::sync_lane* lane() const noexcept { return lane_.get(); }
    bool lane_allowed() const noexcept {
        return lane_ && waiters_.load(std::memory_order_relaxed) == 0;
    }
    /// Registers an operation to cancel at shutdown (any thread). Expired entries are pruned.
    void track(std::weak_ptr<cancellable> op);

    /// Fresh acquisitions by this client that have not ended, per lock (any thread). Counted
    /// when the acquisition succeeds (before its caller wakes) and given back when its hold
    /// ends. A hint only: a new waiter of a lock held here does not ask the server but sleeps
    /// until the holder's release hands the lock over or publishes (bounded by the holder's
    /// lease, in case the holder vanishes without either).
    void local_hold_begin(lock_kind kind, const std::string& key, std::chrono::milliseconds lease);
    void local_hold_end(lock_kind kind, const std::string& key) noexcept;
    /// Nullopt when this client holds no fresh acquisition of the lock; otherwise the longest
    /// lease among its holds since the lock was last free here (the bound a queued waiter
    /// sleeps for at most).
    std::optional<std::chrono::milliseconds> held_here(lock_kind kind, const std::string& key);

private:
    std::atomic<bool> shut_{false};
    std::atomic<int> waiters_{0};
    /// I/O thread only: per unlock channel, when a hand-over last checked (PUBSUB NUMSUB) that
    /// no other client waits. Within handover_recheck of that, the check is skipped.
    std::unordered_map<std::string, std::chrono::steady_clock::time_point> handover_checked_;
    std::mutex ops_mu_;
    std::vector<std::weak_ptr<cancellable>> ops_; // guarded by ops_mu_
    struct local_hold {
        int count = 0;
        std::chrono::milliseconds longest_lease{};
    };
    std::mutex local_mu_;
    /// Per kind (reentrant, simple), keyed by the 64-bit hash of the lock key (no copy of the
    /// key per held lock; a collision only makes a waiter queue when it could have tried,
    /// which the holder's lease bounds); guarded by local_mu_.
    std::array<std::unordered_map<std::size_t, local_hold>, 2> local_holds_;
    std::mutex thread_holds_mu_;
    std::unordered_map<std::string, std::shared_ptr<hold_state>> thread_holds_; // guarded
    client_options opts_;
    std::string id_;
    asio::io_context io_;
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};
    std::shared_ptr<net::connection> conn_;
    std::unique_ptr<net::sync_lane> lane_; // null: blocking_io::io_thread or TLS
    std::unique_ptr<net::subscriber> sub_;
    std::unique_ptr<renewal_service> renewal_;
};

/// The blocking bridge: a request on the caller's stack, completed on the I/O thread.
class sync_request final : public request {
public:
    void complete(std::error_code ec, resp3::value&& reply) override {
        ec_ = ec;
        reply_ = std::move(reply);
        done_.set();
    }
    void wait() noexcept { done_.wait(); }
    std::error_code ec_;
    resp3::value reply_;

private:
    completion_flag done_;
};

/// Converts an error reply to its errc (nothing for non-error replies).
std::error_code reply_error(const resp3::value& v) noexcept;

} // namespace dlock::detail
