// cli.hpp: dlock::cli::run, the whole `dlock` command as a function, so
// tests drive it with injected streams and tools/dlock/main.cpp is one line.
//
//   dlock [--url URL]... <command> [options]
//   dlock exec [--wait D] [--lease D] [--watchdog D] [--kind K] [--kill-after D] NAME -- CMD...
//   dlock status [--json] NAME
//   dlock list [--json] [PATTERN]
//   dlock unlock --force NAME
//   dlock demo [--processes K] [--threads T] [--stock N]
//   dlock bench [--json] [--workers N] [--keys N] [--seconds S] [--kind K] [--scenario X]
//
// Exit codes (sysexits.h where one fits):
//   0..255  exec: the child's status (128 + signal number when a signal killed it;
//           127 / 126 when the command was not found / not executable)
//   64      usage error (EX_USAGE): bad option, duration, name or URL, unimplemented kind
//   69      Redis unreachable or authentication failed (EX_UNAVAILABLE)
//   73      exec: the lease was lost while the child ran (child got SIGTERM, then SIGKILL)
//   75      exec: not acquired within --wait (EX_TEMPFAIL)
//   1       any other failure
// Every error is one line on stderr starting with "dlock: ". Passwords (from the URL or
// $DLOCK_PASSWORD) never appear in any output.
#pragma once

#include <iostream>

namespace dlock::cli {

/// Parses `argv` and runs one command. Command output goes to `out`, diagnostics to `err`
/// (exec's child writes to the process's own stdout/stderr, which it inherits).
/// Blocking: as long as the command runs (exec: until the child exits).
/// Thread safety: call from one thread at a time; exec and demo change the signal mask and
/// fork, so run them only in a process of their own.
/// Errors: never throws; every failure is an exit code (above) and one line on `err`.
int run(int argc, char** argv, std::ostream& out = std::cout, std::ostream& err = std::cerr);

} // namespace dlock::cli
