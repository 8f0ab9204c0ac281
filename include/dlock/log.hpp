// dlock/log.hpp: the log sink. The library never writes to stdout or stderr; what it has to
// say (a renewal that failed, a lock lost, a connection lost and re-established, a server whose
// eviction policy can drop locks) goes to a function the user supplies, as a level, a fixed
// message and structured key/value fields: client(url, log_options) on every backend (zk://,
// postgresql://, etcd://, the Redis schemes), or client_options::log for Redis.
//
//   dlock::log_options log{.sink = [](const dlock::log_record& r) {
//       std::clog << dlock::to_string(r.level) << ' ' << r.message;
//       for (const auto& f : r.fields) std::clog << ' ' << f.key << '=' << f.value;
//       std::clog << '\n';
//   }};
//   dlock::client c("etcd://127.0.0.1:2379", log);
//
// Every backend uses the same messages for the same events: "lock lost" (fields lock, kind,
// cause), "lock renewal failed; the locks are lost if it keeps failing", "connection lost,
// reconnecting" and "reconnected" (fields backend, address, connection).
//
// What never appears in a record: passwords, user names of the ACL, lock owners (the owner
// field holds the client id, and a simple lock's owner is its secret 128-bit token) and
// tokens. Lock names, addresses, counts, durations and the server's error text do appear.
#pragma once

#include <functional>
#include <span>
#include <string_view>

namespace dlock {

/// How much a record matters; log_options::level drops the ones below it.
enum class log_level {
    debug,   ///< what dlock checked and found unremarkable
    info,    ///< expected events: a connection re-established, a check that could not run
    warning, ///< needs an operator's attention: a lock lost, a renewal failed, a reconnect
    error,   ///< reserved for failures of the library itself
};

/// "debug", "info", "warning", "error".
constexpr std::string_view to_string(log_level l) noexcept {
    switch (l) {
    case log_level::debug:
        return "debug";
    case log_level::info:
        return "info";
    case log_level::warning:
        return "warning";
    case log_level::error:
        return "error";
    }
    return "unknown";
}

/// One structured field, e.g. {"lock", "orders:42"}, {"cause", "deadline"}.
struct log_field {
    std::string_view key;   ///< e.g. "lock", "cause", "address", "error"
    std::string_view value; ///< the value as text
};

/// One message. Lifetimes: every view is valid only during the sink's call; copy what you keep.
struct log_record {
    log_level level = log_level::info; ///< how much it matters
    std::string_view message; ///< a fixed sentence, e.g. "lock lost" (no values spliced in)
    std::span<const log_field> fields; ///< the values, as key/value pairs
};

/// Thread safety: the sink is called from the client's I/O thread and from threads that call
/// into the client (unlock(), release(), ...), possibly concurrently: it must be thread-safe.
/// Blocking: it runs inline on those threads (the I/O thread included), so it must be quick;
/// hand records to a queue if writing them may block. It must not call back into the client
/// with a blocking call (errc::invalid_argument on the I/O thread). Exceptions it throws are
/// swallowed.
using log_sink = std::function<void(const log_record&)>;

/// The sink and its level: client(url, log_options), client_options::log.
struct log_options {
    /// Where records go. Default: empty (the library says nothing at all).
    log_sink sink{};
    /// Records below this level are not built. Default info.
    log_level level = log_level::info;
};

} // namespace dlock
