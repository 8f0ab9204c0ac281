#include "resp_request.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>

namespace dlock::fault {

namespace {

constexpr std::int64_t max_elements = 1'048'576;
constexpr std::int64_t max_bulk = 512LL * 1024 * 1024;

/// Reads "<prefix><integer>\r\n" at `pos`; returns false on a malformed header, sets
/// `partial` when the line is not complete yet.
bool header(std::string_view s, std::size_t& pos, char prefix, std::int64_t& value, bool& partial) {
    if (pos >= s.size()) {
        partial = true;
        return true;
    }
    if (s[pos] != prefix) return false;
    std::size_t eol = s.find("\r\n", pos + 1);
    if (eol == std::string_view::npos) {
        partial = s.size() - pos < 32; // a header line is short; a long one is garbage
        return partial;
    }
    auto [p, ec] = std::from_chars(s.data() + pos + 1, s.data() + eol, value);
    if (ec != std::errc{} || p != s.data() + eol) return false;
    pos = eol + 2;
    return true;
}

} // namespace

split_status split_request(std::string_view s, resp_request& out) {
    out = resp_request{};
    std::size_t pos = 0;
    bool partial = false;
    std::int64_t n = 0;
    if (!header(s, pos, '*', n, partial) || (!partial && (n < 1 || n > max_elements)))
        return split_status::not_resp;
    if (partial) return split_status::partial;
    for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t len = 0;
        if (!header(s, pos, '$', len, partial) || (!partial && (len < 0 || len > max_bulk)))
            return split_status::not_resp;
        if (partial) return split_status::partial;
        auto ulen = static_cast<std::size_t>(len);
        if (s.size() - pos < ulen + 2) return split_status::partial;
        if (s.substr(pos + ulen, 2) != "\r\n") return split_status::not_resp;
        std::string_view elem = s.substr(pos, ulen);
        if (i == 0) {
            out.command.reserve(elem.size());
            for (char c : elem)
                out.command.push_back(
                    static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
        } else {
            out.args.emplace_back(elem);
        }
        pos += ulen + 2;
    }
    out.size = pos;
    return split_status::complete;
}

} // namespace dlock::fault
