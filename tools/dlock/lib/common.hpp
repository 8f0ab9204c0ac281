// Shared pieces of the CLI commands: exit codes, durations, connecting, JSON strings.
#pragma once

#include <dlock/dlock.hpp>

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

namespace exit_code {
inline constexpr int usage = 64;
inline constexpr int unavailable = 69;
inline constexpr int lost = 73;
inline constexpr int not_acquired = 75;
inline constexpr int failure = 1;
} // namespace exit_code

/// Thrown for usage errors (exit 64); the message is printed as one line.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Parses "250ms", "30s", "5m", "1h" or "0". Errors: nullopt for anything else, negative
/// values, or values over 1000 hours.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// Like parse_duration but throws usage_error naming the option.
std::chrono::milliseconds duration_arg(const std::string& option, const std::string& text);

/// Global options shared by every command.
struct global_options {
    std::vector<std::string> urls; ///< from --url, else $DLOCK_URL, else redis://127.0.0.1:6379
};

/// Client options for the single URL of `g` (Redlock with several URLs is a usage error for
/// now), with $DLOCK_PASSWORD applied. Throws usage_error for a bad URL.
client_options connect_options(const global_options& g);

/// Maps an error to the exit code of the product page: 69 for unreachable/auth, 64 for
/// invalid arguments, 1 otherwise.
int exit_code_for(const std::error_code& ec);

/// Writes `s` as a JSON string literal (quotes, escapes, \u00XX for control bytes).
void json_string(std::ostream& out, std::string_view s);

} // namespace dlock::cli
