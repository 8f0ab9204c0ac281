// dlock/resp3.hpp: the reply value of dlock's RESP2/RESP3 codec and the codec's named limits.
//
// A `resp3::value` is an owning tree (one node per RESP element). Error replies are values of
// type `error` carrying the server's text: a Redis error is data, not a transport failure (see
// dlock/error.hpp for classify_server_error()). The parser itself is internal (src/resp3/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::resp3 {

/// The RESP element type of a value (the wire prefix in each comment).
enum class type : std::uint8_t {
    simple_string, ///< `+`
    error,         ///< `-` and RESP3 blob error `!`
    integer,       ///< `:`
    bulk_string,   ///< `$` and RESP3 verbatim `=` (format prefix stripped)
    array,         ///< `*`
    null,          ///< `_`, and RESP2 `$-1` / `*-1`
    double_type,   ///< `,` (text kept in `str`, number in `dbl`)
    boolean,       ///< `#` (integer is 1 or 0)
    big_number,    ///< `(` (text kept in `str`)
    map,           ///< `%` (elements alternate key, value)
    set,           ///< `~`
    push,          ///< `>` (out-of-band: pub/sub messages on RESP3)
};

/// One parsed reply element and its children.
struct value {
    /// Which element this is (default null).
    type kind = type::null;
    std::int64_t integer = 0;      ///< for integer and boolean
    double dbl = 0;                ///< for double_type
    std::string str{};             ///< for strings, errors, big numbers, doubles
    std::vector<value> elements{}; ///< for array, map (k, v, k, v...), set, push

    /// True for a null (RESP3 `_`, RESP2 `$-1` and `*-1`).
    bool is_null() const noexcept { return kind == type::null; }
    /// True for an error reply (the server's text is in `str`).
    bool is_error() const noexcept { return kind == type::error; }
    /// True for an integer (in `integer`).
    bool is_integer() const noexcept { return kind == type::integer; }
    /// True for a simple or bulk string (in `str`).
    bool is_string() const noexcept {
        return kind == type::simple_string || kind == type::bulk_string;
    }
    /// True for an array, map, set or push (children in `elements`).
    bool is_aggregate() const noexcept {
        return kind == type::array || kind == type::map || kind == type::set || kind == type::push;
    }
    /// True for `+OK` exactly (the only success reply of SET ... NX).
    bool is_ok() const noexcept { return kind == type::simple_string && str == "OK"; }
};

/// Hard limits the parser enforces *before* allocating anything a reply declares.
/// Exceeding any of them is errc::protocol_error and the connection is dropped.
struct limits {
    /// Longest bulk string / verbatim / blob error payload. Default 16 MiB; lock traffic needs
    /// under 1 KiB, raw commands (dlock::redis::command()) may need more.
    std::size_t max_bulk_length = 16u << 20;
    /// Most elements one aggregate may declare (a map counts key and value). Default 1,000,000.
    /// Storage grows with elements received, never with the declared count.
    std::size_t max_aggregate_elements = 1'000'000;
    /// Deepest nesting of aggregates. Default 16 (lock replies nest at most 2).
    std::size_t max_depth = 16;
    /// Longest line of a simple string, error, number or header, CRLF excluded. Default 64 KiB.
    std::size_t max_line_length = 64u << 10;
    /// Most unparsed bytes a connection may buffer while waiting for one element to complete.
    /// Default 32 MiB; must exceed max_bulk_length.
    std::size_t max_buffered_bytes = 32u << 20;
};

} // namespace dlock::resp3
