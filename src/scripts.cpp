#include "scripts.hpp"

#include "dlock_scripts.hpp"
#include "sha1.hpp"

#include <array>
#include <string>

namespace dlock::detail {
namespace {

struct table {
    std::array<std::string, static_cast<std::size_t>(script_id::count_)> shas;
    std::array<script, static_cast<std::size_t>(script_id::count_)> scripts;

    table() {
        const std::array<std::string_view, static_cast<std::size_t>(script_id::count_)> texts{
            scripts::lock_acquire_lua,   scripts::lock_release_lua,
            scripts::lock_renew_lua,     scripts::lock_force_unlock_lua,
            scripts::simple_release_lua, scripts::simple_renew_lua,
            scripts::fenced_set_lua,     scripts::simple_handover_lua,
            scripts::lock_handover_lua};
        for (std::size_t i = 0; i < texts.size(); ++i) {
            std::string& s = shas[i];
            s = sha1_hex(texts[i]);
            scripts[i] = script{texts[i], s};
        }
    }
};

} // namespace

const script& get_script(script_id id) noexcept {
    static const table t;
    return t.scripts[static_cast<std::size_t>(id)];
}

} // namespace dlock::detail
