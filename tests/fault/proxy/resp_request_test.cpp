// The fault proxy's request splitter: whole requests only, bounded, raw pass-through otherwise.
#include "resp_request.hpp"

#include <gtest/gtest.h>

#include <string>

using dlock::fault::resp_request;
using dlock::fault::split_request;
using dlock::fault::split_status;

TEST(resp_request, splits_the_first_of_two_pipelined_requests) {
    std::string s = "*3\r\n$3\r\nset\r\n$1\r\nL\r\n$2\r\nab\r\n*1\r\n$4\r\nPING\r\n";
    resp_request r;
    ASSERT_EQ(split_request(s, r), split_status::complete);
    EXPECT_EQ(r.command, "SET");
    ASSERT_EQ(r.args.size(), 2u);
    EXPECT_EQ(r.args[0], "L");
    EXPECT_EQ(r.args[1], "ab");
    EXPECT_EQ(r.size, s.find("*1"));
}

TEST(resp_request, waits_for_every_byte_of_a_request) {
    std::string s = "*2\r\n$3\r\nGET\r\n$5\r\nres:L\r\n";
    for (std::size_t n = 0; n < s.size(); ++n) {
        resp_request r;
        EXPECT_EQ(split_request(s.substr(0, n), r), split_status::partial) << n;
    }
    resp_request r;
    EXPECT_EQ(split_request(s, r), split_status::complete);
}

TEST(resp_request, binary_arguments_may_contain_crlf) {
    std::string s = std::string("*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n");
    resp_request r;
    ASSERT_EQ(split_request(s, r), split_status::complete);
    EXPECT_EQ(r.args.at(0), "a\r\nb");
}

TEST(resp_request, inline_and_malformed_streams_pass_raw) {
    resp_request r;
    EXPECT_EQ(split_request("PING\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*0\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*1\r\n:5\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*1\r\n$-1\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*1\r\n$1\r\nxy\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*9999999999\r\n", r), split_status::not_resp);
    EXPECT_EQ(split_request("*1\r\n$600000000\r\n", r), split_status::not_resp);
    // a header that never ends is garbage, not a partial request
    EXPECT_EQ(split_request("*" + std::string(64, '1'), r), split_status::not_resp);
}
