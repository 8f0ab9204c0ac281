#pragma once

// Splitting a client's byte stream into RESP requests (arrays of bulk strings), sans-I/O: the
// fault proxy matches faults on whole requests (the command name and its arguments).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::fault {

struct resp_request {
    std::size_t size = 0;          ///< bytes of the whole request in the stream
    std::string command;           ///< first element, upper-cased
    std::vector<std::string> args; ///< the other elements
};

enum class split_status {
    complete, ///< `out` holds the first request of the stream
    partial,  ///< more bytes needed
    not_resp, ///< the stream does not start with a RESP array of bulk strings: pass it raw
};

/// Limits: at most 1 048 576 elements and 512 MiB per bulk string (Redis's own limits).
split_status split_request(std::string_view stream, resp_request& out);

} // namespace dlock::fault
