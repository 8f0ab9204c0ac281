// dlock/error.hpp: the one error enum of the library, its std::error_category, and the
// exception type thrown by synchronous calls.
//
// Why one enum: callers branch on outcomes that matter for a lock (was the outcome ambiguous?
// is the server unreachable? did we lose the lock?), not on transport details. Transport
// failures that Asio reports (connection refused, reset, ...) are mapped onto these codes at the
// connection boundary; a Redis error reply (`-NOSCRIPT ...`) travels as a value in a reply and
// is classified with server_error_code() only when a caller turns it into an error.
//
// "Not acquired within the wait" is never an error: it is a `false` or empty result.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

/// Every error dlock reports, as std::error_code values of error_category() (named "dlock").
/// The numbers are stable: new codes are only appended.
enum class errc {
    // Lock outcomes.
    not_owner = 1, ///< unlock/extend by someone who does not hold the lock
    lock_lost,     ///< reserved: not produced today (a loss is signalled on the hold, and a call
                   ///< that finds its hold gone reports not_owner); kept so codes stay stable
    // Connectivity.
    unavailable, ///< cannot reach the server (refused, reset before write, DNS, timeout
                 ///< connecting); a refused connect or an unknown host fails queued calls at
                 ///< once, and client::last_error_detail() names the address and the reason
    ambiguous,   ///< the command was written but the connection died or timed out before its reply
    timeout,     ///< reserved: not produced today (a command whose deadline passes before it is
                 ///< written is `unavailable`); kept so codes stay stable
    cancelled,   ///< the operation was cancelled (client shut down, cancellation slot)
    // Security.
    auth_failed,       ///< AUTH/HELLO rejected (WRONGPASS, NOAUTH) or TLS verification failed
    permission_denied, ///< ACL NOPERM
    // Server conditions (Redis; other backends map their own conditions onto the nearest
    // code: out_of_memory, server_busy, readonly and server_error are meant to be shared).
    out_of_memory, ///< -OOM (maxmemory with noeviction)
    server_busy,   ///< -BUSY (a script is running), -LOADING, -MASTERDOWN, -TRYAGAIN, -CLUSTERDOWN
    readonly,      ///< -READONLY (wrote to a replica: failover in progress or wrong node)
    moved,         ///< Redis-only: -MOVED / -ASK reached a caller (redirection not followed)
    cross_slot,    ///< Redis-only: -CROSSSLOT
    no_script,     ///< Redis-only: -NOSCRIPT that the EVAL fallback could not resolve
    server_error,  ///< any other error reply (-ERR, -WRONGTYPE, Lua errors)
    // Local.
    protocol_error,      ///< malformed, oversized or unexpected reply; the connection is dropped
    configuration_error, ///< bad URL, option or combination of options
    invalid_argument,    ///< bad lock name, duration or other argument
    // Replication (added after the codes above; their values are stable).
    not_replicated, ///< acquired, but fewer replicas than client_options::wait_replicas asked
                    ///< acknowledged it in time: the acquisition was undone
    // Backends (added after the codes above; their values are stable).
    unsupported, ///< the client's backend does not offer this call or lock kind (a Redis-only
                 ///< call on ZooKeeper, a semaphore on Redis), or the library was built without
                 ///< the backend the URL names, or cannot load its client library (libpq.so.5)
};

/// The category of dlock::errc; its message() gives one short sentence per code.
const std::error_category& error_category() noexcept;

/// `e` as a std::error_code (found by argument-dependent lookup, so `ec == errc::not_owner`
/// and `std::error_code ec = errc::not_owner;` work).
inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

/// Classifies a Redis error reply by its first word (`NOSCRIPT`, `READONLY`, `MOVED`, ...);
/// an ACL denial inside a script ("ERR The user executing the script can't ...") is
/// errc::permission_denied like NOPERM.
/// Edge values: an empty string or an unknown prefix gives errc::server_error.
errc classify_server_error(std::string_view message) noexcept;

/// The exception thrown by the throwing overloads of synchronous calls.
class error : public std::system_error {
public:
    ///@{
    /// The error `ec` (or `e`), with an optional message that what() shows before the code's
    /// own.
    explicit error(std::error_code ec)
        : std::system_error(ec) {}
    error(std::error_code ec, const std::string& what)
        : std::system_error(ec, what) {}
    explicit error(errc e)
        : std::system_error(make_error_code(e)) {}
    error(errc e, const std::string& what)
        : std::system_error(make_error_code(e), what) {}
    error(errc e, const char* what)
        : std::system_error(make_error_code(e), what) {}
    ///@}
};

/// Throws dlock::error when `ec` is set. Used by every throwing overload.
inline void throw_if(const std::error_code& ec) {
    if (ec) throw error(ec);
}

} // namespace dlock

// The specialisation that makes dlock::errc convertible to std::error_code; hidden from
// doxygen, which cannot place a member of std.
/// @cond
template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
/// @endcond
