// core log helpers: build a dlock::log_record only when a sink wants its level, and never let
// a sink's exception escape into the library. The library writes nothing to stdout/stderr.
//
// The messages below are the same on every backend (a user's filter on "lock lost" or
// "reconnected" works on all of them); the fields say which backend, address and connection.
//
// Rule for every call site: fields carry lock names, addresses, counts, durations, causes and
// bounded server error text; never a password, user name, owner field or token (log.hpp).
#pragma once

#include <dlock/log.hpp>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

inline bool log_enabled(const log_options& o, log_level l) noexcept {
    return o.sink && l >= o.level;
}

inline void log(const log_options& o, log_level l, std::string_view message,
                std::initializer_list<log_field> fields = {}) noexcept {
    if (!log_enabled(o, l)) return;
    try {
        o.sink(log_record{l, message, std::span<const log_field>(fields.begin(), fields.size())});
    } catch (...) { // a sink's failure is not the library's
    }
}

/// The fixed messages every backend uses for the events every backend has.
namespace log_message {
inline constexpr std::string_view lock_lost = "lock lost";
inline constexpr std::string_view renewal_failed =
    "lock renewal failed; the locks are lost if it keeps failing";
inline constexpr std::string_view connection_lost = "connection lost, reconnecting";
inline constexpr std::string_view reconnected = "reconnected";
} // namespace log_message

/// A connection (session, channel) that was up went down and is being re-established:
/// warning, fields backend, address, connection (its role: "command", "pubsub", "session",
/// "channel", "keepalive"), error.
inline void log_connection_lost(const log_options& o, std::string_view backend,
                                std::string_view address, std::string_view connection,
                                std::string_view error) noexcept {
    log(o, log_level::warning, log_message::connection_lost,
        {{"backend", backend}, {"address", address}, {"connection", connection}, {"error", error}});
}

/// A connection that had been up before is up again: warning, fields as above without error.
inline void log_reconnected(const log_options& o, std::string_view backend,
                            std::string_view address, std::string_view connection) noexcept {
    log(o, log_level::warning, log_message::reconnected,
        {{"backend", backend}, {"address", address}, {"connection", connection}});
}

/// A renewal of `locks` held locks failed (they are lost if it keeps failing): warning, fields
/// locks (the count), first_lock (the first one's name; empty: not given), kind, error.
inline void log_renewal_failed(const log_options& o, std::size_t locks, std::string_view first_lock,
                               std::string_view kind, std::string_view error) {
    if (!log_enabled(o, log_level::warning) || locks == 0) return;
    const auto count = std::to_string(locks);
    log(o, log_level::warning, log_message::renewal_failed,
        {{"locks", count}, {"first_lock", first_lock}, {"kind", kind}, {"error", error}});
}

/// The renewal of a client-wide session or lease (ZooKeeper's session, etcd's lease) is not
/// answered: "lock renewal failed" for the holds that observe it (`observers`, the live ones
/// counted; nothing when none lives), with no lock or kind named.
template <class T>
void log_session_renewal_failed(const log_options& o,
                                const std::vector<std::weak_ptr<T>>& observers,
                                std::string_view error) {
    if (!log_enabled(o, log_level::warning)) return;
    const auto holds = static_cast<std::size_t>(std::count_if(
        observers.begin(), observers.end(), [](const auto& w) { return !w.expired(); }));
    log_renewal_failed(o, holds, {}, {}, error);
}

/// At most `max` bytes of `s` (server error texts are the server's, bounded for a log line).
inline std::string_view bounded(std::string_view s, std::size_t max = 200) noexcept {
    return s.substr(0, max);
}

} // namespace dlock::detail
