// The fault proxy's ZooKeeper request splitter: whole frames, the operation and its path.
#include "zk_request.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

using dlock::fault::resp_request;
using dlock::fault::split_status;
using dlock::fault::split_zk_request;

namespace {

std::string be32(std::int32_t v) {
    const auto u = static_cast<std::uint32_t>(v);
    return {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8),
            static_cast<char>(u)};
}

std::string frame(const std::string& body) {
    return be32(static_cast<std::int32_t>(body.size())) + body;
}

/// xid, type, then a path-first body (the rest is whatever follows the path).
std::string request(std::int32_t xid, std::int32_t type, const std::string& path,
                    const std::string& rest = "") {
    return frame(be32(xid) + be32(type) + be32(static_cast<std::int32_t>(path.size())) + path +
                 rest);
}

} // namespace

TEST(zk_request, the_first_frame_is_the_connect_request) {
    const std::string connect = frame(std::string(44, '\0'));
    const std::string s = connect + request(1, 15, "/a/_c_x-lock-");
    resp_request r;
    ASSERT_EQ(split_zk_request(s, true, r), split_status::complete);
    EXPECT_EQ(r.command, "CONNECT");
    EXPECT_EQ(r.size, connect.size());
    ASSERT_EQ(split_zk_request(std::string_view(s).substr(r.size), false, r),
              split_status::complete);
    EXPECT_EQ(r.command, "CREATE2");
    ASSERT_EQ(r.args.size(), 1u);
    EXPECT_EQ(r.args[0], "/a/_c_x-lock-");
}

TEST(zk_request, names_operations_and_reads_only_their_paths) {
    const std::string data = be32(3) + "abc" + be32(0) + be32(3); // data, acl (none), flags
    const struct {
        std::string bytes;
        const char* command;
        const char* path; // nullptr: no argument
    } cases[] = {
        {request(2, 1, "/x", data), "CREATE", "/x"},
        {request(3, 19, "/dir", data), "CREATECONTAINER", "/dir"},
        {request(4, 12, "/dir"), "GETCHILDREN2", "/dir"},
        {frame(be32(-2) + be32(11)), "PING", nullptr},
        {frame(be32(5) + be32(14) + be32(1) + "\x01" + be32(-1)), "MULTI", nullptr},
        {frame(be32(6) + be32(999)), "OP999", nullptr},
        // A path length past the frame is not read.
        {frame(be32(7) + be32(3) + be32(50) + "/short"), "EXISTS", nullptr},
    };
    for (const auto& c : cases) {
        resp_request r;
        ASSERT_EQ(split_zk_request(c.bytes, false, r), split_status::complete) << c.command;
        EXPECT_EQ(r.command, c.command);
        EXPECT_EQ(r.size, c.bytes.size());
        if (c.path) {
            ASSERT_EQ(r.args.size(), 1u) << c.command;
            EXPECT_EQ(r.args[0], c.path);
        } else {
            EXPECT_TRUE(r.args.empty()) << c.command;
        }
    }
}

TEST(zk_request, waits_for_every_byte_of_a_frame) {
    const std::string s = request(9, 2, "/a/b", be32(-1));
    for (std::size_t n = 0; n < s.size(); ++n) {
        resp_request r;
        EXPECT_EQ(split_zk_request(std::string_view(s).substr(0, n), false, r),
                  split_status::partial)
            << n;
    }
}

TEST(zk_request, a_stream_that_is_not_zookeeper_passes_raw) {
    resp_request r;
    EXPECT_EQ(split_zk_request(be32(-1) + "xxxx", false, r), split_status::not_resp);
    EXPECT_EQ(split_zk_request(be32(100 * 1024 * 1024) + "xxxx", false, r), split_status::not_resp);
    EXPECT_EQ(split_zk_request(be32(4) + "abcd", false, r), split_status::not_resp)
        << "shorter than a request header";
}
