// cli.hpp: dlock::cli::run, the whole `dlock` command as a function, so
// tests drive it with injected streams and tools/dlock/main.cpp is one line.
//
//   dlock [--url URL]... <command> [options]
//   dlock exec [--wait D] [--lease D] [--watchdog D] [--kind K] [--kill-after D]
//              [--warn-signal SIG [--warn-margin D]] [--max-hold D] NAME -- CMD...
//   dlock status [--json] NAME...  |  status --watch [--interval D] NAME...
//   dlock list [--json] [PATTERN]  |  list --watch [--interval D] [PATTERN]
//   dlock keys [--kind K] NAME
//   dlock unlock --force NAME
//   dlock demo [--processes K] [--threads T] [--stock N]
//   dlock bench [--json] [--workers N] [--keys N] [--seconds S] [--kind K] [--scenario X]
//
// Exit codes (sysexits.h; the table is exit_code_help in common.cpp, printed by --help):
//   0..255  exec: the child's status (128 + signal number when a signal killed it;
//           127 / 126 when the command was not found / not executable)
//   64 usage, 65 NAME is not a lock, 69 unavailable, 70 internal, 71 system call failed,
//   73 exec: lease lost, 75 exec: not acquired within --wait, 76 server error reply,
//   77 ACL denied (authentication failures are 69, as the product page says), 78 unsupported server
//   or deployment, 128+N interrupted. dlock itself never exits 1, so a script can tell its
//   command's exit 1 from dlock's.
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
