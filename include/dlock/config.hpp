// dlock/config.hpp: how a client reaches Redis. One URL picks the topology; the same settings
// are a plain struct with std::chrono fields for designated initialisers.
//
//   redis://[user[:password]@]host[:port][/db]       standalone, TCP
//   rediss://[user[:password]@]host[:port][/db]      standalone, TLS (chain and host name verified)
//   unix:///path/to/redis.sock[?db=N]                standalone, Unix socket
//   redis-sentinel://[user[:password]@]host:port[,host:port...]/master-name[/db]
//   rediss-sentinel://...                            the same, TLS to sentinels and data nodes
//   redis-cluster://host:port[,host:port...]
//
// Query parameters (any scheme but unix://, joined with '&'):
//   wait=N[:MS]              replication safety: wait_replicas = {N, MS (default 100)}
//   lock_delay=MS            failover_lock_delay
//   sentinel_user=U, sentinel_password=P   AUTH for the sentinels (percent-encoded)
// In a Sentinel URL the user and password before '@' authenticate to the data nodes (master
// and replicas); the sentinels get their own, or none.
//
// Passwords never appear in to_string(), error messages or logs.
#pragma once

#include <dlock/resp3.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock {

/// Which deployment a client talks to; set by the URL's scheme (redis://, rediss:// and
/// unix:// are standalone). README.md "Status" says which ones the client serves today.
enum class topology { standalone, sentinel, cluster };

/// One server address.
struct endpoint {
    /// Host name or IP address.
    std::string host{};
    /// TCP port; default 6379.
    std::uint16_t port = 6379;
    /// Same host text and port.
    friend bool operator==(const endpoint&, const endpoint&) = default;
};

/// TLS settings (rediss://). The server's chain and host name are always verified.
struct tls_options {
    bool enabled = false;      ///< set by rediss://; never falls back to plaintext
    std::string ca_file{};     ///< PEM CA bundle; empty = the system default trust store
    std::string cert_file{};   ///< client certificate (mutual TLS); empty = none
    std::string key_file{};    ///< client private key
    std::string server_name{}; ///< name to verify and send as SNI; empty = the URL host
};

/// How blocking calls (command(), mutex lock()/unlock(), lease release(), ...) do their I/O.
enum class blocking_io {
    /// Default. When the shared connection is idle, the calling thread writes its command and
    /// reads the reply itself on a side connection (one more connection per client, opened on
    /// first use; plain TCP and Unix sockets only), saving two thread hand-offs per call.
    /// Busy, TLS, or the side connection unavailable: as io_thread. Outcomes are the same.
    caller_thread,
    /// Always through the shared, auto-pipelined connection and the client's I/O thread.
    io_thread,
};

/// Everything a client needs to reach Redis, with defaults; parse_url() fills it from a URL.
/// Set fields with designated initialisers: `client_options{.endpoints = {{"redis", 6379}}}`.
struct client_options {
    /// The deployment (default standalone).
    topology kind = topology::standalone;
    /// Servers to contact: the one server, the sentinels, or the cluster seed nodes.
    std::vector<endpoint> endpoints{{"127.0.0.1", 6379}};
    std::string unix_socket{};       ///< non-empty: connect to this path instead of endpoints
    std::string username{};          ///< ACL user; empty = `default`
    std::string password{};          ///< empty = no AUTH
    int db = 0;                      ///< SELECT index (standalone and sentinel only)
    std::string master_name{};       ///< sentinel master name
    std::string sentinel_username{}; ///< ACL user for the sentinels; empty = `default`
    std::string sentinel_password{}; ///< empty = no AUTH to the sentinels
    /// TLS settings (enabled by a rediss:// URL).
    tls_options tls{};
    std::string client_name = "dlock"; ///< CLIENT SETNAME; empty = none
    /// Budget for TCP/TLS connect plus handshake (AUTH, HELLO, SELECT). Default 5 s.
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
    /// Budget for one command from the call to its reply. Default 5 s. A command that was
    /// written and got no reply in time completes with errc::ambiguous and the connection is
    /// recycled (its replies would otherwise be attributed to the wrong callers).
    std::chrono::milliseconds command_timeout = std::chrono::seconds(5);
    /// Health check: a connection that received nothing for this long sends a PING, so a
    /// silently dead peer is detected within idle_timeout + command_timeout. Default 15 s;
    /// zero disables it.
    std::chrono::milliseconds idle_timeout = std::chrono::seconds(15);
    /// Reconnect backoff: doubles from min to max, with full jitter. Defaults 10 ms / 1 s.
    std::chrono::milliseconds reconnect_min = std::chrono::milliseconds(10);
    /// Upper bound of the reconnect backoff (see reconnect_min).
    std::chrono::milliseconds reconnect_max = std::chrono::seconds(1);
    /// Lease used when a lock is taken without an explicit lease; the watchdog renews it every
    /// watchdog_lease / 3. Default 30 s (Redisson's lockWatchdogTimeout).
    std::chrono::milliseconds watchdog_lease = std::chrono::seconds(30);
    /// Fair lock: how long a queued waiter keeps its place without trying again. A live
    /// waiter tries (and so refreshes its place) at least every third of it; one that was
    /// killed is dropped from the queue after it, so it stalls the queue at most this long
    /// plus a third. Default 5 s. Must be >= 3 ms.
    std::chrono::milliseconds fair_waiter_timeout = std::chrono::seconds(5);
    /// See blocking_io. Default caller_thread.
    blocking_io sync_io = blocking_io::caller_thread;
    /// Local hand-over. When the final release of a lock finds a waiter of this same client
    /// asleep on that lock, one script passes the lock to that waiter (new owner, its lease, a
    /// fresh fencing token) instead of deleting it and publishing: one round trip, no herd, no
    /// barging, FIFO among the client's waiters. It is skipped, and the release publishes as
    /// usual, when another client is subscribed to the lock's channel (a waiter in another
    /// process, dlock's or Redisson's; checked with PUBSUB NUMSUB at most once per
    /// millisecond per lock), so other processes are not starved. Default true; false makes
    /// every release delete and publish, exactly as Redisson does.
    bool handover = true;
    /// Replication safety (Redisson's syncSlaves): after every acquisition, `WAIT replicas
    /// timeout` on the same connection. An acquisition that fewer than `replicas` replicas
    /// acknowledged within `timeout` is undone and reported as errc::not_replicated. Off
    /// (replicas == 0) by default. It narrows, and does not close, the window in which an
    /// asynchronous failover loses a lock: WAIT does not make Redis a CP system.
    struct replica_wait {
        int replicas = 0; ///< replicas that must acknowledge; 0 = off
        /// How long WAIT may block the connection for them.
        std::chrono::milliseconds timeout = std::chrono::milliseconds(100);
    } wait_replicas{};
    /// Lock-delay (Sentinel): when this client sees the master change, it refuses new
    /// acquisitions of every lock for this long, so a lock that the failover lost is not
    /// granted to a second owner while the first may still act on it (its valid_until was
    /// computed before the failover and may lie up to one lease ahead). Default: the watchdog
    /// lease (30 s), the longest a watchdog-renewed holder can believe it still holds the lock
    /// without hearing from the server; raise it to your longest fixed lease, or lower it if
    /// your holders check valid_until more often. Waiting acquisitions wait it out within their
    /// wait; a try_lock() during it returns false. Zero turns it off.
    std::optional<std::chrono::milliseconds> failover_lock_delay{};
    /// Limits of the reply parser (resp3::limits for each default).
    resp3::limits limits{};
};

/// Parses a URL of the forms above into options (other fields keep their defaults).
/// Errors: errc::configuration_error with a message that names the problem (never the password).
client_options parse_url(std::string_view url, std::error_code& ec, std::string* why = nullptr);
/// Throwing form: dlock::error(errc::configuration_error, why).
client_options parse_url(std::string_view url);

/// The options as a URL-like string with the password replaced by `***`.
std::string to_string(const client_options& opts);

} // namespace dlock
