#include "core/url_parts.hpp"

#include <charconv>

namespace dlock::detail {

bool parse_number(std::string_view v, long long& out) {
    auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), out);
    return e == std::errc{} && p == v.data() + v.size();
}

bool parse_host(std::string_view s, std::uint16_t default_port, url_host& out) {
    std::string_view name = s;
    std::string_view port;
    if (!s.empty() && s.front() == '[') { // [v6]:port
        const auto close = s.find(']');
        if (close == std::string_view::npos) return false;
        name = s.substr(0, close + 1);
        const auto rest = s.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return false;
            port = rest.substr(1);
        }
    } else if (const auto colon = s.rfind(':'); colon != std::string_view::npos) {
        name = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
    if (name.empty() || name.find_first_of(" \t@") != std::string_view::npos) return false;
    out.name.assign(name);
    out.port = default_port;
    if (!port.empty()) {
        long long v = 0;
        if (!parse_number(port, v) || v <= 0 || v > 65535) return false;
        out.port = static_cast<std::uint16_t>(v);
    }
    return true;
}

bool parse_hosts(std::string_view authority, std::uint16_t default_port, std::vector<url_host>& out,
                 std::string& bad) {
    std::size_t pos = 0;
    while (pos <= authority.size()) {
        const auto comma = authority.find(',', pos);
        const auto item =
            authority.substr(pos, comma == std::string_view::npos ? authority.npos : comma - pos);
        url_host h;
        if (!parse_host(item, default_port, h)) {
            bad.assign(item);
            return false;
        }
        out.push_back(std::move(h));
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return true;
}

} // namespace dlock::detail
