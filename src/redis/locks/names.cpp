#include "redis/locks/names.hpp"

#include <array>

namespace dlock::detail {

std::string prefix_name(std::string_view prefix, std::string_view name) {
    std::string s;
    s.reserve(prefix.size() + name.size() + 3);
    s.append(prefix);
    if (name.find('{') != std::string_view::npos) {
        s.push_back(':');
        s.append(name);
    } else {
        s.append(":{");
        s.append(name);
        s.push_back('}');
    }
    return s;
}

namespace {
constexpr std::array<std::uint16_t, 256> make_crc_table() {
    std::array<std::uint16_t, 256> t{};
    for (unsigned i = 0; i < 256; ++i) {
        auto crc = static_cast<std::uint16_t>(i << 8);
        for (int b = 0; b < 8; ++b)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        t[i] = crc;
    }
    return t;
}
constexpr auto crc_table = make_crc_table();

std::uint16_t crc16(std::string_view s) noexcept {
    std::uint16_t crc = 0;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc_table[((crc >> 8) ^ c) & 0xff]);
    }
    return crc;
}
} // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
    const auto open = key.find('{');
    if (open != std::string_view::npos) {
        const auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1)
            key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<std::uint16_t>(crc16(key) & 16383);
}

} // namespace dlock::detail
