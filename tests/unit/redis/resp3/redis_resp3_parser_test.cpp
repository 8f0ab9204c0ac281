// The RESP2/RESP3 parser as tables: every row is fed whole, at every split point in two
// feeds, and byte by byte, emulating a connection that drops the consumed prefix and appends
// new bytes. Limits are checked one below, at, and one above.
#include "redis/resp3/parser.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <optional>

using namespace std::string_literals;
using dlock::errc;
using dlock::resp3::limits;
using dlock::resp3::parser;
using dlock::resp3::type;
using dlock::resp3::value;

namespace {

struct outcome {
    std::vector<value> replies;
    std::error_code ec;
};

/// Feeds `chunks` in order like a connection: unconsumed bytes stay buffered.
outcome feed(const std::vector<std::string>& chunks, limits lim = {}) {
    parser p(lim);
    outcome out;
    std::string buf;
    for (const auto& c : chunks) {
        buf += c;
        for (;;) {
            std::size_t used = 0;
            auto v = p.consume(buf, used, out.ec);
            EXPECT_LE(used, buf.size());
            buf.erase(0, used);
            if (out.ec) return out;
            if (!v) break;
            out.replies.push_back(std::move(*v));
        }
    }
    return out;
}

std::vector<std::vector<std::string>> all_splits(const std::string& s) {
    std::vector<std::vector<std::string>> v;
    v.push_back({s});
    for (std::size_t i = 1; i < s.size(); ++i)
        v.push_back({s.substr(0, i), s.substr(i)});
    std::vector<std::string> bytes;
    for (char c : s)
        bytes.emplace_back(1, c);
    v.push_back(bytes);
    return v;
}

std::string describe(const value& v) {
    switch (v.kind) {
    case type::simple_string:
        return "+" + v.str;
    case type::error:
        return "-" + v.str;
    case type::integer:
        return std::string(":").append(std::to_string(v.integer));
    case type::bulk_string:
        return "$" + v.str;
    case type::null:
        return "_";
    case type::double_type:
        return "," + v.str;
    case type::boolean:
        return v.integer ? "#t" : "#f";
    case type::big_number:
        return "(" + v.str;
    case type::array:
    case type::map:
    case type::set:
    case type::push: {
        std::string s = v.kind == type::array ? "["
                        : v.kind == type::map ? "{"
                        : v.kind == type::set ? "~["
                                              : ">[";
        for (std::size_t i = 0; i < v.elements.size(); ++i)
            s.append(i ? " " : "").append(describe(v.elements[i]));
        return s + (v.kind == type::map ? "}" : "]");
    }
    }
    return "?";
}

struct row {
    const char* name;
    std::string input;
    std::vector<std::string> expected; ///< describe() of each reply
    std::optional<errc> error;
};

const std::vector<row> valid_rows = {
    {"simple string", "+OK\r\n", {"+OK"}, {}},
    {"empty simple string", "+\r\n", {"+"}, {}},
    {"error", "-ERR bad thing\r\n", {"-ERR bad thing"}, {}},
    {"integer", ":42\r\n", {":42"}, {}},
    {"negative integer", ":-7\r\n", {":-7"}, {}},
    {"int64 max", ":9223372036854775807\r\n", {":9223372036854775807"}, {}},
    {"int64 min", ":-9223372036854775808\r\n", {":-9223372036854775808"}, {}},
    {"bulk string", "$5\r\nhello\r\n", {"$hello"}, {}},
    {"bulk string with CRLF inside", "$4\r\na\r\nb\r\n", {"$a\r\nb"}, {}},
    {"empty bulk string", "$0\r\n\r\n", {"$"}, {}},
    {"RESP2 null bulk", "$-1\r\n", {"_"}, {}},
    {"RESP2 null array", "*-1\r\n", {"_"}, {}},
    {"RESP3 null", "_\r\n", {"_"}, {}},
    {"double", ",3.25\r\n", {",3.25"}, {}},
    {"double infinity", ",inf\r\n", {",inf"}, {}},
    {"double negative infinity", ",-inf\r\n", {",-inf"}, {}},
    // RESP3 NaN is a valid double; that it is never read as an integer or a success is
    // acquire_reading.a_double_or_boolean_where_an_integer_is_expected_is_never_success.
    {"double nan", ",nan\r\n", {",nan"}, {}},
    {"booleans", "#t\r\n#f\r\n", {"#t", "#f"}, {}},
    {"big number",
     "(3492890328409238509324850943850943825024385\r\n",
     {"(3492890328409238509324850943850943825024385"},
     {}},
    {"blob error", "!9\r\nSYNTAX xx\r\n", {"-SYNTAX xx"}, {}},
    {"verbatim string", "=9\r\ntxt:hello\r\n", {"$hello"}, {}},
    {"empty array", "*0\r\n", {"[]"}, {}},
    {"array of mixed", "*3\r\n:1\r\n$1\r\na\r\n+b\r\n", {"[:1 $a +b]"}, {}},
    {"null inside an array", "*2\r\n_\r\n$-1\r\n", {"[_ _]"}, {}},
    {"nested arrays", "*2\r\n*1\r\n:1\r\n*0\r\n", {"[[:1] []]"}, {}},
    {"map", "%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", {"{+a :1 +b :2}"}, {}},
    {"empty map", "%0\r\n", {"{}"}, {}},
    {"set", "~2\r\n:1\r\n:2\r\n", {"~[:1 :2]"}, {}},
    {"push message", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n", {">[$message $ch $0]"}, {}},
    {"attribute before a reply is skipped", "|1\r\n+key\r\n+val\r\n:5\r\n", {":5"}, {}},
    {"attribute inside an array is skipped",
     "*2\r\n:1\r\n|1\r\n+k\r\n+v\r\n:2\r\n",
     {"[:1 :2]"},
     {}},
    {"two replies back to back", "+A\r\n:2\r\n", {"+A", ":2"}, {}},
    {"lock acquire reply", "*2\r\n:1\r\n:17\r\n", {"[:1 :17]"}, {}},
};

const std::vector<row> malformed_rows = {
    {"unknown type byte", "?x\r\n", {}, errc::protocol_error},
    {"integer overflow", ":9223372036854775808\r\n", {}, errc::protocol_error},
    {"plus-signed integer", ":+5\r\n", {}, errc::protocol_error},
    {"empty integer", ":\r\n", {}, errc::protocol_error},
    {"integer with junk", ":12a\r\n", {}, errc::protocol_error},
    {"non-digit bulk length", "$x\r\nab\r\n", {}, errc::protocol_error},
    {"negative bulk length", "$-2\r\n", {}, errc::protocol_error},
    {"bulk without trailing CRLF", "$2\r\nabXY", {}, errc::protocol_error},
    {"negative aggregate count", "*-2\r\n", {}, errc::protocol_error},
    {"null map count", "%-1\r\n", {}, errc::protocol_error},
    {"bad boolean", "#x\r\n", {}, errc::protocol_error},
    {"bad double", ",1.2.3\r\n", {}, errc::protocol_error},
    {"RESP3 null with payload", "_x\r\n", {}, errc::protocol_error},
    {"verbatim without format", "=2\r\nab\r\n", {}, errc::protocol_error},
    {"big number with letters", "(12a\r\n", {}, errc::protocol_error},
    {"integer with a fraction", ":1.5\r\n", {}, errc::protocol_error},
    {"integer that is only a sign", ":-\r\n", {}, errc::protocol_error},
    {"plus-signed bulk length", "$+5\r\nhello\r\n", {}, errc::protocol_error},
    {"space before a bulk length", "$ 5\r\nhello\r\n", {}, errc::protocol_error},
    {"empty line", "\r\n", {}, errc::protocol_error},
    // Simple strings and errors are text: CR, LF (RESP3) and NUL inside are refused.
    {"NUL inside a simple string", "+OK\0garbage\r\n"s, {}, errc::protocol_error},
    {"NUL inside a simple error", "-ERR\0x\r\n"s, {}, errc::protocol_error},
    {"bare CR inside a simple string", "+O\rK\r\n", {}, errc::protocol_error},
    {"LF-only line end, then a line", "+OK\n:1\r\n", {}, errc::protocol_error},
    {"LF-only line end of a bulk header", "$5\nhello\r\n", {}, errc::protocol_error},
};

} // namespace

TEST(resp3_parser, every_valid_reply_parses_the_same_at_every_split_point) {
    for (const auto& r : valid_rows) {
        for (const auto& chunks : all_splits(r.input)) {
            const auto out = feed(chunks);
            ASSERT_FALSE(out.ec) << r.name << ": " << out.ec.message();
            std::vector<std::string> got;
            for (auto& v : out.replies)
                got.push_back(describe(v));
            EXPECT_EQ(got, r.expected) << r.name << " split into " << chunks.size();
        }
    }
}

TEST(resp3_parser, malformed_input_is_a_protocol_error_at_every_split_point) {
    for (const auto& r : malformed_rows) {
        for (const auto& chunks : all_splits(r.input)) {
            const auto out = feed(chunks);
            EXPECT_EQ(out.ec, *r.error) << r.name;
            EXPECT_TRUE(out.replies.empty()) << r.name;
        }
    }
}

TEST(resp3_parser, a_crlf_split_across_two_feeds_works) {
    const auto out = feed({"+OK\r", "\n"});
    ASSERT_EQ(out.replies.size(), 1u);
    EXPECT_EQ(out.replies[0].str, "OK");
}

TEST(resp3_parser, an_incomplete_reply_is_not_delivered_and_nothing_is_lost) {
    parser p;
    std::size_t used = 0;
    std::error_code ec;
    EXPECT_FALSE(p.consume("*2\r\n:1\r\n:", used, ec));
    EXPECT_FALSE(ec);
    EXPECT_EQ(used, 8u); // the header and the first element were taken
    EXPECT_TRUE(p.mid_reply());
    auto v = p.consume(":2\r\n", used, ec);
    ASSERT_TRUE(v);
    EXPECT_EQ(describe(*v), "[:1 :2]");
}

TEST(resp3_parser, the_bulk_length_limit_applies_before_allocating) {
    limits lim;
    lim.max_bulk_length = 8;
    EXPECT_FALSE(feed({"$7\r\n1234567\r\n"}, lim).ec);
    EXPECT_FALSE(feed({"$8\r\n12345678\r\n"}, lim).ec);
    EXPECT_EQ(feed({"$9\r\n"}, lim).ec, errc::protocol_error); // header alone is enough
}

TEST(resp3_parser, huge_declared_lengths_fail_on_the_header_alone) {
    // hiredis#1357 / CVE-2021-32765 shapes: 12-16 bytes that must not allocate gigabytes.
    for (const char* header : {"*4294967295\r\n", "%4294967295\r\n", "$99999999999\r\n",
                               "*9223372036854775807\r\n", "~2147483648\r\n", ">4294967296\r\n"}) {
        const auto out = feed({header});
        EXPECT_EQ(out.ec, errc::protocol_error) << header;
    }
}

TEST(resp3_parser, the_aggregate_limit_counts_map_pairs_twice) {
    limits lim;
    lim.max_aggregate_elements = 4;
    EXPECT_FALSE(feed({"*3\r\n:1\r\n:2\r\n:3\r\n"}, lim).ec);
    EXPECT_FALSE(feed({"*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n"}, lim).ec);
    EXPECT_EQ(feed({"*5\r\n"}, lim).ec, errc::protocol_error);
    EXPECT_FALSE(feed({"%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n"}, lim).ec);
    EXPECT_EQ(feed({"%3\r\n"}, lim).ec, errc::protocol_error);
}

TEST(resp3_parser, nesting_one_past_the_limit_is_rejected) {
    limits lim;
    lim.max_depth = 3;
    const auto nest = [](int depth) {
        std::string s;
        for (int i = 0; i < depth; ++i)
            s += "*1\r\n";
        return s + ":1\r\n";
    };
    EXPECT_FALSE(feed({nest(2)}, lim).ec);
    EXPECT_FALSE(feed({nest(3)}, lim).ec);
    EXPECT_EQ(feed({nest(4)}, lim).ec, errc::protocol_error);
    // Deep input never recurses: a default parser rejects 100000 levels without a stack blowup.
    std::string deep;
    for (int i = 0; i < 100000; ++i)
        deep += "*1\r\n";
    EXPECT_EQ(feed({deep}).ec, errc::protocol_error);
}

TEST(resp3_parser, the_line_length_limit_applies_to_lines_without_crlf) {
    limits lim;
    lim.max_line_length = 8;
    EXPECT_FALSE(feed({"+1234567\r\n"}, lim).ec);
    EXPECT_FALSE(feed({"+12345678\r\n"}, lim).ec);
    EXPECT_EQ(feed({"+123456789\r\n"}, lim).ec, errc::protocol_error);
    // Slow drip of a line that never ends: rejected once it passes the limit.
    EXPECT_EQ(feed({"+123456789012"}, lim).ec, errc::protocol_error);
}

TEST(resp3_parser, the_buffered_bytes_limit_bounds_an_incomplete_bulk) {
    limits lim;
    lim.max_bulk_length = 100;
    lim.max_buffered_bytes = 32;
    // A 26-byte element ($20 + payload + CRLF) fits; a 40-byte one can never complete.
    EXPECT_FALSE(feed({"$20\r\n01234567890123456789\r\n"}, lim).ec);
    EXPECT_EQ(feed({"$40\r\n0123"}, lim).ec, errc::protocol_error);
}

TEST(resp3_parser, encodes_commands_as_arrays_of_bulk_strings) {
    std::string out;
    dlock::resp3::encode_command(out, {"SET", "k", "a\r\nb", ""});
    EXPECT_EQ(out, "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$0\r\n\r\n");
    // What the encoder writes, the parser reads back.
    const auto back = feed({out});
    ASSERT_EQ(back.replies.size(), 1u);
    EXPECT_EQ(describe(back.replies[0]), "[$SET $k $a\r\nb $]");
}
