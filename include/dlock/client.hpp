// dlock/client.hpp: the entry point. A client owns one I/O thread and, per Redis server it
// talks to, one auto-pipelined command connection, one side connection for blocking callers and
// one pub/sub connection shared by every waiter; one watchdog renews all the locks it holds in
// batches. It is thread-safe; share one per process (or per Redis topology).
//
// The URL's scheme picks the backend: redis://, rediss://, unix://, redis-sentinel:// and
// redis-cluster:// are Redis; redlock:// and rediss-redlock:// are Redlock over independent
// Redis masters (dlock/redlock.hpp); zk:// (ZooKeeper) and postgresql:// (PostgreSQL) are the
// other backends, when this build has them. Every member works on every backend (a lock kind the
// backend does not offer is errc::unsupported). What one backend alone has is in its own header:
// dlock/redis.hpp (raw commands, masters, fenced_set, layout_of), dlock/redlock.hpp (votes),
// dlock/zookeeper.hpp (fenced_set), dlock/postgres.hpp.
//
//   dlock::client c("redis://127.0.0.1:6379");
//   dlock::mutex m = c.make_mutex("orders:42");          // Redisson RLock-compatible
//   { std::scoped_lock g(m); ... }                        // TimedLockable
//   if (auto l = c.acquire("job:nightly", {.wait = 5s})) { use(l.token()); }   // lease handle
//   dlock::redis::fenced_set(c, "orders:42:state", "orders:42:fence", token, "paid");  // redis.hpp
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/deliver.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/inspect.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/log.hpp>
#include <dlock/metrics.hpp>
#include <dlock/multi_lock.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class mutex;
class simple_mutex;
class fair_mutex;
class rw_mutex;
struct redlock_options;

namespace detail {
class lock_backend;
struct access;
} // namespace detail

/// The connection to one lock service (a Redis deployment, a ZooKeeper ensemble, a PostgreSQL
/// database) and the factory of its locks (see the top of this file). Thread-safe; movable, not
/// copyable. Destroy its lock objects and leases first.
class client {
public:
    ///@{
    /// Connects lazily: the constructor never blocks on the network. client_options: one
    /// Redis deployment; redlock_options (dlock/redlock.hpp): Redlock over its masters.
    /// `log`: the log sink (dlock/log.hpp) of a client of any URL: zk://, postgresql://,
    /// etcd:// as well as the Redis and Redlock schemes (for those it is client_options::log,
    /// set on every master for Redlock). Every backend says the same things with the same
    /// messages: "lock lost" (fields lock, kind, cause), "lock renewal failed; ...",
    /// "connection lost, reconnecting" and "reconnected" (fields backend, address,
    /// connection), plus what one backend alone has. The URL carries the settings a backend
    /// reads from text; a sink is a function, so it comes beside the URL.
    /// Errors: dlock::error(errc::configuration_error) for a bad URL or unsupported topology
    /// (a Redlock master that is not a standalone server, no masters, invalid durations),
    /// errc::unsupported for a backend this build lacks (zk:// without libzookeeper-st).
    explicit client(std::string_view url);
    client(std::string_view url, log_options log);
    explicit client(client_options opts);
    explicit client(const redlock_options& opts);
    ///@}
    /// Stops the I/O thread and closes the connections; holds still open stop being renewed
    /// (their keys expire after their lease).
    ~client();
    /// Moves the connections and holds; the moved-from client must not be used.
    client(client&&) noexcept;
    /// Shuts this client down (as the destructor), then takes the other's connections.
    client& operator=(client&&) noexcept;

    /// The options in effect (parsed from the URL, or as given); default options on a backend
    /// other than Redis (its URL carries its own settings; its log sink is not shown here).
    const client_options& options() const noexcept;
    /// The backend this client stands on: "redis", "redlock", "zookeeper" or "postgresql".
    std::string_view backend_name() const noexcept;
    /// This client's id: a random UUID, the first half of every owner field it writes.
    const std::string& id() const noexcept;

    /// A Redisson-compatible reentrant lock object (TimedLockable, per-thread ownership).
    /// Errors: errc::invalid_argument for an empty name or one whose hash tag is empty.
    mutex make_mutex(std::string name);
    /// A simple lock object (SET NX PX; not reentrant).
    simple_mutex make_simple_mutex(std::string name);
    /// A Redisson-compatible fair lock object (FIFO among waiters; otherwise like make_mutex).
    fair_mutex make_fair_mutex(std::string name);
    /// A Redisson RReadWriteLock-compatible read-write lock object (dlock/rw_mutex.hpp).
    rw_mutex make_rw_mutex(std::string name);

    ///@{
    /// What the lock `name` of `kind` looks like on the server (holders, waiters, lease,
    /// fencing counter), and the locks that exist now whose names match `pattern` (glob with
    /// `*` and `?`; empty = all). Blocking: one or a few round trips.
    /// Errors: as acquire(); errc::unsupported for a kind the backend does not offer.
    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec);
    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec);
    ///@}

    ///@{
    /// Ends the lock `name` of `kind` whoever holds it (an operator's tool, as `dlock unlock
    /// --force`); its holder learns at its next renewal or check. Returns whether a lock was
    /// ended (false when there was none). Redis: the lock object's force_unlock() of the
    /// kind (deletes the key, wakes the waiters; read and write both break the read-write
    /// lock). PostgreSQL: advisory kinds terminate the holding backends
    /// (pg_terminate_backend); shedlock sets lock_until to now and keeps the row (as ShedLock
    /// requires); lease sets expires_at to now and keeps the row, versioned deletes it, a
    /// semaphore expires every permit's row; each notifies the waiters. ZooKeeper: as
    /// its backend offers it. Blocking: one or a few round trips.
    /// Errors: errc::unsupported for a kind the backend does not offer; errc::invalid_argument
    /// for a bad name or on the client's I/O thread; otherwise as acquire().
    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec);
    bool force_unlock(std::string_view name, lock_kind kind);
    ///@}

    ///@{
    /// Takes a lock for a lease handle. Returns an empty lease when not acquired within
    /// opts.wait. Blocking: up to opts.wait plus one command timeout.
    lease acquire(std::string_view name, const acquire_options& opts = {});
    lease acquire(std::string_view name, const acquire_options& opts, std::error_code& ec);
    ///@}
    /// Completes with void(std::error_code, lease).
    template <class CompletionToken>
    auto async_acquire(std::string name, acquire_options opts, CompletionToken&& token);

    ///@{
    /// Takes all of `locks` or none (dlock/multi_lock.hpp: order, one wait, leases, loss).
    /// Returns an empty multi_lease when not acquired within opts.wait (opts.kind is ignored).
    /// Errors: errc::invalid_argument for an empty set, a name given twice or a bad option;
    /// otherwise as acquire(). Blocking: up to opts.wait plus the releases of a partial set.
    multi_lease acquire_all(std::span<const lock_ref> locks, const acquire_options& opts = {});
    multi_lease acquire_all(std::span<const lock_ref> locks, const acquire_options& opts,
                            std::error_code& ec);
    multi_lease acquire_all(std::initializer_list<lock_ref> locks,
                            const acquire_options& opts = {});
    ///@}
    /// Completes with void(std::error_code, multi_lease).
    template <class CompletionToken>
    auto async_acquire_all(std::vector<lock_ref> locks, acquire_options opts,
                           CompletionToken&& token);

    ///@{
    /// Campaigns in the election `name` with `value` (dlock/election.hpp): returns the
    /// leadership once this participant leads, or an empty one when it did not within
    /// opts.wait (nullopt: wait for ever; 0: lead only if nobody else does). Not elected within
    /// the wait, the participant's entry is removed again.
    /// Blocking: up to opts.wait plus one request timeout; not on the client's I/O thread.
    /// Errors: errc::invalid_argument for a bad name (the reason in last_error_detail() and in
    /// the exception), a value over leadership::max_value_size, or on the I/O thread;
    /// errc::unsupported on a backend without elections (today Redlock);
    /// otherwise as acquire().
    leadership campaign(std::string_view name, std::string value,
                        const campaign_options& opts = {});
    leadership campaign(std::string_view name, std::string value, const campaign_options& opts,
                        std::error_code& ec);
    ///@}

    /// Async twin of campaign(): completes with void(std::error_code, leadership) (an empty
    /// leadership when not elected within opts.wait). Errors: as campaign().
    template <class CompletionToken>
    auto async_campaign(std::string name, std::string value, campaign_options opts,
                        CompletionToken&& token);

    ///@{
    /// The current leader of the election `name` (its value and epoch), or nullopt when
    /// vacant (nobody campaigns). On ZooKeeper: the data and czxid of the lowest node, as
    /// Curator's LeaderLatch.getLeader() reads it; on etcd: the value and create revision of
    /// the oldest key (Election.Leader). Blocking: a few round trips.
    /// Errors: as campaign().
    std::optional<leader_info> leader(std::string_view name);
    std::optional<leader_info> leader(std::string_view name, std::error_code& ec);
    ///@}

    ///@{
    /// Observes the election `name`: `cb` runs first with the current state (a consistent
    /// snapshot: the leader and its value at one point, or nullopt = vacant), then after every
    /// change: a new leader, a new value (proclaim), a vacancy. Consecutive calls always
    /// differ; a change and its undoing between two reads may be missed, never reported out
    /// of order. After a reconnect, or a new session when the old one expired, it catches up
    /// (one call with the state then, if it changed).
    /// Thread safety: `cb` runs on the client's I/O thread, one call at a time; it must not
    /// block nor call synchronous dlock functions (they fail there with
    /// errc::invalid_argument). Lifetimes: the callbacks run until the returned observation is
    /// stopped or destroyed (see observation::stop()); destroy it before the client.
    /// Blocking: until the first call of `cb` returned (one to a few round trips).
    /// Errors: as campaign(); the observation is then empty and `cb` was not called.
    observation observe(std::string_view name,
                        std::function<void(const std::optional<leader_info>&)> cb);
    observation observe(std::string_view name,
                        std::function<void(const std::optional<leader_info>&)> cb,
                        std::error_code& ec);
    ///@}

    ///@{
    /// Observes the election `name` in the completion-token form: the returned observation
    /// keeps the states, and observation::async_next() takes them (the first is the state at
    /// the start). Blocking, errors and lifetimes as the callback form above.
    observation observe(std::string_view name);
    observation observe(std::string_view name, std::error_code& ec);
    ///@}

    /// What went wrong last with the server, for messages: why its connection last failed,
    /// with the address and the system's or the server's reason ("connect 127.0.0.1:1:
    /// Connection refused", "resolve no-such-host.invalid: Host not found (authoritative)",
    /// "handshake with 127.0.0.1:6379: WRONGPASS ..."), or the text of the last error reply
    /// to one of this client's commands ("127.0.0.1:6379: WRONGTYPE Operation against a key
    /// holding the wrong kind of value ..."), whichever came last. Server text is cut at 256
    /// bytes; passwords never appear. Empty after a successful (re)connect until the next
    /// failure or error reply.
    /// Use: after a call failed with errc::unavailable, errc::auth_failed or a server-error
    /// code, to say why. The throwing overloads of acquire() and dlock::redis::command() put
    /// it into the exception's what() for those codes. Thread safety: any thread; with several
    /// threads calling at once, the detail may belong to another thread's call.
    std::string last_error_detail() const;

    /// The client's I/O executor (where async completions run by default).
    asio::any_io_executor get_executor() const;

    /// A copy of this client's counters and histograms (dlock/metrics.hpp says what each one
    /// measures). Blocking: never (relaxed atomic loads, a few small allocations).
    /// Thread safety: any thread, concurrently with everything else; the fields are read one
    /// by one, so two of them may be a few operations apart.
    metrics_snapshot metrics() const;

private:
    friend struct detail::access;
    /// Throws dlock::error(ec, last_error_detail()) when `ec` is a failure it can explain.
    void throw_with_detail(const std::error_code& ec) const;
    /// The non-template parts of the async templates below.
    void start_async_acquire(std::string name, const acquire_options& opts,
                             std::function<void(std::error_code, lease)> done);
    void start_async_campaign(std::string name, std::string value, const campaign_options& opts,
                              std::function<void(std::error_code, leadership)> done);
    void start_async_acquire_all(std::vector<lock_ref> locks, const acquire_options& opts,
                                 std::function<void(std::error_code, multi_lease)> done);

    /// A client over `backend` (detail::access::make_client: the URL constructor and tests).
    explicit client(std::shared_ptr<detail::lock_backend> backend);

    std::shared_ptr<detail::lock_backend> backend_{}; // Redis, Redlock, ZooKeeper, PostgreSQL
};

// ---- async templates ---------------------------------------------------------------------

template <class CompletionToken>
auto client::async_acquire(std::string name, acquire_options opts, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, lease)>(
        [this](auto handler, std::string n, acquire_options o) {
            detail::initiation_scope scope;
            start_async_acquire(
                std::move(n), o,
                detail::completion<std::error_code, lease>(std::move(handler), get_executor()));
        },
        token, std::move(name), std::move(opts));
}

template <class CompletionToken>
auto client::async_acquire_all(std::vector<lock_ref> locks, acquire_options opts,
                               CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, multi_lease)>(
        [this](auto handler, std::vector<lock_ref> l, acquire_options o) {
            detail::initiation_scope scope;
            start_async_acquire_all(std::move(l), o,
                                    detail::completion<std::error_code, multi_lease>(
                                        std::move(handler), get_executor()));
        },
        token, std::move(locks), std::move(opts));
}

template <class CompletionToken>
auto client::async_campaign(std::string name, std::string value, campaign_options opts,
                            CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, leadership)>(
        [this](auto handler, std::string n, std::string v, campaign_options o) {
            detail::initiation_scope scope;
            start_async_campaign(std::move(n), std::move(v), o,
                                 detail::completion<std::error_code, leadership>(std::move(handler),
                                                                                 get_executor()));
        },
        token, std::move(name), std::move(value), std::move(opts));
}

} // namespace dlock
