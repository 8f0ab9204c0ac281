// detail::lock_backend: the one seam between the facades (dlock::client, lease, the lock objects
// of dlock/mutex.hpp and rw_mutex.hpp, multi_lock) and a lock service: Redis (src/redis/
// backend.cpp, every topology), Redlock (src/redis/redlock/backend.cpp), ZooKeeper
// (src/zookeeper/) and PostgreSQL (src/postgres/).
//
// dlock::client holds one backend, picked by the URL's scheme (src/backends.cpp, the one table
// of schemes). A backend owns its I/O (thread, sessions, connections), makes detail::hold
// objects (core/hold.hpp) for what it acquires and the lock objects of thread-bound locks
// (make_lock_object: Redis counts re-entries on the server, the others locally); the lease
// handle and the loss signal are shared by all.
//
// Contract (every implementation keeps it; the facades rely on it):
// - acquire(): blocking, up to opts.wait (nullopt = forever, 0 = one attempt) plus one
//   request timeout. Returns null and leaves ec clear when not acquired within the wait; null
//   with ec set on an error. Never called on the backend's own I/O thread (the caller checks
//   on_io_thread() and reports errc::invalid_argument).
// - async_acquire(): the same without blocking; `done` runs once on the backend's I/O thread.
// - A kind the backend does not offer is errc::unsupported (synchronously from
//   acquire(); through `done` from async_acquire()).
// - make_lock_object(): the default counts re-entry of thread-bound locks locally
//   (core/local_lock_object.cpp, as Curator counts it): the backend then sees one acquire()
//   per first hold of a thread and one release per last unlock.
// - The queries (is_locked, force_unlock, remaining_lease, inspect, list) answer for the lock
//   `name` of kind `kind` as the backend stores it; remaining_lease is nullopt where the
//   backend has no lease (a ZooKeeper node lives as long as its session).
// - Leader election (dlock/election.hpp; defaults: errc::unsupported): campaign() blocks as
//   acquire() does (opts.wait, null and ec clear when not elected; async_campaign() is its
//   twin, as async_acquire() is acquire()'s) and returns the hold of the
//   leader's entry (its fencing token = the epoch); proclaim() changes the value of a leader
//   hold this backend made (errc::not_owner once it ended); leader() reads the current leader
//   (nullopt = vacant); observe() delivers the current state, then every change, on the I/O
//   thread (core/observer.hpp), and returns once the first state was delivered. All blocking,
//   never on the I/O thread (the caller checks). A bad name is errc::invalid_argument with the
//   reason in last_error_detail().
// - shutdown(): ends every hold still open (their locks are freed as the backend frees them:
//   a closed ZooKeeper session deletes its ephemeral nodes, a closed PostgreSQL session drops
//   its advisory locks; a lease-table row expires) and stops the I/O; idempotent, never throws.
//
// Thread safety: every member from any thread, except as noted above.
#pragma once

#include "core/hold.hpp"
#include "core/local_lock_object.hpp"
#include "core/lock_object.hpp"
#include "core/observer.hpp"

#include <dlock/config.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/inspect.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/metrics.hpp>
#include <dlock/once.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::detail {

class lock_backend {
public:
    lock_backend() = default;
    lock_backend(const lock_backend&) = delete;
    lock_backend& operator=(const lock_backend&) = delete;
    virtual ~lock_backend() = default;

    /// The URL scheme's backend name for messages: "redis", "redlock", "zookeeper", "postgresql".
    virtual std::string_view backend_name() const noexcept = 0;
    /// The client options in effect (Redis parses them from its URL); defaults elsewhere (the
    /// URL of another backend carries its own settings).
    virtual const client_options& options() const noexcept {
        static const client_options defaults{};
        return defaults;
    }
    /// This client's id (a random UUID, or what the backend's owner fields carry).
    virtual const std::string& id() const noexcept = 0;
    /// The backend's I/O executor (where async completions run by default).
    virtual asio::any_io_executor executor() const = 0;
    /// True on the backend's own I/O thread (blocking calls are refused there).
    virtual bool on_io_thread() const noexcept = 0;
    /// Why the last request or connection failed (address and reason; never a password).
    virtual std::string last_error_detail() const = 0;
    /// This backend's counters and histograms (fields it does not count stay zero).
    virtual metrics_snapshot metrics() const = 0;
    /// Whether acquire() accepts `kind`.
    virtual bool supports(lock_kind kind) const noexcept = 0;
    /// Whether `name` can name a lock of `kind` here: errc::invalid_argument when it cannot
    /// (the default: empty or over 4096 bytes; Redis adds an empty hash tag), errc::unsupported
    /// for a kind not offered.
    virtual std::error_code check_name(std::string_view name, lock_kind kind) const {
        if (!supports(kind)) return make_error_code(errc::unsupported);
        return name.empty() || name.size() > 4096 ? make_error_code(errc::invalid_argument)
                                                  : std::error_code{};
    }
    /// Whether a thread that holds `kind` may take it again (mutex.cpp counts re-entries
    /// locally; a non-reentrant kind's second lock() by the holder is errc::invalid_argument).
    virtual bool reentrant(lock_kind kind) const noexcept { return kind != lock_kind::simple; }

    /// The lock object of a thread-bound lock `name` of `kind` on this backend (`self` is this
    /// backend's owning pointer, which the object keeps). Errors: dlock::error, with
    /// errc::invalid_argument for a bad name and errc::unsupported for a kind not offered.
    virtual std::shared_ptr<lock_object> make_lock_object(std::shared_ptr<lock_backend> self,
                                                          std::string name, lock_kind kind) {
        return make_local_lock_object(std::move(self), std::move(name), kind);
    }

    virtual std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                          std::error_code& ec) = 0;
    virtual void
    async_acquire(std::string name, const acquire_options& opts,
                  std::function<void(std::error_code, std::shared_ptr<hold>)> done) = 0;

    /// Downgrade: a read hold of the read-write lock that `write` (a live write hold from this
    /// backend, held by the calling thread) holds, granted without queueing behind waiters; the
    /// thread may then release the write hold and keep reading. The default (a backend without
    /// it): errc::unsupported, and mutex.cpp acquires the read hold as usual. Blocking; never on
    /// the I/O thread.
    virtual std::shared_ptr<hold> acquire_read_under(const hold& write, std::error_code& ec) {
        (void)write;
        ec = make_error_code(errc::unsupported);
        return nullptr;
    }

    virtual bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) = 0;
    /// Whether the read-write lock `name` is held in either mode (rw_mutex::is_locked). The
    /// default asks each side; a backend that can tell in one request overrides it.
    virtual bool rw_is_locked(std::string_view name, std::error_code& ec) {
        if (is_locked(name, lock_kind::write, ec) || ec) return !ec;
        return is_locked(name, lock_kind::read, ec);
    }
    virtual bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) = 0;
    virtual std::optional<std::chrono::milliseconds>
    remaining_lease(std::string_view name, lock_kind kind, std::error_code& ec) = 0;
    /// What `dlock status NAME` shows.
    virtual lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) = 0;
    /// The locks that exist now whose names match `pattern` (glob: * and ?; empty = all).
    virtual std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) = 0;

    /// Run once per period (dlock/once.hpp): claims the slot of `period` the server's clock is
    /// in for `name` (nullopt: claimed already), or gives a claim back. The facade checked the
    /// name and the period. The default: errc::unsupported.
    virtual std::optional<period_slot>
    claim_period(std::string_view name, std::chrono::milliseconds period, std::error_code& ec) {
        (void)name, (void)period;
        ec = make_error_code(errc::unsupported);
        return std::nullopt;
    }
    virtual bool release_period(std::string_view name, const period_slot& slot,
                                std::error_code& ec) {
        (void)name, (void)slot;
        ec = make_error_code(errc::unsupported);
        return false;
    }

    ///@{
    /// Leader election (the contract above; dlock/election.hpp). The defaults answer
    /// errc::unsupported.
    virtual std::shared_ptr<hold> campaign(std::string_view name, std::string value,
                                           const campaign_options& opts, std::error_code& ec) {
        (void)name, (void)value, (void)opts;
        ec = make_error_code(errc::unsupported);
        return nullptr;
    }
    /// campaign() without blocking: `done` runs once on the I/O thread.
    virtual void async_campaign(std::string name, std::string value, const campaign_options& opts,
                                std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
        (void)name, (void)value, (void)opts;
        asio::post(executor(),
                   [done = std::move(done)] { done(make_error_code(errc::unsupported), nullptr); });
    }
    virtual void proclaim(hold& leader, std::string value, std::error_code& ec) {
        (void)leader, (void)value;
        ec = make_error_code(errc::unsupported);
    }
    virtual std::optional<leader_info> leader(std::string_view name, std::error_code& ec) {
        (void)name;
        ec = make_error_code(errc::unsupported);
        return std::nullopt;
    }
    using observe_fn = std::function<void(const std::optional<leader_info>&)>;
    virtual std::shared_ptr<observer> observe(std::string_view name, observe_fn cb,
                                              std::error_code& ec) {
        (void)name, (void)cb;
        ec = make_error_code(errc::unsupported);
        return nullptr;
    }
    ///@}

    virtual void shutdown() noexcept = 0;
};

} // namespace dlock::detail
