#include "postgres/advisory_key.hpp"

#include "core/sha1.hpp"

#include <dlock/error.hpp>

#include <openssl/evp.h>

#include <array>
#include <charconv>
#include <limits>

namespace dlock::detail::pg {
namespace {

constexpr std::size_t max_name = 4096;

struct preset_name {
    key_scheme scheme;
    std::string_view name;
};
constexpr std::array<preset_name, 7> presets{{
    {key_scheme::sha256_le64, "sha256-le64"},
    {key_scheme::sha1_le64, "sha1-le64"},
    {key_scheme::crc32_pair, "crc32-pair"},
    {key_scheme::crc32_i32, "crc32-i32"},
    {key_scheme::hashtext, "hashtext"},
    {key_scheme::int64, "int64"},
    {key_scheme::int32_pair, "int32-pair"},
}};

std::int64_t le64(const unsigned char* b) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = (v << 8) | std::uint64_t{b[i]};
    return static_cast<std::int64_t>(v);
}

std::int64_t combine(std::int32_t a, std::int32_t b) noexcept {
    return static_cast<std::int64_t>(
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
        static_cast<std::uint32_t>(b));
}

template <class T>
bool parse_decimal(std::string_view s, T& out) noexcept {
    if (s.empty()) return false;
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, out);
    return ec == std::errc{} && p == end;
}

/// 8 hex digits (either case) as .NET's int.TryParse(AllowHexSpecifier) reads them: the bits
/// of a uint32, so "ffffffff" is -1.
bool parse_hex8(std::string_view s, std::int32_t& out) noexcept {
    if (s.size() != 8) return false;
    std::uint32_t v = 0;
    for (char c : s) {
        unsigned d = 0;
        if (c >= '0' && c <= '9')
            d = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = static_cast<unsigned>(c - 'A' + 10);
        else
            return false;
        v = (v << 4) | d;
    }
    out = static_cast<std::int32_t>(v);
    return true;
}

/// DistributedLock's rules before hashing (PostgresAdvisoryLockKey.cs): true when the name is
/// encoded without a hash. Its lengths are UTF-16 code units; an ASCII name has as many bytes.
bool distributed_lock_direct(std::string_view name, advisory_key& k) noexcept {
    constexpr std::size_t max_ascii = 9; // 9 x 7 bits + 1 = 64
    bool ascii = name.size() <= max_ascii;
    for (char c : name)
        if (static_cast<unsigned char>(c) > 127) ascii = false;
    if (ascii) {
        // 7 bits per character, then one 0 bit, then 1s for the characters not used.
        std::uint64_t v = 0;
        for (char c : name)
            v = (v << 7) | std::uint64_t{static_cast<unsigned char>(c)};
        v <<= 1;
        for (std::size_t i = name.size(); i < max_ascii; ++i)
            v = (v << 7) | 0x7f;
        k.pair = true; // its Ascii encoding is used through the two-int4 functions
        k.value = static_cast<std::int64_t>(v);
        return true;
    }
    std::int32_t a = 0, b = 0;
    if (name.size() == 17 && name[8] == ',') {
        if (!parse_hex8(name.substr(0, 8), a) || !parse_hex8(name.substr(9), b)) return false;
        k.pair = true;
        k.value = combine(a, b);
        return true;
    }
    if (name.size() == 16) {
        if (!parse_hex8(name.substr(0, 8), a) || !parse_hex8(name.substr(8), b)) return false;
        k.value = combine(a, b);
        return true;
    }
    return false;
}

} // namespace

std::string_view to_string(key_scheme s) noexcept {
    for (const auto& p : presets)
        if (p.scheme == s) return p.name;
    return "?";
}

std::optional<key_scheme> key_scheme_from(std::string_view s) noexcept {
    for (const auto& p : presets)
        if (p.name == s) return p.scheme;
    return std::nullopt;
}

std::uint32_t crc32(std::string_view data) noexcept {
    // Reflected CRC-32 (IEEE 802.3, zlib's crc32), bitwise: names are short.
    std::uint32_t c = 0xffffffffU;
    for (char ch : data) {
        c ^= static_cast<unsigned char>(ch);
        for (int i = 0; i < 8; ++i)
            c = (c >> 1) ^ (0xedb88320U & (0U - (c & 1U)));
    }
    return c ^ 0xffffffffU;
}

std::int64_t le64_of_sha256(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned len = 0;
    if (EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr) != 1 ||
        len < 8)
        throw std::system_error(make_error_code(errc::invalid_argument), "SHA-256 failed");
    return le64(md.data());
}

std::int64_t le64_of_sha1(std::string_view data) {
    const std::string hex = sha1_hex(data);
    std::array<unsigned char, 8> b{};
    for (std::size_t i = 0; i < b.size(); ++i) {
        unsigned v = 0;
        std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
        b[i] = static_cast<unsigned char>(v);
    }
    return le64(b.data());
}

advisory_key make_key(std::string_view name, key_scheme scheme, std::error_code& ec) {
    ec.clear();
    advisory_key k;
    if (name.empty() || name.size() > max_name) {
        ec = make_error_code(errc::invalid_argument);
        return k;
    }
    switch (scheme) {
    case key_scheme::sha256_le64:
        k.value = le64_of_sha256(name);
        break;
    case key_scheme::sha1_le64:
        if (!distributed_lock_direct(name, k)) k.value = le64_of_sha1(name);
        break;
    case key_scheme::crc32_pair:
        k.pair = true;
        k.value = combine(static_cast<std::int32_t>(crc32(name) & 0x7fffffffU), 0);
        break;
    case key_scheme::crc32_i32:
        k.value = static_cast<std::int32_t>(crc32(name));
        break;
    case key_scheme::hashtext:
        k.server_hash = true;
        k.text = std::string(name);
        break;
    case key_scheme::int64:
        if (!parse_decimal(name, k.value)) ec = make_error_code(errc::invalid_argument);
        break;
    case key_scheme::int32_pair: {
        const auto comma = name.find(',');
        std::int32_t a = 0, b = 0;
        if (comma == std::string_view::npos || !parse_decimal(name.substr(0, comma), a) ||
            !parse_decimal(name.substr(comma + 1), b)) {
            ec = make_error_code(errc::invalid_argument);
            break;
        }
        k.pair = true;
        k.value = combine(a, b);
        break;
    }
    }
    return k;
}

std::string advisory_key::describe() const {
    if (server_hash) return "bigint hashtext('" + text + "') (computed by the server)";
    const std::string where = " (classid " + std::to_string(classid()) + ", objid " +
                              std::to_string(objid()) + ", objsubid " + std::to_string(objsubid()) +
                              ")";
    if (pair)
        return "pair (" + std::to_string(first()) + ", " + std::to_string(second()) + ")" + where;
    return "bigint " + std::to_string(value) + where;
}

std::string key_call(std::string_view fn, const advisory_key& k) {
    std::string s(fn);
    if (k.server_hash)
        s += "(hashtext($1)::bigint)";
    else if (k.pair)
        s += "($1::int4, $2::int4)";
    else
        s += "($1::bigint)";
    return s;
}

std::string key_param1(const advisory_key& k) {
    if (k.server_hash) return k.text;
    return std::to_string(k.pair ? std::int64_t{k.first()} : k.value);
}

std::optional<std::string> key_param2(const advisory_key& k) {
    if (!k.pair || k.server_hash) return std::nullopt;
    return std::to_string(k.second());
}

} // namespace dlock::detail::pg
