#include "redis/scripts.hpp"

#include "core/sha1.hpp"

#include <array>
#include <string>

namespace dlock::detail {
namespace {

constexpr auto script_count = static_cast<std::size_t>(script_id::count_);

struct table {
    std::array<std::string, script_count> shas;
    std::array<script, script_count> scripts;

    table() {
        for (std::size_t i = 0; i < script_count; ++i) {
            shas[i] = sha1_hex(script_texts[i]);
            scripts[i] = script{script_texts[i], shas[i]};
        }
    }
};

} // namespace

const script& get_script(script_id id) noexcept {
    static const table t;
    return t.scripts[static_cast<std::size_t>(id)];
}

} // namespace dlock::detail
