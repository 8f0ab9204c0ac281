// net::connection: one auto-pipelined connection to one Redis server.
//
// Callers on any thread call submit(); the request is encoded straight into a shared pending
// buffer under a short mutex, and the I/O thread writes everything that accumulated in one
// write while the previous write or reply was in flight (auto-pipelining). Replies are matched
// to requests in order. The connection reconnects by itself with capped, jittered backoff.
//
// Outcome rules (the point of this class):
// - a request not yet written when the connection dies stays queued for the next connection,
//   or completes with errc::unavailable when its deadline passes first;
// - a request written whose reply never came completes with errc::ambiguous, never retried;
// - an AUTH/HELLO failure is fatal for that connection: queued requests fail with
//   errc::auth_failed and are never sent as another user;
// - a protocol error or command timeout drops the connection (replies would be misattributed);
// - a connect that fails with a definite answer (connect_failure_is_definite: refused, the name
//   does not resolve, no such Unix socket) fails every queued request with errc::unavailable at
//   once instead of keeping it until its deadline; the connection still reconnects with backoff
//   (not with a target_source: there a refused master makes it resolve again);
// - last_failure() says why the connection last failed (address and system or server reason),
//   for messages; error replies to requests are remembered there too (bounded).
//
// Thread safety: submit() from any thread; everything else runs on the io_context's one thread.
#pragma once

#include "core/metrics.hpp"
#include "redis/resp3/parser.hpp"

#include <dlock/config.hpp>
#include <dlock/detail/request.hpp>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <sys/socket.h>
#include <variant>
#include <vector>

namespace dlock::net {

/// Which server a connection talks to (one endpoint, or a Unix socket path).
struct target {
    std::string host;
    std::uint16_t port = 0;
    std::string unix_socket;
};

/// The same TCP endpoint (host and port as given; no resolution): how Sentinel and Cluster tell
/// whether a master moved.
inline bool same_endpoint(const target& a, const target& b) noexcept {
    return a.host == b.host && a.port == b.port;
}

/// The one place that decides whether a failed connection attempt is a definite answer that
/// queued requests get at once (errc::unavailable) instead of waiting until their deadline for
/// a reconnect that cannot help: the server refused the connection (nothing listens there), the
/// host name does not resolve (no such host, no address), a Unix socket path does not exist.
/// A timeout, a reset, an unreachable network or a temporary resolver failure are retried
/// within the request's deadline. `transport_ec` is the socket's or resolver's error (Asio).
/// Not used by a connection with a target_source (Sentinel): there a refused connect makes it
/// resolve the master again, and queued requests wait for it until their deadline.
bool connect_failure_is_definite(const std::error_code& transport_ec) noexcept;

/// Longest server error text kept by connection::last_failure().
inline constexpr std::size_t max_failure_text = 256;

/// Where a connection finds its server before each connect, when that is not a fixed address
/// (Sentinel: the master the sentinels name). Such a connection also checks `ROLE` in its
/// handshake and treats a replica, a refused connect and the replies READONLY / LOADING /
/// MASTERDOWN as "the master moved": it calls invalidate(), re-sends the refused commands after
/// reconnecting (they were not carried out) and resolves again.
class target_source {
public:
    using resolved = std::function<void(std::error_code, target)>;
    virtual ~target_source() = default;
    /// I/O thread; `done` runs on the I/O thread (possibly inline).
    virtual void resolve(resolved done) = 0;
    /// I/O thread: `t` is not the master (any more).
    virtual void invalidate(const target& t) = 0;
    /// Whether the connection checks `ROLE` in its handshake and refuses a replica (false for
    /// a Cluster's map-loading connection, which any node may serve).
    virtual bool master_only() const noexcept { return true; }
};

/// Appends the connection handshake to `out`: HELLO 3 [AUTH user pass] [SETNAME name], then
/// SELECT db when db != 0. Returns how many replies it asks for.
std::size_t encode_handshake(std::string& out, const client_options& o);

class connection : public std::enable_shared_from_this<connection> {
public:
    /// Called on the I/O thread for every out-of-band reply: RESP3 pushes, and in pubsub mode
    /// every reply. Also called with a null value and `connected == true` after each successful
    /// (re)connect, so a subscriber can resubscribe.
    using push_handler = std::function<void(const resp3::value& push)>;
    using state_handler = std::function<void(bool connected)>;
    /// Command mode, I/O thread: an error reply MOVED / ASK / CLUSTERDOWN / TRYAGAIN arrived for
    /// `r`. Returns true when the handler took `r` over (it re-submits it somewhere and `r` is
    /// completed later), false to complete `r` with the reply as usual (Cluster routing,
    /// topology/cluster.hpp).
    using redirect_handler = std::function<bool(detail::request& r, const resp3::value& reply)>;

    enum class mode { command, pubsub };

    connection(asio::io_context& io, client_options opts, target where, mode m,
               std::shared_ptr<target_source> source = nullptr);
    ~connection();

    void start();
    /// Closes the socket and fails every queued and in-flight request with errc::cancelled.
    /// Thread safety: any thread; returns before the I/O thread has finished closing.
    void stop();

    /// Moves to the master the target source names now, if that is not the current server:
    /// stops writing, lets the replies of what was written arrive, then reconnects (queued
    /// requests wait for the new connection). Any thread; a no-op without a target source.
    void retarget();

    void submit(detail::request& r);
    /// Queues `reqs` back to back, in order, with nothing of other callers in between (ASKING
    /// followed by its command). Unlike submit(), keeps each request's `redirects` count.
    void submit_group(std::span<detail::request* const> reqs);
    /// Pubsub mode: writes a command with no reply slot (SUBSCRIBE and friends).
    void submit_oneway(std::span<const std::string_view> args);

    void set_push_handler(push_handler h) { on_push_ = std::move(h); }
    void set_state_handler(state_handler h) { on_state_ = std::move(h); }
    /// Set before start().
    void set_redirect_handler(redirect_handler h) { on_redirect_ = std::move(h); }

    bool connected() const noexcept { return connected_.load(std::memory_order_acquire); }
    /// True when connected and nothing is queued, being written or awaiting a reply; `epoch`
    /// is then the number of the current connection (it changes with every reconnect).
    /// Thread safety: any thread; the answer may be stale as soon as it returns.
    bool idle(std::uint64_t& epoch);
    /// The address of the server this connection is connected to and the connection's epoch,
    /// for a side connection (sync_lane) that must reach the same server without a second name
    /// lookup, and must follow when a reconnect lands elsewhere. False when not connected or
    /// over TLS.
    bool peer_address(sockaddr_storage& addr, socklen_t& len, std::uint64_t& epoch);
    const client_options& options() const noexcept { return opts_; }
    /// Commands, scripts, NOSCRIPT fallbacks, ambiguous outcomes and handshakes of this
    /// connection (and of the sync lane that follows it). Any thread.
    detail::wire_counters& counters() noexcept { return counters_; }
    const detail::wire_counters& counters() const noexcept { return counters_; }
    /// Why the connection last failed, or the text of the last error reply to a request
    /// (whichever came last; at most max_failure_text bytes of server text), for messages:
    /// "connect 127.0.0.1:1: Connection refused", "resolve no-such-host.invalid: Host not
    /// found (authoritative)", "127.0.0.1:6379: WRONGTYPE Operation against a key ...".
    /// Cleared by a successful handshake. Never holds a password. Thread safety: any thread.
    std::string last_failure() const;
    /// Records the text of an error reply that another transport (the sync lane) read for a
    /// request to this connection's server. Thread safety: any thread.
    void note_error_reply(std::string_view text);

private:
    using tcp = asio::ip::tcp;
    using tls_stream = asio::ssl::stream<tcp::socket>;
    using stream_t = std::variant<std::monostate, tcp::socket, asio::local::stream_protocol::socket,
                                  std::unique_ptr<tls_stream>>;

    struct pending_entry {
        detail::request* req; // nullptr: one-way command
        std::size_t begin, end;
    };

    void schedule_flush_locked();
    void do_connect();
    void connect_to_target(std::uint64_t gen);
    void begin_drain();
    void finish_drain();
    void requeue_front_locked(detail::request& r);
    void on_transport_ready();
    void handshake();
    void start_read();
    void on_read(std::error_code ec, std::size_t n);
    void dispatch_reply(resp3::value&& v);
    void flush();
    void on_written(std::error_code ec);
    void fail_connection(std::error_code why);
    /// A failed connect, resolve or TLS handshake: records "<what>: <reason>", and fails the
    /// queued requests at once when connect_failure_is_definite(transport_ec).
    void fail_connect(const std::error_code& transport_ec, std::string_view what);
    void note_failure(std::string text);
    std::string address() const; // "host:port" or "unix:/path", for messages
    void schedule_reconnect();
    void arm_deadline_tick();
    /// I/O thread: a request went out while the tick waited for the idle check; the short
    /// tick again (when connected: a connect arms it anyway).
    void rearm_tick();
    /// How long a deadline tick with nothing in flight may wait: until the idle check is due.
    std::chrono::steady_clock::duration until_idle_check() const;
    void direct_write_locked(detail::request& r);
    int plain_fd();
    void record_peer_locked(); // mu_ held, I/O thread
    bool check_idle();

    /// The health-check PING of an idle command connection (one at a time).
    struct ping_request final : detail::request {
        std::string_view cmd[1] = {"PING"};
        bool busy = false; // I/O thread
        void complete(std::error_code, resp3::value&&) override { busy = false; }
    };
    void expire_pending(std::chrono::steady_clock::time_point now, std::error_code ec);
    void fail_all_pending(std::error_code ec);
    void close_stream();

    template <class Handler>
    void async_write_bytes(Handler&& h);
    template <class Handler>
    void async_read_some_bytes(Handler&& h);

    asio::io_context& io_;
    client_options opts_;
    target target_;
    mode mode_;
    std::shared_ptr<target_source> source_; // null: target_ is fixed
    std::unique_ptr<asio::ssl::context> ssl_ctx_;
    stream_t stream_;
    tcp::resolver resolver_;
    asio::steady_timer connect_timer_;
    asio::steady_timer backoff_timer_;
    asio::steady_timer deadline_timer_;
    std::minstd_rand rng_;
    std::chrono::milliseconds backoff_;

    // Shared with submitting threads.
    mutable std::mutex mu_;
    std::string last_failure_;              // guarded by mu_: see last_failure()
    std::string pending_buf_;               // guarded by mu_
    std::vector<pending_entry> pending_;    // guarded by mu_
    bool flush_scheduled_ = false;          // guarded by mu_
    bool ready_ = false;                    // guarded by mu_: connected and handshake done
    bool writing_ = false;                  // guarded by mu_: an async_write is in flight
    int fd_ = -1;                           // guarded by mu_: plain socket for direct writes
    std::string direct_buf_;                // guarded by mu_
    std::deque<detail::request*> inflight_; // guarded by mu_: written, awaiting replies in order
    bool stopped_ = false;                  // guarded by mu_
    std::error_code sticky_error_;          // guarded by mu_: fail new requests fast (auth failure)
    sockaddr_storage peer_{};               // guarded by mu_: set when ready, plain sockets only
    socklen_t peer_len_ = 0;                // guarded by mu_: 0 = no address
    std::uint64_t epoch_ = 0;               // guarded by mu_: bumped by every completed handshake
    std::size_t requeued_ = 0;              // guarded by mu_: requests requeued by this drain
    bool sent_since_tick_ = false;          // guarded by mu_: a request was written or queued since
    bool tick_long_ = false;         // guarded by mu_: the deadline tick waits for the idle check
    detail::wire_counters counters_; // relaxed atomics, any thread

    // I/O thread only.
    std::string write_buf_;
    std::string read_buf_;
    std::size_t read_pos_ = 0;
    resp3::parser parser_;
    bool handshaking_ = false;
    std::size_t handshake_replies_ = 0;
    bool role_pending_ = false; // the last handshake reply is ROLE's
    bool draining_ = false;     // moving to another master: reconnect once inflight_ is empty
    std::error_code handshake_error_;
    std::string handshake_text_; // the first handshake error reply's text (bounded)
    ping_request ping_;
    std::chrono::steady_clock::time_point last_read_{};
    std::chrono::steady_clock::time_point last_ping_{};
    std::uint64_t generation_ = 0; // bumps on every new transport; stale callbacks compare it
    std::atomic<bool> connected_{false};
    push_handler on_push_;
    state_handler on_state_;
    redirect_handler on_redirect_;
};

} // namespace dlock::net
