// random.hpp: unpredictable identifiers from the OS's random source.
//
// Tokens come from getrandom(2), read 4 KiB at a time into a per-thread buffer (256 tokens per
// system call instead of one RAND_bytes call, and its getpid(), per acquisition). A fork()
// discards every buffer: a pthread_atfork child handler bumps a generation number that each
// buffer checks, so a child process never hands out bytes its parent also used.
#pragma once

#include <cstddef>
#include <string>

namespace dlock::detail {

/// Fills `out` with `n` random bytes from the OS.
/// Thread safety: any thread. Errors: std::system_error when getrandom fails (it does not on
/// Linux >= 3.17 once the entropy pool is initialised; it blocks until then).
void random_bytes(unsigned char* out, std::size_t n);

/// 128 random bits as 32 lowercase hex characters (simple-lock tokens, latch ids).
std::string random_token();
/// A random (version 4) UUID in the 36-character form Redisson uses for client ids.
std::string random_uuid();

} // namespace dlock::detail
