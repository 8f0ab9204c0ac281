// glob_match: the `dlock list PATTERN` match of the backends that filter names themselves
// (ZooKeeper walks its tree, PostgreSQL reads pg_locks and its tables; Redis leaves it to SCAN).
#pragma once

#include <string_view>

namespace dlock::detail {

/// True when `text` matches `pattern`: `*` any run of bytes, `?` one byte, everything else
/// itself; an empty pattern matches everything. Linear backtracking on the last `*`.
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

} // namespace dlock::detail
