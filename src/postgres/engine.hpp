// pg::engine: what one PostgreSQL backend owns: the settings, its runtime (core/runtime.hpp:
// one io_context run by one I/O thread), the pool of idle sessions, the holds still open (for
// shutdown), the counters and the last error. Acquisition and the lock kinds live in advisory*.cpp
// (and the lease tables, rows/).
//
// Sessions: advisory holds live on holding sessions (advisory_sessions.hpp: any number of
// distinct keys per session, never one key twice, as PostgreSQL's session locks stack); a
// session that holds nothing goes back to the idle pool (at most settings::pool) and serves the
// next acquisition, wait or query without a new connection.
//
// Thread safety: the members marked "I/O thread" run there only; the rest from any thread.
//
// Lifetime: made by engine::create() only. Holds, acquisitions and queries keep the engine
// alive through shared_ptrs captured in handlers on the I/O thread, so the last reference may
// be dropped there (a user's completion handler or loss callback dropping the last lease or
// client). Destroying the engine in that handler would destroy the io_context while run() is
// on the same stack; create()'s deleter instead begins the shutdown and lets the I/O thread
// delete the engine after run() has returned (the thread detaches itself first).
#pragma once

#include "core/hold.hpp"
#include "core/metrics.hpp"
#include "core/runtime.hpp"
#include "postgres/connection.hpp"
#include "postgres/settings.hpp"

#include <dlock/lock_options.hpp>

#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace dlock::detail::pg {

class engine;
class holding_session;

/// The NOTIFY channels engine::listen() listens on: the lease tables' releases (payload: the
/// lock name; rows/) and elections' new leaders and values (payload: the election name;
/// election.hpp).
inline const std::string lease_channel = "dlock_lease";
inline const std::string election_channel = "dlock_election";

/// A hold of this backend (advisory or lease row). The blocking and async members of
/// detail::hold are written once here over the kind's release_io() / extend_io(), which run on
/// the I/O thread; the engine ends the holds still open on shutdown.
class pg_hold : public hold {
public:
    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override;
    void extend(std::chrono::milliseconds lease, std::error_code& ec) override;
    void extend_async(std::chrono::milliseconds lease,
                      std::function<void(std::error_code)> done) override;
    asio::any_io_executor executor() const override;
    void with_metrics(const std::function<void(client_metrics&)>& f) const override;
    /// I/O thread: the backend shuts down; end the hold (its lock is freed with its session or
    /// its row expires) and signal the loss.
    virtual void end_on_shutdown() = 0;

protected:
    explicit pg_hold(std::shared_ptr<engine> e)
        : engine_(std::move(e)) {}
    /// I/O thread: the release (done: clear, or errc::not_owner when it was lost).
    virtual void release_io(std::function<void(std::error_code)> done) = 0;
    /// I/O thread: the extension (done: clear, or errc::not_owner when it was lost).
    virtual void extend_io(std::chrono::milliseconds lease,
                           std::function<void(std::error_code)> done) = 0;

    std::shared_ptr<engine> engine_;

private:
    std::shared_ptr<pg_hold> self() {
        return std::static_pointer_cast<pg_hold>(shared_from_this());
    }
};

class engine : public std::enable_shared_from_this<engine> {
public:
    using session_handler = std::function<void(std::error_code, std::shared_ptr<connection>)>;

    /// A started engine whose last reference may be dropped on any thread (see Lifetime).
    static std::shared_ptr<engine> create(settings s, const log_options& log = {});
    ~engine();
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    /// Closes every session, ends every hold, stops the I/O thread and joins it (on any
    /// thread but the I/O thread, where it returns after starting the shutdown). Idempotent.
    void shutdown() noexcept;

    asio::io_context& io() noexcept { return rt_.io(); }
    bool on_io_thread() const noexcept { return rt_.on_io_thread(); }
    bool shut_down() const noexcept { return rt_.closed(); }
    const settings& config() const noexcept { return *settings_; }
    const std::string& id() const noexcept { return id_; }
    client_metrics& metrics() noexcept { return metrics_; }

    /// Runs `fn` on the I/O thread; false (and `fn` dropped) once shutdown has begun.
    bool post(std::function<void()> fn) { return rt_.try_post(std::move(fn)); }
    /// Runs `start(complete)` on the I/O thread and blocks until `complete(value)` is called
    /// (once); `fallback` at once when the engine no longer accepts work (runtime::call, with
    /// no bound: the work it posts runs before the shutdown's). Never call it on the I/O
    /// thread (`fallback` there).
    template <class T>
    T call(std::function<void(std::function<void(T)>)> start, T fallback) {
        return rt_.call<T>(std::move(start), std::move(fallback));
    }

    /// I/O thread: an idle pooled session, else a new one (connected within connect_timeout).
    void get_session(session_handler done);
    /// I/O thread: `s` holds nothing and may serve again. Sessions beyond settings::pool stay
    /// idle for idle_linger after their last use (a burst of waits reuses them instead of
    /// connecting again), then are closed.
    void put_session(std::shared_ptr<connection> s);
    static constexpr std::chrono::seconds idle_linger{5};
    /// I/O thread: ends holds on shutdown.
    void track(const std::shared_ptr<pg_hold>& h);
    using batch_done = connection::batch_handler;
    /// I/O thread: one batch on a pooled session, the session returned afterwards. At most
    /// `dlock_pool` sessions (or more while idle ones linger) run batches at once; more batches
    /// wait in a queue, in order, and run on the first of those sessions to finish (no
    /// connection is opened for one batch beyond the pool: under load a new session per batch
    /// cost more than the batch). A
    /// failed connect fails the batches queued behind it with the same error.
    void query(std::vector<statement> stmts, batch_done done);

    /// I/O thread: the sequence dlock_fence is known to exist (checked by the first
    /// fenced acquisition).
    bool fence_ready = false;
    /// I/O thread: the lease tables known to exist (by kind).
    std::set<lock_kind> tables_ready{};
    /// I/O thread: the table dlock_election is known to exist (election.hpp).
    bool election_ready = false;
    /// I/O thread: the sessions holding advisory locks (advisory_sessions.hpp), and how many
    /// are being opened for tries.
    std::vector<std::shared_ptr<holding_session>> holding{};
    std::size_t holding_opening = 0;
    /// I/O thread: advisory tries in line for a holding session with nothing in flight (every
    /// one busy and `dlock_pool` open: choose_session). drain_tries() calls them in order
    /// after each batch a holding session finishes; one returns false to stay first in line.
    /// Shutdown calls each with `cancelled` true, and it ends its attempt.
    std::deque<std::function<bool(bool cancelled)>> waiting_tries{};
    void drain_tries();
    /// I/O thread: advisory acquisitions started and not finished (advisory.cpp).
    std::size_t advisory_attempts = 0;

    /// I/O thread: `ready` runs once the session that LISTENs on every channel below is up (at
    /// once when it is; with an error when it cannot be set up: the caller then polls).
    void listen(std::function<void(std::error_code)> ready);
    /// I/O thread: whether the LISTEN session is up now.
    bool listening() const noexcept { return listening_; }
    /// I/O thread: `wake` runs once, at the next notification on `channel` (one of the
    /// channels below) with `payload`, or when the LISTEN session ends. Returns an id for
    /// forget(). An attempt registers before it sends, so a release that lands while its
    /// statement is in flight still wakes it.
    std::uint64_t on_notified(const std::string& channel, const std::string& payload,
                              std::function<void()> wake);
    void forget(std::uint64_t id);

    /// The last failure, for client::last_error_detail() ("" when none); any thread.
    void set_error(std::string text);
    std::string last_error() const;

private:
    engine(settings s, const log_options& log);
    void start();
    /// Stops accepting work and posts the closing of sessions and holds (once).
    void begin_shutdown() noexcept;
    struct queued_batch {
        std::vector<statement> stmts;
        batch_done done;
    };
    /// query(): `b` on a session of the pool (idle, else new); counted in querying_.
    void start_batch(queued_batch b);
    /// query(): `b` on `s`; then the next queued batch on `s`, or `s` back to the pool.
    void run_batch(const std::shared_ptr<connection>& s, queued_batch b);

    /// Set by create()'s deleter on the I/O thread: the thread deletes the engine after run().
    std::atomic<bool> dispose_after_run_{false};
    std::shared_ptr<const settings> settings_;
    std::string id_;
    client_metrics metrics_;
    runtime rt_; // its gate is the engine's: closed once shutdown has begun
    mutable std::mutex mu_;
    std::string last_error_{}; // guarded by mu_
    // I/O thread only:
    void arm_trim();
    std::vector<std::pair<std::shared_ptr<connection>, std::chrono::steady_clock::time_point>>
        idle_{}; // the last one used last
    std::unique_ptr<asio::steady_timer> trim_{};
    std::vector<std::weak_ptr<connection>> sessions_{};
    std::vector<std::weak_ptr<pg_hold>> holds_{};
    std::size_t querying_ = 0;           ///< sessions running (or opening for) query() batches
    std::deque<queued_batch> batches_{}; ///< query() batches waiting for one of those
    std::shared_ptr<connection> listener_{};
    bool listening_ = false;
    std::vector<std::function<void(std::error_code)>> listen_waiters_{};
    struct sleeper {
        std::string channel;
        std::string payload;
        std::function<void()> wake;
    };
    std::map<std::uint64_t, sleeper> sleepers_{};
    std::uint64_t next_sleeper_ = 1;
};

} // namespace dlock::detail::pg
