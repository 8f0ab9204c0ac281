#include "zk_request.hpp"

#include <cstdint>
#include <string>

namespace dlock::fault {

namespace {

constexpr std::uint32_t max_frame = 64U * 1024 * 1024;

std::int32_t be32(std::string_view s, std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i)
        v = (v << 8) | static_cast<unsigned char>(s[at + i]);
    return static_cast<std::int32_t>(v);
}

struct op_name {
    std::int32_t type;
    const char* name;
    bool path; ///< the body starts with a path
};

// ZooDefs.OpCode (ZooKeeper 3.8).
constexpr op_name ops[] = {
    {1, "CREATE", true},
    {2, "DELETE", true},
    {3, "EXISTS", true},
    {4, "GETDATA", true},
    {5, "SETDATA", true},
    {6, "GETACL", true},
    {7, "SETACL", true},
    {8, "GETCHILDREN", true},
    {9, "SYNC", true},
    {11, "PING", false},
    {12, "GETCHILDREN2", true},
    {13, "CHECK", true},
    {14, "MULTI", false},
    {15, "CREATE2", true},
    {16, "RECONFIG", false},
    {17, "CHECKWATCHES", true},
    {18, "REMOVEWATCHES", true},
    {19, "CREATECONTAINER", true},
    {20, "DELETECONTAINER", true},
    {21, "CREATETTL", true},
    {22, "MULTIREAD", false},
    {100, "AUTH", false},
    {101, "SETWATCHES", false},
    {102, "SASL", false},
    {103, "GETEPHEMERALS", true},
    {104, "GETALLCHILDRENNUMBER", true},
    {105, "SETWATCHES2", false},
    {106, "ADDWATCH", true},
    {107, "WHOAMI", false},
    {-10, "CREATESESSION", false},
    {-11, "CLOSESESSION", false},
};

} // namespace

split_status split_zk_request(std::string_view s, bool first, resp_request& out) {
    if (s.size() < 4) return split_status::partial;
    const auto len = static_cast<std::uint32_t>(be32(s, 0));
    if (len > max_frame || (!first && len < 8)) return split_status::not_resp;
    if (s.size() - 4 < len) return split_status::partial;
    out = resp_request{};
    out.size = 4 + std::size_t{len};
    if (first) {
        out.command = "CONNECT";
        return split_status::complete;
    }
    const auto body = s.substr(4, len);
    const auto type = be32(body, 4);
    out.command = "OP" + std::to_string(type);
    for (const auto& o : ops) {
        if (o.type != type) continue;
        out.command = o.name;
        if (o.path && body.size() >= 12) {
            const auto plen = be32(body, 8);
            if (plen >= 0 && static_cast<std::size_t>(plen) <= body.size() - 12)
                out.args.emplace_back(body.substr(12, static_cast<std::size_t>(plen)));
        }
        break;
    }
    return split_status::complete;
}

} // namespace dlock::fault
