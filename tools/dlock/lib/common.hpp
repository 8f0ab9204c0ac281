// common.hpp: pieces shared by the commands of `dlock`: exit codes, durations, connection
// options from --url / $DLOCK_URL / $DLOCK_PASSWORD, error-to-exit-code mapping, JSON strings.
#pragma once

#include <dlock/dlock.hpp>

#include <chrono>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::cli {

/// Exit codes of `dlock`: sysexits.h numbers, so that no failure of dlock itself looks like a
/// command's own exit 1. exec also returns the child's status. The table is printed by
/// `dlock --help` (exit_code_help), docs/dlock.1 and README.md; tests/cli/man_check.sh keeps
/// the three in step.
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int usage = 64;         ///< EX_USAGE: bad option, command, duration, name, URL
inline constexpr int data = 65;          ///< EX_DATAERR: NAME holds something that is not a lock
inline constexpr int unavailable = 69;   ///< EX_UNAVAILABLE: server unreachable, busy, lost
inline constexpr int software = 70;      ///< EX_SOFTWARE: an internal error of dlock
inline constexpr int os_error = 71;      ///< EX_OSERR: a system call failed (fork, pipe, ...)
inline constexpr int lost = 73;          ///< exec: the lease was lost while the child ran
inline constexpr int not_acquired = 75;  ///< EX_TEMPFAIL: not acquired within --wait
inline constexpr int server_error = 76;  ///< EX_PROTOCOL: the server answered with an error
inline constexpr int no_permission = 77; ///< EX_NOPERM: the ACL denied a command or key
inline constexpr int config = 78;        ///< EX_CONFIG: the server or deployment is unsupported
inline constexpr int signalled = 128;    ///< + signal number: killed by (or stopped on) a signal
} // namespace exit_code

/// The exit-code table as `dlock --help` prints it (one line per code).
extern const char* const exit_code_help;

/// A usage error (exit 64). The message is printed as one line after "dlock: ".
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// A diagnosed failure: its exit code and the one line that names the cause and what to do.
struct failure : std::runtime_error {
    failure(int exit, const std::string& message)
        : std::runtime_error(message)
        , code(exit) {}
    int code;
};

/// Every kind's name, from the library's table (dlock::kind_name; "lock" is the reentrant
/// lock), for --kind choices.
std::vector<std::string> kind_choices();

/// Parses a duration: digits followed by `ms`, `s`, `m` or `h`, or a bare `0`.
/// Edge values: "0s" is zero; a sign, a fraction, spaces, a bare non-zero number, an unknown
/// unit, or more than 1000 hours give nullopt.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// parse_duration() for the value of `option`. Errors: usage_error naming the option and value.
std::chrono::milliseconds duration_arg(std::string_view option, std::string_view text);

/// Options that come before (or, for convenience, after) the command.
struct global_options {
    std::vector<std::string> urls{}; ///< --url, repeatable; empty: $DLOCK_URL or the default
};

/// The default server when neither --url nor $DLOCK_URL is given.
inline constexpr std::string_view default_url = "redis://127.0.0.1:6379";

/// The URLs to use: --url values, else $DLOCK_URL, else default_url.
std::vector<std::string> effective_urls(const global_options& g);

/// Client options for the single URL of `g`, with $DLOCK_PASSWORD (when set and non-empty)
/// replacing the URL's password. Errors: usage_error for a bad URL (the message never holds the
/// password) or for several URLs (Redlock: redlock_options_for).
client_options connect_options(const global_options& g);

/// Redlock options when `g` means Redlock: several --url (one standalone master each) or one
/// redlock:// (rediss-redlock://) URL; each master as connect_options() would make it
/// ($DLOCK_PASSWORD, the CLI's client name). nullopt for one URL of another scheme.
/// Errors: usage_error for a bad URL, a master that is not standalone, or a redlock:// URL
/// among several --url.
std::optional<redlock_options> redlock_options_for(const global_options& g);

/// `url` with its password replaced by `password`, percent-encoded (redis:// and rediss://
/// only; other URLs are returned unchanged). For APIs that take a URL string.
std::string url_with_password(std::string_view url, std::string_view password);

/// The exit code for a library error: 64 invalid_argument; 69 unavailable, timeout,
/// ambiguous, server_busy, readonly, not_replicated, auth_failed; 76 out_of_memory,
/// server_error, no_script, moved, cross_slot, protocol_error; 77 permission_denied; 78
/// configuration_error; 70
/// otherwise. (A WRONGTYPE server error is 65; diagnose() tells it apart.)
int exit_code_for(const std::error_code& ec);

/// Turns a library error into a failure: exit code and one line naming the cause and what to
/// do. `doing` says what failed ("cannot acquire 'x'"); `detail` is client::last_error_detail()
/// (address and system reason, or the server's error text; may be empty); `held_type` is the
/// Redis type of the lock's key when the server said WRONGTYPE (empty: unknown); `backend` is
/// client::backend_name() ("redis", "zookeeper", "postgresql"): the remedy names its server.
failure diagnose(const std::error_code& ec, std::string_view doing, std::string_view detail,
                 std::string_view name = {}, std::string_view held_type = {},
                 std::string_view backend = "redis");

/// diagnose() with what `c` knows: its last_error_detail() and, for WRONGTYPE, `TYPE name`.
failure diagnose(client& c, const std::error_code& ec, std::string_view doing,
                 std::string_view name = {});

/// Writes `s` as a JSON string literal: quotes, backslashes and control bytes escaped (the
/// latter as \u00XX); other bytes, including UTF-8 sequences, are copied as they are.
void json_string(std::ostream& out, std::string_view s);

/// `text` on one line: CR and LF become spaces, trailing whitespace is dropped.
std::string one_line(std::string_view text);

/// Prints `rows` as a table: columns padded to their widest cell and separated by two spaces,
/// trailing spaces dropped. `right_aligned[c]` right-aligns column c (numbers); columns past
/// its end are left-aligned. Rows may have different lengths.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right_aligned = {});

/// The name of signal `sig` ("SIGTERM"), or "signal N".
std::string signal_name(int sig);
/// "5s" for whole seconds, "1500ms" otherwise.
std::string format_duration(std::chrono::milliseconds d);
/// A signal by name ("USR1", "SIGUSR1", "usr1") or number (1 to NSIG - 1); nullopt otherwise.
std::optional<int> signal_from_name(std::string_view s);

} // namespace dlock::cli
