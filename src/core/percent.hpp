// percent_decode: %XX escapes of URL parts (Redis URLs' userinfo and query, PostgreSQL URLs'
// dlock_* parameters).
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

/// Decodes `in` into `out` (%XX, hex either case; every other byte as is). False for a '%' not
/// followed by two hex digits (`out` is then incomplete).
bool percent_decode(std::string_view in, std::string& out);

} // namespace dlock::detail
