#include "core/sha1.hpp"

#include <array>
#include <cstdint>

namespace dlock::detail {
namespace {

constexpr std::uint32_t rotl(std::uint32_t x, int n) noexcept {
    return (x << n) | (x >> (32 - n));
}

void compress(std::array<std::uint32_t, 5>& h, const unsigned char* block) noexcept {
    std::array<std::uint32_t, 80> w{};
    for (int i = 0; i < 16; ++i)
        w[static_cast<std::size_t>(i)] =
            std::uint32_t{block[4 * i]} << 24 | std::uint32_t{block[4 * i + 1]} << 16 |
            std::uint32_t{block[4 * i + 2]} << 8 | std::uint32_t{block[4 * i + 3]};
    for (std::size_t i = 16; i < 80; ++i)
        w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (std::size_t i = 0; i < 80; ++i) {
        std::uint32_t f = 0, k = 0;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rotl(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

} // namespace

std::string sha1_hex(std::string_view data) {
    std::array<std::uint32_t, 5> h{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t left = data.size();
    for (; left >= 64; left -= 64, p += 64)
        compress(h, p);
    // Padding: 0x80, zeros, then the message length in bits as a 64-bit big-endian number.
    std::array<unsigned char, 128> tail{};
    for (std::size_t i = 0; i < left; ++i)
        tail[i] = p[i];
    tail[left] = 0x80;
    const std::size_t tail_len = left < 56 ? 64 : 128;
    const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
    for (int i = 0; i < 8; ++i)
        tail[tail_len - 1 - static_cast<std::size_t>(i)] =
            static_cast<unsigned char>(bits >> (8 * i));
    compress(h, tail.data());
    if (tail_len == 128) compress(h, tail.data() + 64);

    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(40);
    for (std::uint32_t word : h)
        for (int shift = 28; shift >= 0; shift -= 4)
            out.push_back(hex[(word >> shift) & 15]);
    return out;
}

} // namespace dlock::detail
