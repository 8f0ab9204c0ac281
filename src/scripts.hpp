// The Lua scripts of src/scripts/*.lua, with their SHA1 for EVALSHA.
#pragma once

#include <string_view>

namespace dlock::detail {

struct script {
    std::string_view text;
    std::string_view sha; ///< 40 lowercase hex chars
};

enum class script_id {
    lock_acquire,
    lock_release,
    lock_renew,
    lock_force_unlock,
    simple_release,
    simple_renew,
    fenced_set,
    simple_handover,
    lock_handover,
    count_
};

/// Thread safety: safe from any thread (computed once).
const script& get_script(script_id id) noexcept;

} // namespace dlock::detail
