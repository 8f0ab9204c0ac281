// Cryptographically random identifiers (OpenSSL RAND_bytes, seeded by the OS).
#pragma once

#include <string>

namespace dlock::detail {

/// 128 random bits as 32 lowercase hex characters (simple-lock tokens, latch ids).
std::string random_token();
/// A random (version 4) UUID in the 36-character form Redisson uses for client ids.
std::string random_uuid();

} // namespace dlock::detail
