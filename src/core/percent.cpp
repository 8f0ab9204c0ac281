#include "core/percent.hpp"

#include <charconv>

namespace dlock::detail {

bool percent_decode(std::string_view in, std::string& out) {
    out.clear();
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out.push_back(in[i]);
            continue;
        }
        if (i + 2 >= in.size()) return false;
        unsigned v = 0;
        auto [p, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, v, 16);
        if (ec != std::errc{} || p != in.data() + i + 3) return false;
        out.push_back(static_cast<char>(v));
        i += 2;
    }
    return true;
}

} // namespace dlock::detail
