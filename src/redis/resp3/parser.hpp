// Sans-I/O incremental RESP2/RESP3 parser and command encoder.
//
// The parser is iterative (an explicit stack of aggregates under construction, never recursion)
// and incremental: feed it the unconsumed bytes of a read buffer in any split; it consumes whole
// elements only, keeps partial aggregates on its stack, and returns a value once a complete
// top-level reply has arrived. Attributes (`|`) are parsed and discarded.
#pragma once

#include <dlock/resp3.hpp>

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::resp3 {

class parser {
public:
    explicit parser(limits lim = {})
        : limits_(lim) {}

    /// Parses from `in`. Sets `consumed` to the number of leading bytes of `in` that the parser
    /// took (the caller drops them). Returns a complete top-level reply, or nullopt when more
    /// bytes are needed or on error.
    ///
    /// Errors:     errc::protocol_error for malformed input or a limit exceeded; the parser must
    ///             then be reset() and the connection dropped.
    /// Edge values: empty `in` returns nullopt with consumed = 0.
    std::optional<value> consume(std::string_view in, std::size_t& consumed, std::error_code& ec);

    /// True while a partially received aggregate is held on the stack.
    bool mid_reply() const noexcept { return !stack_.empty(); }
    void reset() noexcept { stack_.clear(); }
    const limits& get_limits() const noexcept { return limits_; }

private:
    struct frame {
        value v;
        std::size_t remaining;
        bool attribute;
    };
    limits limits_;
    std::vector<frame> stack_;
};

/// Appends one command in RESP array-of-bulk-strings form to `out`.
void encode_command(std::string& out, std::span<const std::string_view> args);
inline void encode_command(std::string& out, std::initializer_list<std::string_view> args) {
    encode_command(out, std::span<const std::string_view>(args.begin(), args.size()));
}

} // namespace dlock::resp3
