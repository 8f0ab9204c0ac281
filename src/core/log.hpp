// core log helpers: build a dlock::log_record only when a sink wants its level, and never let
// a sink's exception escape into the library. The library writes nothing to stdout/stderr.
//
// Rule for every call site: fields carry lock names, addresses, counts, durations, causes and
// bounded server error text; never a password, user name, owner field or token (log.hpp).
#pragma once

#include <dlock/log.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

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

/// At most `max` bytes of `s` (server error texts are the server's, bounded for a log line).
inline std::string_view bounded(std::string_view s, std::size_t max = 200) noexcept {
    return s.substr(0, max);
}

} // namespace dlock::detail
