// SHA-1 (FIPS 180-4) for the Lua scripts' EVALSHA names. Our own few lines instead of
// OpenSSL's SHA1(), which in OpenSSL 3 fetches a provider and initialises the library: for a
// client that never uses TLS that start-up cost was a measurable part of a one-shot
// `dlock exec`. Not for security: Redis names scripts by this digest.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

/// The SHA-1 digest of `data` as 40 lowercase hex characters.
std::string sha1_hex(std::string_view data);

} // namespace dlock::detail
