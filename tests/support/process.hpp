// Child processes of the test fixtures (redis, PostgreSQL, ZooKeeper): spawn a server with its
// output in a log and bound to our life, wait for it with a budget, run a command and capture
// its output. No dependency on GoogleTest or on dlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace dlock::test {

struct spawn_options {
    std::vector<std::string> env_extra{}; ///< "NAME=value" added to the child's environment
    std::optional<int> cpu{};             ///< pin the child to this CPU
    /// Run as this uid and gid (a server that refuses root, as PostgreSQL's initdb does).
    std::optional<std::pair<uid_t, gid_t>> run_as{};
    /// SIGKILL the child when this process dies (long-running servers); off for short tools.
    bool die_with_parent = true;
};

/// Starts `argv` (argv[0] a path) as a child process with stdout and stderr appended to `log`
/// and stdin from /dev/null. Errors: std::runtime_error when fork fails (an exec failure is
/// the child's exit status 127, a failed change of identity 126).
pid_t spawn_child(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const spawn_options& opts = {});
/// Waits up to `budget` for the child `pid` to exit; true when it did (or was reaped).
bool reap_child(pid_t pid, std::chrono::milliseconds budget);
/// Waits for the child `pid` to exit; its exit status (128 when killed by a signal).
int wait_child(pid_t pid);

/// Runs `argv` and returns its stdout (trailing newlines trimmed) and exit status; stderr to
/// `err` (truncated) when given, else to /dev/null.
std::pair<std::string, int> run_capture(const std::vector<std::string>& argv,
                                        const std::vector<std::string>& env_extra = {},
                                        const std::filesystem::path& err = {});

/// Ends the child `pid` (SIGCONT, SIGTERM, SIGKILL after 5 s) and reaps it; `pid` becomes -1.
/// Nothing when `pid` <= 0.
void stop_child(pid_t& pid);
/// SIGKILL, reaped; `pid` becomes -1. Nothing when `pid` <= 0.
void kill_child(pid_t& pid);

/// Polls `pred` every 5 ms until it holds (true) or `budget` passed (false): for observing a
/// state another process or thread reaches, never as a stand-in for synchronisation.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds budget);

/// The last `max` bytes of the file `p` (a server log, for an error message); "" when unreadable.
std::string read_tail(const std::filesystem::path& p, std::size_t max);

/// Connects to 127.0.0.1:`port`, sends `request`, and returns all the server sends back until
/// it closes (1 s socket timeouts; "" on a connect error). The fixtures' readiness probes
/// (ZooKeeper's four-letter words, etcd's HTTP /health).
std::string loopback_exchange(std::uint16_t port, const std::string& request);

} // namespace dlock::test
