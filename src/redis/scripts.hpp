// The embedded Lua scripts (src/redis/**/*.lua) with their SHA1 for EVALSHA. The enum and the
// texts are generated from the folders (cmake/EmbedScripts.cmake): reentrant/acquire.lua is
// script_id::reentrant_acquire.
#pragma once

#include "dlock_scripts.hpp"

#include <string_view>

namespace dlock::detail {

struct script {
    std::string_view text;
    std::string_view sha; ///< 40 lowercase hex chars
};

/// Thread safety: safe from any thread (computed once).
const script& get_script(script_id id) noexcept;

} // namespace dlock::detail
