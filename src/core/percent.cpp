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

std::vector<url_param> url_params(std::string_view query) {
    std::vector<url_param> out;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = item.find('=');
        const bool has = eq != std::string_view::npos;
        out.push_back(
            {item.substr(0, eq), has ? item.substr(eq + 1) : std::string_view{}, item, has});
    }
    return out;
}

} // namespace dlock::detail
