// libFuzzer target: the RESP parser fed arbitrary bytes in arbitrary splits, with small limits.
// The first input byte chooses the split sizes; the rest is the stream. Invariants: consumed
// never exceeds the input, an error stops parsing, every limit holds on what is returned.
#include "redis/resp3/parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

std::size_t depth(const dlock::resp3::value& v) {
    std::size_t d = 0;
    for (const auto& e : v.elements)
        d = std::max(d, depth(e));
    return v.is_aggregate() ? d + 1 : d;
}

void check(const dlock::resp3::value& v, const dlock::resp3::limits& lim) {
    if (v.str.size() > lim.max_bulk_length && v.str.size() > lim.max_line_length) std::abort();
    if (v.elements.size() > lim.max_aggregate_elements) std::abort();
    for (const auto& e : v.elements)
        check(e, lim);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned step = (data[0] % 16) + 1;
    dlock::resp3::limits lim;
    lim.max_bulk_length = 1024;
    lim.max_aggregate_elements = 64;
    lim.max_depth = 6;
    lim.max_line_length = 256;
    lim.max_buffered_bytes = 4096;
    dlock::resp3::parser p(lim);
    const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
    std::string buf;
    std::size_t pos = 0;
    while (pos < input.size()) {
        buf.append(input, pos, step);
        pos += step;
        for (;;) {
            std::size_t used = 0;
            std::error_code ec;
            auto v = p.consume(buf, used, ec);
            if (used > buf.size()) std::abort();
            buf.erase(0, used);
            if (ec) return 0;
            if (!v) break;
            check(*v, lim);
            if (depth(*v) > lim.max_depth) std::abort();
        }
        if (buf.size() > lim.max_buffered_bytes + lim.max_line_length + 16) std::abort();
    }
    return 0;
}
