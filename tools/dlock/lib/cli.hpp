// dlock::cli: the `dlock` command line (product page §6).
//
// Exit codes (sysexits.h where one fits):
//   0..255  exec: the child's status (128 + signal number when a signal killed it)
//   64      usage error (EX_USAGE): bad option, duration, name or URL
//   69      Redis unreachable or authentication failed (EX_UNAVAILABLE)
//   73      exec: the lease was lost while the child ran (child got SIGTERM, then SIGKILL)
//   75      exec: not acquired within --wait (EX_TEMPFAIL)
//   1       any other failure (one line on stderr)
#pragma once

#include <iostream>

namespace dlock::cli {

/// Parses `argv` and runs one command. Output goes to `out`, diagnostics to `err` (one line).
/// The password (URL or $DLOCK_PASSWORD) never appears in either.
int run(int argc, char** argv, std::ostream& out = std::cout, std::ostream& err = std::cerr);

} // namespace dlock::cli
