// zookeeper/session.hpp: one ZooKeeper session over Apache's C client, its single-threaded
// library (libzookeeper_st), driven from dlock's own I/O thread (session_io.cpp).
//
// The C client runs no thread of its own: the I/O thread asks it which socket events and which
// time it waits for (zookeeper_interest), waits for them with Asio, and lets it read, write and
// run its completions (zookeeper_process). A request is sent by the call that makes it, and its
// answer is read and completed on the I/O thread: no thread hop between dlock and the server.
// The callbacks never call back into the client: they copy the result and post it to the same
// executor, where the lock logic runs.
//
// Lease of the session (zookeeper-sql.md §3): valid_until = the latest time the leader surely
// saw the session (touches.hpp) + negotiated session timeout - drift_for(timeout)
// (core/drift.hpp: timeout/100 + 2 ms), on the steady clock. On a standalone server
// (`server_lag` 0) that is the send time of the last request it answered: it expires a session
// `timeout` after the last packet it received, which is after that send. In an ensemble a
// follower cut off from the leader goes on answering for up to syncLimit x tickTime, so an
// answer proves only requests sent `server_lag` before it (Z09, docs/design/zookeeper.md): the
// URL's, or what the backend settles from /zookeeper/config (server_lag.hpp) before the session
// serves a lock; the answers before that count as if answered then. A
// ping (exists on the chroot) every timeout/3 (with a lag: (timeout - 9/8 lag) / 4, so that
// renewals land with half of what is left) keeps it fresh while connected; when it passes while
// disconnected the observers are told (their locks count as lost), without waiting for the server's
// Expired event that a partitioned client never gets.
// The observers hear of a renewal once it moved valid_until by 1 % of the timeout since they
// last did (every ping's answer does; under load each answer renews), so a hold's valid_until
// lags the session's by less than that, on the safe side.
//
// Reconnects within the session are the C client's (it re-sends the session id and password
// and re-registers watches). An expired session is final: the handle is closed and the
// backend opens a new session for later acquisitions; holds of the old one are lost.
//
// Thread safety: start() from any thread; everything else on the I/O thread (the executor),
// except id(), negotiated(), connected() and valid_until() (atomics, any thread).
#pragma once

#include "zookeeper/touches.hpp"
#include "zookeeper/url.hpp"

#include <dlock/log.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

/// The parts of a znode's Stat that dlock reads.
struct node_stat {
    std::int64_t czxid = 0;
    std::int64_t ctime = 0;
    std::int64_t mtime = 0; ///< the leader's wall clock at the last write, in ms since the epoch
    std::int64_t ephemeral_owner = 0;
    std::int32_t version = 0; ///< the data's version
    std::int32_t cversion = 0;
    std::int32_t num_children = 0;
};

/// One request's answer, copied out of the C client.
struct reply {
    int rc = 0;         ///< ZOK or a ZOO_ERRORS code
    std::string path{}; ///< create: the created path
    std::optional<node_stat> stat{};
    std::vector<std::string> children{};
    std::string data{};
    std::vector<int> results{}; ///< multi: each operation's code (all or none applied)
};

/// One operation of a multi() (a transaction: all apply or none).
struct multi_op {
    enum class type { check, set, create };
    type what = type::check;
    std::string path{};
    std::string data{}; ///< set, create
    int version = -1;   ///< check, set: -1 = any version (check: the node exists)
    int mode = 0;       ///< create: ZOO_PERSISTENT, ...
};

/// Why the session told its observers that their locks are gone.
enum class session_end { expired, deadline, closed };

/// What holds on a session implement (all on the I/O thread).
class session_observer {
public:
    virtual void session_valid_until(std::chrono::steady_clock::time_point t) = 0;
    virtual void session_ended(session_end why) = 0;

protected:
    ~session_observer() = default;
};

class session : public std::enable_shared_from_this<session> {
public:
    using clock = std::chrono::steady_clock;
    using callback = std::function<void(reply&&)>;
    /// A one-shot watch fired with the event type (ZOO_DELETED_EVENT, ...).
    using watch_fn = std::function<void(int type)>;

    /// Opens a session (the connect completes in the background). Errors: errc::unavailable
    /// when the C client refuses the connect string (unresolvable host) with `why`.
    /// `log`: the client's sink, told of a connection lost ("connection lost, reconnecting"),
    /// a reconnect ("reconnected") and an expiry ("session expired"), core/log.hpp.
    static std::shared_ptr<session> start(asio::any_io_executor ex, const zk_url& url,
                                          std::error_code& ec, std::string* why,
                                          const log_options& log = {});
    ~session();
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    // Requests (I/O thread); `done` runs once on the I/O thread.
    void create(const std::string& path, const std::string& data, int mode, callback done);
    void remove(const std::string& path, callback done);
    void exists(const std::string& path, watch_fn watch, callback done);
    void get(const std::string& path, watch_fn watch, callback done);
    /// Sets the node's data if its version is `version` (-1: any); reply.stat is the new Stat.
    void set(const std::string& path, const std::string& data, int version, callback done);
    void children(const std::string& path, watch_fn watch, callback done);
    /// The operations as one transaction (zoo_amulti): reply.rc is ZOK when all applied,
    /// reply.results each operation's code.
    void multi(std::vector<multi_op> ops, callback done);

    /// Reads /zookeeper/config (the ensemble's membership: "" outside quorum mode), which the
    /// C client reads outside the chroot.
    void get_config(callback done);
    /// The server_lag the lease uses (server_lag.hpp). A session whose URL gives none has no
    /// lease until it is settled: the answers before count from then, as if answered then.
    void settle_lag(std::chrono::milliseconds lag);
    bool lag_settled() const noexcept { return touches_.has_value(); }
    /// A standalone server, as far as the session knows: the lag is settled at 0 (the URL's
    /// `server_lag=0`, or an empty /zookeeper/config). I/O thread.
    bool standalone() const noexcept { return touches_.has_value() && lag_.count() == 0; }

    /// Runs `fn` with {} once connected (at once when connected), or with errc::unavailable
    /// when the session ended first.
    void when_connected(std::function<void(std::error_code)> fn);
    /// Closes the handle (its ephemeral nodes go at once); idempotent. I/O thread or after
    /// the I/O thread stopped.
    void close() noexcept;
    /// Ends the session for good: observers are told (session_end::closed), the handle is
    /// closed. I/O thread.
    void shut_down() { end(session_end::closed); }

    void add_observer(std::weak_ptr<session_observer> o);

    bool ended() const noexcept { return ended_.load(std::memory_order_acquire); }
    bool connected() const noexcept { return connected_.load(std::memory_order_acquire); }
    std::int64_t id() const noexcept { return id_.load(std::memory_order_acquire); }
    std::chrono::milliseconds negotiated() const noexcept {
        return std::chrono::milliseconds(negotiated_ms_.load(std::memory_order_acquire));
    }
    clock::time_point valid_until() const noexcept {
        return clock::time_point(clock::duration(valid_until_.load(std::memory_order_acquire)));
    }
    const zk_url& url() const noexcept { return url_; }
    /// Connection events seen: first connects and reconnects.
    std::uint64_t connects() const noexcept { return connects_.load(std::memory_order_relaxed); }
    std::uint64_t reconnects() const noexcept {
        return reconnects_.load(std::memory_order_relaxed);
    }
    std::uint64_t requests() const noexcept { return requests_.load(std::memory_order_relaxed); }
    /// The session id and password (tests expire a session with them; never logged).
    std::pair<std::int64_t, std::string> credentials() const;
    /// The last thing that went wrong (state change or request error), for messages.
    std::string last_error() const;

private:
    struct op;
    session(asio::any_io_executor ex, zk_url url, log_options log);
    friend struct session_access;

    static void global_watcher(zhandle_t*, int type, int state, const char* path, void* ctx);
    static void path_watcher(zhandle_t*, int type, int state, const char* path, void* ctx);
    void on_state(int state);
    void on_path_event(int type, const std::string& path);
    op* make_op(callback done);
    void add_watch(op* o, const std::string& path, bool child, watch_fn watch);
    void submit(op* o, int rc);
    void complete(op* o, reply&& r);
    void answered(clock::time_point sent);
    void end(session_end why);
    /// How often the session pings while connected (the lease's renewal).
    std::chrono::milliseconds ping_period() const;
    void schedule_tick();
    void tick();
    void note_error(std::string m);
    // The C client's I/O (session_io.cpp): what it waits for, and its turns.
    void pump();
    void arm(int event); ///< waits for ZOOKEEPER_READ or ZOOKEEPER_WRITE on the socket
    void on_io(int events);
    void watch_socket(int fd);
    void drop_socket() noexcept;
    /// Before a request: the C client sends each one as two send() calls (its 4-byte length,
    /// then its body) on a TCP_NODELAY socket, so two segments (across a network, two packets)
    /// per request. The socket stays corked (TCP_CORK) until the I/O thread's current turn
    /// ends (a posted uncork()), so all the requests of a turn (a create and its listing, say)
    /// leave as one segment.
    void cork_this_turn();
    void uncork() noexcept;

    asio::any_io_executor ex_;
    zk_url url_;
    log_options log_;
    zhandle_t* zh_ = nullptr;
    std::optional<asio::steady_timer> timer_; ///< dropped by end(): a hold may keep the session
    // The C client's socket and its next deadline (I/O thread; dropped with the handle).
    std::optional<asio::posix::stream_descriptor> socket_{};
    std::optional<asio::steady_timer> io_timer_{};
    clock::time_point io_deadline_ = clock::time_point::max();
    int socket_fd_ = -1;
    int corked_fd_ = -1;           ///< the socket corked until the turn ends, or -1
    std::uint64_t socket_gen_ = 0; ///< bumped when the socket is watched anew: stale waits end
    bool read_armed_ = false;
    bool write_armed_ = false;
    std::atomic<bool> ended_{false};
    std::atomic<bool> connected_{false};
    std::atomic<std::int64_t> id_{0};
    std::atomic<std::int64_t> negotiated_ms_{0};
    std::atomic<clock::rep> valid_until_{0};
    std::atomic<std::uint64_t> connects_{0};
    std::atomic<std::uint64_t> reconnects_{0};
    std::atomic<std::uint64_t> requests_{0};
    clock::time_point last_ping_{};
    bool ping_in_flight_ = false;
    clock::time_point created_;
    /// I/O thread: what the answers prove the leader saw; none until the lag is settled
    std::optional<touches> touches_{};
    std::chrono::milliseconds lag_{0};       ///< settled (0 before: pings as without a lag)
    clock::time_point answered_unsettled_{}; ///< the newest answered send before that
    clock::time_point told_until_{};         ///< the valid_until the observers last heard of
    bool ever_connected_ = false;
    std::vector<std::function<void(std::error_code)>> connect_waiters_{};
    std::vector<std::weak_ptr<session_observer>> observers_{};
    // Watches by (path, is_child); fired (and dropped) on the path's next event.
    std::map<std::pair<std::string, bool>, std::vector<std::pair<std::uint64_t, watch_fn>>>
        watches_{};
    std::uint64_t next_watch_ = 1;
    mutable std::mutex err_mu_;
    std::string last_error_{}; // guarded by err_mu_
    std::string password_{};   // guarded by err_mu_
};

} // namespace dlock::detail::zk
