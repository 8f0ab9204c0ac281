// dlock/election.hpp: leader election: campaign for a name, lead while the handle lives, and
// watch who leads.
//
// client::campaign(name, value) makes this client one participant of the election `name`; it
// returns a `leadership` once the participant leads (or an empty one when it did not within
// the wait). The leadership is a lease (dlock/lease.hpp) whose hold is the leader's own entry on
// the server: its stop_token(), on_lost(), valid_until() and lost() work exactly as for a lock,
// and its token() is the **epoch**, strictly increasing across successive leaders of one name,
// usable as a fencing token (dlock/redis.hpp and dlock/zookeeper.hpp: fenced_set).
// client::leader(name) reads the current leader's value and epoch (nullopt: vacant);
// client::observe(name, cb) reports the leader, then every change, vacancy included.
//
// Backends: ZooKeeper, in the layout of Apache Curator 5.x's LeaderLatch, so Curator LeaderLatch
// participants and dlock elect one leader among them (docs/design/election.md): under the
// election's path (the name mapped as a lock name is), each participant is a protected
// EPHEMERAL_SEQUENTIAL node `_c_<uuid>-latch-<seq10>` whose data is its value (Curator: the
// participant id); the lowest sequence leads; every other participant watches the node just
// before its own. The epoch is the leader node's czxid. etcd, in the layout of etcd's
// concurrency.Election, so `etcdctl elect` and Go services take part: each participant is its
// lease's key "<name>/<lease hex>" with its value; the oldest key leads; the epoch is its create
// revision. PostgreSQL, in dlock's own layout (no incumbent has one): the leader holds the
// advisory lock of the name, and a row of dlock_election(name, value, epoch, pid) written in
// the batch that grants it; the epoch comes from the sequence dlock_fence. Redis (standalone,
// Sentinel, Cluster), in dlock's own layout (Redisson declined one): the leader holds the lock
// of the name (Redisson RLock's hash N) and the script that grants it writes the leader's record
// dlock_election:{N} (owner, epoch, value); the epoch is the lock's fencing counter
// redisson_lock_token:{N}; the leader's lease is the client's watchdog lease. Redlock answers
// errc::unsupported.
//
//   dlock::client c("zk://127.0.0.1:2181");
//   if (auto l = c.campaign("jobs/scheduler", "host-a:8080", {.wait = 10s})) {
//       while (!l.lease().stop_token().stop_requested()) work(l.epoch());
//   }   // the destructor resigns
#pragma once

#include <dlock/detail/deliver.hpp>
#include <dlock/lease.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/system_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace dlock {

namespace detail {
class lock_backend;
class observer;
class observe_queue;
struct access;
} // namespace detail

/// How a campaign waits.
struct campaign_options {
    /// How long campaign() waits to be elected. Default nullopt: wait for ever. Zero (or
    /// negative): one attempt; the participant leads only when nobody else does.
    std::optional<std::chrono::milliseconds> wait{};
};

/// The current leader of an election as the server stores it.
struct leader_info {
    /// The leader's value (its campaign value, or what it proclaimed since). On ZooKeeper the
    /// leader node's data: a Curator LeaderLatch participant's id; on etcd the leader key's.
    std::string value{};
    /// The leader's epoch: strictly increasing across successive leaders (ZooKeeper: the
    /// leader node's czxid; etcd: the leader key's create revision).
    std::uint64_t epoch = 0;

    /// Equal when both the value and the epoch are.
    friend bool operator==(const leader_info&, const leader_info&) = default;
};

/// The RAII handle of one won election (see the top of this file): made by client::campaign().
/// One thread uses a handle at a time; lease().lost(), stop_token() and on_lost() may be
/// called from any thread. Destroying it resigns (errors swallowed; call resign() to see them).
class leadership {
public:
    leadership() noexcept = default; ///< empty: not elected
    /// Moves the leadership; the moved-from handle is empty.
    leadership(leadership&&) noexcept;
    /// Resigns what this handle leads (as the destructor), then takes the other's leadership.
    leadership& operator=(leadership&&) noexcept;
    leadership(const leadership&) = delete;
    leadership& operator=(const leadership&) = delete;
    ~leadership();

    /// True when this handle won an election and has not resigned (also once lost: check
    /// lease().lost()). Empty means "not elected".
    explicit operator bool() const noexcept { return static_cast<bool>(lease_); }

    /// The election's name as given to campaign(); empty for an empty handle.
    const std::string& name() const;
    /// The epoch of this leadership (lease().token()); 0 for an empty handle.
    std::uint64_t epoch() const;

    ///@{
    /// The leadership as a lease: stop_token() is requested and on_lost() callbacks run when
    /// leadership is lost (the session expired, its deadline passed without an answer from the
    /// server, or someone deleted the leader's node); valid_until() is a lower bound of the
    /// server's view; token() is the epoch. Releasing it resigns.
    dlock::lease& lease() noexcept { return lease_; }
    const dlock::lease& lease() const noexcept { return lease_; }
    ///@}

    ///@{
    /// Changes this leader's value (what leader() and observe() report) without a new
    /// election; the epoch stays. On ZooKeeper it sets the leader node's data, which a Curator
    /// LeaderLatch reads as the leader's participant id (getLeader().getId()); on etcd it puts
    /// the value on the leader's key while its create revision is unchanged (Election.Proclaim).
    /// Curator interop: a LeaderLatch participant waits on a one-shot data watch of the node
    /// before its own and reacts to its deletion only, so a proclaim consumes the watch of a
    /// Curator participant queued right behind this leader: it then misses this leader's
    /// resignation or loss until its own session reconnects. Proclaim in an election shared
    /// with Curator participants only while none waits right behind the leader (dlock
    /// participants re-arm their watch on every event).
    /// Blocking: one round trip (not on the client's I/O thread: errc::invalid_argument).
    /// Errors: errc::not_owner when the leadership was lost, resigned or the handle is empty;
    /// errc::invalid_argument for a value over max_value_size; errc::unavailable,
    /// errc::ambiguous (the answer was lost: the value may or may not be set) for transport
    /// failures.
    void proclaim(std::string value);
    void proclaim(std::string value, std::error_code& ec);
    ///@}

    ///@{
    /// Gives up the leadership: the leader's entry is deleted, so the next participant leads.
    /// Idempotent and safe to retry: after an error other than errc::not_owner (the answer did
    /// not come in time: errc::ambiguous) the handle still holds the leadership and a second
    /// resign() waits for the same delete; resigning an empty, resigned or lost handle does
    /// nothing and reports no error (a lost leadership has no entry left to delete).
    /// Blocking: until the server confirmed the delete, at most the session timeout plus the
    /// connect timeout. On the client's I/O thread it only starts the delete.
    void resign();
    void resign(std::error_code& ec);
    ///@}

    /// The largest value campaign() and proclaim() accept (bytes): ZooKeeper refuses a request
    /// over its 1 MiB packet limit by closing the connection.
    static constexpr std::size_t max_value_size = 1000 * 1000;

private:
    friend struct detail::access;
    leadership(dlock::lease l, std::weak_ptr<detail::lock_backend> b) noexcept;

    dlock::lease lease_{};
    std::weak_ptr<detail::lock_backend> backend_{};
};

/// The RAII handle of one client::observe() subscription: destroying it or stop() ends the
/// callbacks. Movable, not copyable. Made by client::observe(name) without a callback, it is
/// read with async_next() (the completion-token form):
///
///   auto o = c.observe("jobs/scheduler");
///   for (;;) {
///       auto state = co_await o.async_next(asio::use_awaitable); // nullopt: vacant
///   }
class observation {
public:
    observation() noexcept = default; ///< empty: observes nothing
    /// Moves the observation; the moved-from handle is empty.
    observation(observation&&) noexcept;
    /// Stops what this handle observes (as the destructor), then takes the other's.
    observation& operator=(observation&&) noexcept;
    observation(const observation&) = delete;
    observation& operator=(const observation&) = delete;
    ~observation();

    /// True while this handle observes (until stop()).
    explicit operator bool() const noexcept { return state_ != nullptr; }

    /// Ends the callbacks. Once stop() returns, no callback runs any more (a callback running on
    /// the I/O thread meanwhile is waited for; called from inside the callback, it returns at
    /// once and that callback is the last). Idempotent; never throws.
    void stop() noexcept;

    /// The next state not yet taken, for an observation made by client::observe(name) without
    /// a callback. Signature `void(std::error_code, std::optional<leader_info>)`: first the
    /// state at the start (nullopt = vacant), then each change, vacancy included. States that
    /// came and went while nobody waited are coalesced (the latest is delivered; a change and
    /// its undoing may be missed, never reported out of order), and consecutive completions
    /// always differ. One async_next() at a time. The handler runs on its associated executor,
    /// else the client's.
    /// Errors: errc::cancelled once stopped or destroyed (a waiting async_next() completes so);
    /// errc::invalid_argument while another async_next() waits, or for an observation made
    /// with a callback.
    template <class CompletionToken>
    auto async_next(CompletionToken&& token);

private:
    friend struct detail::access;
    explicit observation(std::shared_ptr<detail::observer> s,
                         std::shared_ptr<detail::observe_queue> q = nullptr,
                         asio::any_io_executor ex = {}) noexcept
        : state_(std::move(s))
        , queue_(std::move(q))
        , executor_(std::move(ex)) {}

    void
    start_async_next(std::function<void(std::error_code, std::optional<leader_info>)> done) const;

    std::shared_ptr<detail::observer> state_{};
    std::shared_ptr<detail::observe_queue> queue_{}; // null: made with a callback
    asio::any_io_executor executor_{};               // the client's
};

template <class CompletionToken>
auto observation::async_next(CompletionToken&& token) {
    using state = std::optional<leader_info>;
    return asio::async_initiate<CompletionToken, void(std::error_code, state)>(
        [this](auto handler) {
            detail::initiation_scope scope;
            asio::any_io_executor fallback = executor_;
            if (!fallback) fallback = asio::system_executor();
            start_async_next(
                detail::completion<std::error_code, state>(std::move(handler), fallback));
        },
        token);
}

} // namespace dlock
