#pragma once

// Splitting a ZooKeeper client's byte stream into requests (jute frames: a 4-byte big-endian
// length, then the body), sans-I/O: the fault proxy matches faults on a request's operation
// and path, as it does on a RESP command and its arguments (resp_request.hpp).
//
// The first frame of a connection is the ConnectRequest (no request header): "CONNECT". Every
// later one starts with xid and type; the type names the operation ("CREATE2", "PING", ...,
// "OP<n>" for one not in the table) and, for an operation whose body starts with a path
// (create, delete, exists, getData, setData, getChildren, check, ...), that path is the one
// argument. A multi's paths are not read (no argument).

#include "resp_request.hpp"

#include <string_view>

namespace dlock::fault {

/// `first`: the connection has sent no frame yet. A declared length over 64 MiB (the server's
/// jute.maxbuffer is 1 MiB by default) or below 8 after the first frame is not ZooKeeper:
/// not_resp (pass the rest raw).
split_status split_zk_request(std::string_view stream, bool first, resp_request& out);

} // namespace dlock::fault
