// detail::hold: what a dlock::lease needs from one held lock, for any backend.
//
// A lease handle holds a std::shared_ptr<hold>. The hold carries the loss signal (valid_until,
// lost/released, stop token, callbacks) and knows how to release and extend itself on its own
// backend: the single-node Redis hold (redis/hold.hpp) and the Redlock hold
// (redis/redlock/hold.cpp) implement it today; a ZooKeeper or PostgreSQL hold will too.
//
// Contract of the virtual members (every implementation keeps it, lease.cpp relies on it):
// - release_blocking(ec): ends the hold (released, or lost when the backend says it was not
//   ours any more: ec = errc::not_owner). Releasing a hold that ended already does nothing and
//   leaves ec clear, except that a lost hold gives errc::not_owner. Called on the backend's I/O
//   thread it must not block: it then starts the release and returns at once.
// - release_async(done): the same without blocking; `done` runs once on the backend's I/O
//   thread, or inline when there was nothing to send.
// - extend(lease, ec): blocking; not_owner when lost, invalid_argument for lease < 1 ms.
//   extend_async(lease, done): the same without blocking.
// - executor(): the backend's I/O executor, empty once the backend is gone.
// - lease_length(): the lease the backend renews the hold to (zero when it cannot say).
//
// The warning stage (core/warning.cpp) is the same for every backend: it needs only
// valid_until(), which each backend keeps current, and executor() for its timer. So is
// max_hold (core/warning.cpp): a timer of the same stage at grant + max_hold starts the
// backend's own release_async() and then marks the hold lost (loss_cause::max_hold).
// - with_metrics(f): runs f on the client's counters while the backend lives (nothing after).
//
// The loss's log record ("lock lost", core/log.hpp) is written here for every backend: a loss
// whose cause is known when it is marked is reported in before_loss(); a backend that learns
// the cause later (Redis's "not yours" diagnosis) records it with set_cause() and calls
// log_loss(). The sink is the client's (client_metrics::log(), through with_metrics()).
//
// Thread safety: every member from any thread (the loss signal's rules apply to callbacks).
#pragma once

#include "core/loss_signal.hpp"

#include <dlock/lock_options.hpp>

#include <asio/any_io_executor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail {

class client_metrics;

class hold : public loss_signal, public std::enable_shared_from_this<hold> {
public:
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    hold(hold&&) = delete;
    hold& operator=(hold&&) = delete;
    ~hold() override; // frees the warning stage (core/warning.cpp)

    /// The lock's name as the caller gave it.
    virtual const std::string& name() const noexcept = 0;
    /// The fencing token of this acquisition, or nullopt where no sound counter exists.
    virtual std::optional<std::uint64_t> fencing_token() const noexcept = 0;
    virtual void release_blocking(std::error_code& ec) = 0;
    virtual void release_async(std::function<void(std::error_code)> done) = 0;
    virtual void extend(std::chrono::milliseconds lease, std::error_code& ec) = 0;
    /// The same without blocking; `done` runs once on the backend's I/O thread, or inline
    /// when nothing is sent (not held, lost, bad lease, the backend is gone).
    virtual void extend_async(std::chrono::milliseconds lease,
                              std::function<void(std::error_code)> done) = 0;
    virtual asio::any_io_executor executor() const = 0;
    /// The lease the hold is renewed to, for the default warning margin (a third of it); zero
    /// when the backend cannot say (the margin is then a third of the validity left when the
    /// warning is first watched).
    virtual std::chrono::milliseconds lease_length() const noexcept { return {}; }
    /// Runs `f` on the counters of the client that owns the hold, if it is still there.
    virtual void with_metrics(const std::function<void(client_metrics&)>& f) const = 0;

    ///@{
    /// The warning stage before a loss (core/warning.cpp). Watching starts with the first call
    /// of either: a timer on executor() wakes when valid_until() comes within the margin and
    /// looks again (a renewal moved it: wait on; still there: warn). The warning also comes
    /// with the loss when the loss comes first; a normal release ends the watch without it.
    std::stop_token warning_token();
    void on_warning(std::function<void()> cb);
    ///@}
    bool warned() const noexcept;
    /// The margin (acquire_options::warn_margin); nullopt: a third of lease_length(). Set
    /// before the hold is handed out.
    void set_warn_margin(std::optional<std::chrono::milliseconds> m) noexcept {
        margin_ms_ = m ? m->count() : -1;
    }
    /// acquire_options::max_hold: from now (the grant), the hold lasts at most `d`
    /// (core/warning.cpp). Set once, before the hold is handed out; nullopt does nothing.
    void set_max_hold(std::optional<std::chrono::milliseconds> d);
    /// valid_until(), but never after grant + max_hold: what lease::valid_until() reports and
    /// the warning watches.
    std::chrono::steady_clock::time_point held_until() const noexcept;
    /// The kind this hold was acquired as (set before it is handed out: hand_out.hpp, the local
    /// lock object); what kind_label() says by default.
    void set_kind(lock_kind k) noexcept {
        kind_.store(static_cast<std::int8_t>(k), std::memory_order_relaxed);
    }
    /// The kind for log records ("reentrant", "simple", ... as the metrics label it); empty
    /// when unknown. Redis and Redlock say their own.
    virtual std::string_view kind_label() const noexcept;
    /// The "lock lost" record (warning; fields lock, kind, cause), once per hold, when the
    /// cause is known and the client has a sink. Never an owner or a token.
    void log_loss() const noexcept;
    /// The warning stage's state (core/warning.cpp; opaque here).
    struct warning_stage;

protected:
    hold() = default;
    /// The warning comes before the loss's stop token and callbacks.
    void before_loss() override;

private:
    /// The stage, made and armed by the first watcher (or set_max_hold(), which passes the
    /// end of the hold); it lives as long as the hold.
    warning_stage& stage(std::chrono::steady_clock::time_point max_until = {});
    static void warn(const hold& h, warning_stage& w);
    static void arm(const std::shared_ptr<hold>& h, warning_stage& w);
    /// The max_hold timer (I/O thread) and what it does when it fires.
    static void arm_end(const std::shared_ptr<hold>& h, warning_stage& w);
    static void end_at_max_hold(const std::shared_ptr<hold>& h, warning_stage& w);

    // 18 bytes for every hold (10,000 held locks must stay under 1 KiB each): the margin, the
    // stage's pointer, the kind and the loss record's flag; the rest of the stage is allocated
    // only for a watched hold.
    std::int64_t margin_ms_ = -1;                    ///< acquire_options::warn_margin; -1: none
    std::atomic<warning_stage*> warning_{nullptr};   ///< made once by stage(), freed with the hold
    std::atomic<std::int8_t> kind_{-1};              ///< a lock_kind; -1: not set
    mutable std::atomic<bool> loss_reported_{false}; ///< log_loss(): once
};

} // namespace dlock::detail
