#include "scripts.hpp"

#include "dlock_scripts.hpp"

#include <openssl/sha.h>

#include <array>
#include <string>

namespace dlock::detail {
namespace {

struct table {
    std::array<std::string, static_cast<std::size_t>(script_id::count_)> shas;
    std::array<script, static_cast<std::size_t>(script_id::count_)> scripts;

    table() {
        const std::array<std::string_view, static_cast<std::size_t>(script_id::count_)> texts{
            scripts::lock_acquire_lua,      scripts::lock_release_lua,   scripts::lock_renew_lua,
            scripts::lock_force_unlock_lua, scripts::simple_release_lua, scripts::simple_renew_lua,
            scripts::fenced_set_lua,      scripts::simple_handover_lua, scripts::lock_handover_lua};
        for (std::size_t i = 0; i < texts.size(); ++i) {
            unsigned char md[SHA_DIGEST_LENGTH];
            SHA1(reinterpret_cast<const unsigned char*>(texts[i].data()), texts[i].size(), md);
            static constexpr char hex[] = "0123456789abcdef";
            std::string& s = shas[i];
            for (unsigned char c : md) {
                s.push_back(hex[c >> 4]);
                s.push_back(hex[c & 15]);
            }
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
