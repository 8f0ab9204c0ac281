// net::sync_lane: blocking calls that do their own I/O on the calling thread.
//
// A blocking call through the pipelined connection costs two thread hand-offs: the I/O thread
// wakes on the reply, then wakes the caller (BENCHMARKS.md measures the difference). A caller
// that is going to block anyway can instead write its command and read the reply itself
// (blocking recv() with SO_RCVTIMEO slices, so the deadline holds); this class is the side
// connection it does that on (one per client and node, opened on first use, reused).
//
// When the lane is used (call() returns result::done), and when not (result::not_taken, and
// nothing was sent: the caller uses the pipelined connection):
// - only when the pipelined connection is connected and idle (nothing queued, nothing in
//   flight), so a thread's blocking command never overtakes its own earlier async commands;
// - only one caller at a time (try_lock): concurrent callers take the pipelined connection,
//   where they share batched writes;
// - only plain TCP and Unix sockets (a TLS session is not worth a second handshake here);
// - not while a (re)connect of the lane failed less than reconnect_max ago.
// The lane connects to the address the pipelined connection is connected to (no second name
// lookup) and performs the same handshake (HELLO 3, AUTH, SETNAME, SELECT); any handshake
// failure leaves the error for the pipelined connection to report. When the pipelined
// connection reconnects (possibly to another address), the lane reconnects before its next use,
// so both always talk to the same server.
//
// Outcome rules are those of net::connection: a command written whose reply did not come by
// its deadline, or whose connection closed first, is errc::ambiguous (never re-sent); a
// malformed reply is errc::protocol_error; either closes the lane (the next call reconnects).
// Bytes that arrive with a reply after it (a second reply to one command) close the lane too.
// NOSCRIPT is answered by one EVAL of the fallback text on the lane.
//
// Thread safety: call() and shutdown() from any thread.
#pragma once

#include "redis/net/connection.hpp"
#include "redis/resp3/parser.hpp"

#include <dlock/config.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <system_error>

namespace dlock::net {

class sync_lane {
public:
    using clock = std::chrono::steady_clock;
    enum class result { done, not_taken };

    explicit sync_lane(const client_options& opts);
    ~sync_lane();
    sync_lane(const sync_lane&) = delete;
    sync_lane& operator=(const sync_lane&) = delete;

    /// Runs one command on the calling thread when the lane can take it (see above).
    /// Blocking: up to `deadline` (plus a connect of at most connect_timeout on first use).
    /// Returns not_taken (nothing sent, `out` and `ec` untouched) or done, with the reply in
    /// `out` or the failure in `ec` (ambiguous, protocol_error, cancelled after shutdown()).
    result call(connection& main, std::span<const std::string_view> args,
                std::string_view eval_fallback, clock::time_point deadline, resp3::value& out,
                std::error_code& ec);

    /// Ends the lane for good: a call in progress fails with errc::cancelled (its socket is shut
    /// down under it), later calls are not taken. Any thread.
    void shutdown() noexcept;

    /// Calls the lane has taken so far (result::done), for tests and statistics.
    std::uint64_t calls() const noexcept { return calls_.load(std::memory_order_relaxed); }

private:
    bool usable_locked(connection& main, clock::time_point deadline);
    bool connect_locked(connection& main, clock::time_point deadline);
    /// Writes all of `bytes`; false (and the lane closed) when it could not, in which case
    /// the server got at most part of the last command and cannot have run it.
    bool write_all(std::string_view bytes, clock::time_point deadline);
    /// Reads one reply (pushes are skipped). Errors close the lane.
    bool read_reply(resp3::value& out, clock::time_point deadline, std::error_code& ec);
    /// Whether bytes arrived after the reply just read (a server that answered one command
    /// twice, or a push after the reply); they would be read as the next command's reply, so
    /// the lane is then closed, as the pipelined connection drops itself on a reply nobody
    /// asked for. The reply read is still the command's own.
    bool desynchronised_locked() noexcept;
    void close_locked() noexcept;

    const client_options& opts_;
    std::mutex mu_; // held for a whole call (try_lock only); guards everything below
    int fd_ = -1;
    resp3::parser parser_;
    std::string out_buf_;
    std::string in_buf_;
    std::size_t in_pos_ = 0;
    clock::time_point retry_after_{};
    /// When the last reply arrived: within recheck_after of it the lane is taken as alive
    /// without asking the socket (see usable_locked).
    clock::time_point last_reply_{};
    std::uint64_t epoch_ = 0; ///< the shared connection's epoch when the lane connected

    std::mutex fd_mu_; // orders close() by the lane with ::shutdown() from shutdown()
    int live_fd_ = -1; // guarded by fd_mu_: the descriptor shutdown() may shut down
    std::atomic<bool> stopped_{false};
    std::atomic<std::uint64_t> calls_{0};
};

} // namespace dlock::net
