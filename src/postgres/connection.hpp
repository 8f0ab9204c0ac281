// pg::connection: one libpq session driven by Asio, non-blocking and in pipeline mode.
//
// Set-up is PQconnectStartParams + PQconnectPoll, each step waiting on the socket libpq names
// (PQsocket, wrapped in a non-owning posix::stream_descriptor that is re-assigned at every step
// because libpq may open a new socket per host or TLS attempt, and released before PQfinish).
// Once up, the session enters pipeline mode: run() sends a batch of statements and one
// PQpipelineSync, so a batch costs one round trip however many statements it has, and batches
// may follow each other without waiting. A statement with parameters is prepared (named) at its
// first use, its Parse pipelined just before its first execution, and executed by name after
// (settings::prepare; the server then parses, analyses and plans it once per session, not per
// call); a statement without parameters, or any when prepare is off, goes unnamed. The socket is
// always watched for input (PQconsumeInput, then PQgetResult while !PQisBusy), so a session the
// server ends (pg_terminate_backend, shutdown, crash) or a dead socket is noticed at once, not at
// the next statement: on_closed() tells the owner.
//
// Asio's reactor is edge-triggered and async_wait does not try the socket first, so after each
// PQconsumeInput the socket is polled (zero timeout) and read again while it has bytes; a TLS
// record larger than libpq's free buffer could stay inside OpenSSL until the next bytes
// arrive (lock statements' replies are far smaller).
//
// Thread safety: none; every member runs on the io_context's one thread. Handlers run there,
// inline from the I/O (they may call run() or close() on this connection).
#pragma once

#include "postgres/settings.hpp"

#include <dlock/error.hpp>

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

struct pg_conn;
struct pg_result;

namespace dlock::detail::pg {

/// One statement: SQL with $n parameters in text format (nullopt = NULL).
struct statement {
    std::string sql;
    std::vector<std::optional<std::string>> params{};
};

/// One statement's outcome (shares the PGresult).
class result {
public:
    result() = default;
    explicit result(::pg_result* r);
    bool ok() const noexcept;      ///< PGRES_COMMAND_OK or PGRES_TUPLES_OK
    bool aborted() const noexcept; ///< skipped because an earlier statement of the batch failed
    /// The SQLSTATE of an error ("" when none).
    std::string_view sqlstate() const noexcept;
    /// The server's primary message of an error.
    std::string message() const;
    int rows() const noexcept;
    /// Rows an INSERT / UPDATE / DELETE changed (PQcmdTuples); 0 when none or not such a command.
    std::int64_t affected() const noexcept;
    bool is_null(int row, int col) const noexcept;
    std::string_view value(int row, int col) const noexcept;
    std::optional<std::int64_t> int_value(int row, int col) const noexcept;
    bool bool_value(int row, int col) const noexcept { return value(row, col) == "t"; }

private:
    std::shared_ptr<::pg_result> r_{};
};

class connection : public std::enable_shared_from_this<connection> {
public:
    using batch_handler = std::function<void(std::error_code, std::vector<result>&)>;

    connection(asio::io_context& io, std::shared_ptr<const settings> s);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// Opens the session within settings::connect_timeout; `done` runs once. Errors:
    /// errc::unavailable (refused, unknown host, timeout), auth_failed, permission_denied,
    /// configuration_error (no such database), server_busy (too many clients); error_text()
    /// says why.
    void connect(std::function<void(std::error_code)> done);
    /// Sends `stmts` as one pipeline (one Sync). `done` runs once with every statement's
    /// result in order; an error result makes the later ones aborted(). `ec` is set when the
    /// session ended before the batch completed (results then partial): errc::ambiguous when
    /// `timeout` (from now; zero = none) passed first (the session is closed then), else
    /// errc::unavailable, or errc::cancelled by close().
    void run(std::vector<statement> stmts, std::chrono::milliseconds timeout, batch_handler done);
    /// `cb` runs once when the session ends other than by close(): server or socket.
    void on_closed(std::function<void(std::error_code)> cb) { on_closed_ = std::move(cb); }
    /// `cb` runs after every batch's handler (completed or failed): the holding sessions'
    /// waiting tries go then (engine::drain_tries). Null to clear.
    void after_batch(std::function<void()> cb) { after_batch_ = std::move(cb); }
    /// `cb(channel, payload)` runs for every NOTIFY this session receives (after LISTEN).
    void on_notify(std::function<void(std::string_view, std::string_view)> cb) {
        on_notify_ = std::move(cb);
    }
    /// Ends the session now; batches in flight complete with `why`. Idempotent.
    void close(std::error_code why = make_error_code(errc::cancelled));

    bool open() const noexcept { return up_ && !closed_; }
    bool idle() const noexcept { return inflight_.empty(); }
    /// Batches sent and not yet answered.
    std::size_t in_flight() const noexcept { return inflight_.size(); }
    int backend_pid() const noexcept { return pid_; }
    /// libpq's or the server's last error text for this session (never a password).
    const std::string& error_text() const noexcept { return error_text_; }
    /// When the last batch that completed was sent (steady clock).
    std::chrono::steady_clock::time_point last_ok_send() const noexcept { return last_ok_send_; }

private:
    struct batch {
        std::size_t count = 0;
        std::vector<result> results{};
        /// The statements this batch prepares: (index of the statement, its SQL). The Parse's
        /// result comes just before that statement's, and is not one of `results`.
        std::vector<std::pair<std::size_t, std::string>> parses{};
        std::size_t parses_read = 0;
        /// A Parse that failed: its error stands for its statement's (aborted) result.
        std::optional<result> parse_error{};
        bool have_current = false;
        batch_handler done{};
        std::chrono::steady_clock::time_point sent{};
        std::optional<std::chrono::steady_clock::time_point> deadline{};
    };

    void connect_step(int polling_status);
    void assign_socket();
    void arm_read();
    void on_readable();
    void process_results();
    /// The name to execute `s` (statement `i` of `b`) by, sending its Parse first when this is
    /// its first use here; nullptr: send it unnamed. False: libpq refused the Parse.
    bool statement_name(const statement& s, batch& b, std::size_t i, const char*& name);
    /// The result of a Parse this session sent for `sql`.
    void parse_read(batch& b, const std::string& sql, ::pg_result* r);
    void flush();
    void arm_deadline();
    void fail(std::error_code ec, std::string text);
    void finish(std::error_code ec, bool notify);
    static void notice_receiver(void* self, const ::pg_result* r);

    asio::io_context& io_;
    std::shared_ptr<const settings> settings_;
    ::pg_conn* conn_ = nullptr;
    asio::posix::stream_descriptor sd_;
    asio::steady_timer timer_;
    std::function<void(std::error_code)> connect_done_{};
    std::function<void(std::error_code)> on_closed_{};
    std::function<void()> after_batch_{};
    std::function<void(std::string_view, std::string_view)> on_notify_{};
    std::deque<batch> inflight_{};
    /// The named statements of this session by SQL; `ready` once the server accepted the Parse
    /// (until then other batches send the SQL unnamed).
    struct named {
        std::string name;
        bool ready = false;
    };
    std::unordered_map<std::string, named> prepared_{};
    std::uint64_t names_ = 0;
    std::string error_text_{};
    std::chrono::steady_clock::time_point last_ok_send_{};
    int pid_ = 0;
    bool up_ = false;
    bool closed_ = false;
    bool reading_ = false;
    bool writing_ = false;
};

} // namespace dlock::detail::pg
