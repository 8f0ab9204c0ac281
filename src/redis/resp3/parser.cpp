#include "redis/resp3/parser.hpp"

#include <dlock/error.hpp>

#include <charconv>
#include <cstdint>
#include <limits>

namespace dlock::resp3 {
namespace {

/// Parses a RESP integer line: optional '-', then at least one digit, no overflow.
bool parse_int(std::string_view s, std::int64_t& out) noexcept {
    if (s.empty()) return false;
    const char* first = s.data();
    const char* last = s.data() + s.size();
    if (*first == '+') return false;
    auto [ptr, ec] = std::from_chars(first, last, out);
    return ec == std::errc{} && ptr == last;
}

bool parse_double(std::string_view s, double& out) noexcept {
    if (s == "inf" || s == "+inf") {
        out = std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "-inf") {
        out = -std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "nan" || s == "-nan") {
        out = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    if (s.empty()) return false;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && ptr == s.data() + s.size();
}

} // namespace

std::optional<value> parser::consume(std::string_view in, std::size_t& consumed,
                                     std::error_code& ec) {
    consumed = 0;
    ec.clear();
    std::size_t pos = 0;
    const auto fail = [&]() -> std::optional<value> {
        ec = make_error_code(errc::protocol_error);
        return std::nullopt;
    };
    const auto need_more = [&]() -> std::optional<value> {
        if (in.size() - pos > limits_.max_buffered_bytes) return fail();
        return std::nullopt;
    };

    for (;;) {
        if (pos >= in.size()) return need_more();
        const auto eol = in.find("\r\n", pos);
        if (eol == std::string_view::npos) {
            if (in.size() - pos > limits_.max_line_length + 1) return fail();
            return need_more();
        }
        if (eol - pos - 1 > limits_.max_line_length) return fail();
        const char marker = in[pos];
        const std::string_view line = in.substr(pos + 1, eol - pos - 1);
        std::size_t next = eol + 2;

        value leaf;
        bool have_leaf = true;
        switch (marker) {
        case '+':
        case '-':
            // Simple strings and errors are text lines: no CR or LF (RESP3), and no NUL, which
            // Redis never sends there and which would cut the text short in C consumers.
            if (line.find_first_of(std::string_view("\0\r\n", 3)) != std::string_view::npos)
                return fail();
            leaf.kind = marker == '+' ? type::simple_string : type::error;
            leaf.str.assign(line);
            break;
        case ':':
            leaf.kind = type::integer;
            if (!parse_int(line, leaf.integer)) return fail();
            break;
        case '_':
            if (!line.empty()) return fail();
            leaf.kind = type::null;
            break;
        case ',':
            leaf.kind = type::double_type;
            if (!parse_double(line, leaf.dbl)) return fail();
            leaf.str.assign(line);
            break;
        case '#':
            leaf.kind = type::boolean;
            if (line == "t")
                leaf.integer = 1;
            else if (line == "f")
                leaf.integer = 0;
            else
                return fail();
            break;
        case '(':
            leaf.kind = type::big_number;
            if (line.empty()) return fail();
            for (std::size_t i = (line[0] == '-' ? 1 : 0); i < line.size(); ++i)
                if (line[i] < '0' || line[i] > '9') return fail();
            leaf.str.assign(line);
            break;
        case '$':
        case '!':
        case '=': {
            std::int64_t len = 0;
            if (!parse_int(line, len)) return fail();
            if (len == -1 && marker == '$') {
                leaf.kind = type::null;
                break;
            }
            if (len < 0 || static_cast<std::uint64_t>(len) > limits_.max_bulk_length) return fail();
            const auto n = static_cast<std::size_t>(len);
            if (in.size() - next < n + 2) {
                // Not all of the payload has arrived; nothing allocated, nothing consumed.
                if (n + 2 + (next - pos) > limits_.max_buffered_bytes) return fail();
                return need_more();
            }
            if (in[next + n] != '\r' || in[next + n + 1] != '\n') return fail();
            std::string_view payload = in.substr(next, n);
            if (marker == '=') {
                if (payload.size() < 4 || payload[3] != ':') return fail();
                payload.remove_prefix(4);
            }
            leaf.kind = marker == '!' ? type::error : type::bulk_string;
            leaf.str.assign(payload);
            next += n + 2;
            break;
        }
        case '*':
        case '%':
        case '~':
        case '>':
        case '|': {
            std::int64_t count = 0;
            if (!parse_int(line, count)) return fail();
            if (count == -1 && marker == '*') {
                leaf.kind = type::null;
                break;
            }
            if (count < 0) return fail();
            auto n = static_cast<std::uint64_t>(count);
            const bool pairs = marker == '%' || marker == '|';
            if (n > limits_.max_aggregate_elements / (pairs ? 2 : 1)) return fail();
            if (pairs) n *= 2;
            if (stack_.size() + 1 > limits_.max_depth) return fail();
            value agg;
            agg.kind = marker == '*'   ? type::array
                       : marker == '%' ? type::map
                       : marker == '~' ? type::set
                       : marker == '>' ? type::push
                                       : type::map;
            if (n == 0) {
                if (marker == '|') {
                    have_leaf = false; // an empty attribute: nothing to deliver
                    break;
                }
                leaf = std::move(agg);
                break;
            }
            // Reserve from what has been received, never from the declared count.
            agg.elements.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n, 8)));
            stack_.push_back(frame{std::move(agg), static_cast<std::size_t>(n), marker == '|'});
            have_leaf = false;
            break;
        }
        default:
            return fail();
        }
        pos = next;
        consumed = pos;
        if (!have_leaf) continue;

        // Attach the completed element to its parent, closing every aggregate it completes.
        for (;;) {
            if (stack_.empty()) return leaf;
            frame& top = stack_.back();
            top.v.elements.push_back(std::move(leaf));
            if (--top.remaining != 0) break;
            const bool attribute = top.attribute;
            leaf = std::move(top.v);
            stack_.pop_back();
            if (attribute) break; // attributes annotate the next element; dropped
        }
    }
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
    char num[24];
    const auto put_len = [&](char marker, std::size_t n) {
        out.push_back(marker);
        auto [end, ec] = std::to_chars(num, num + sizeof num, n);
        (void)ec;
        out.append(num, end);
        out.append("\r\n", 2);
    };
    put_len('*', args.size());
    for (const auto& a : args) {
        put_len('$', a.size());
        out.append(a);
        out.append("\r\n", 2);
    }
}

} // namespace dlock::resp3
