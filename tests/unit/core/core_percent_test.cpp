// core/percent.hpp: %XX decoding of URL parts and the items of a URL's query (zk://, etcd://,
// redlock://), without I/O.
#include "core/percent.hpp"

#include <gtest/gtest.h>

#include <string>

using dlock::detail::percent_decode;
using dlock::detail::url_params;

namespace {

TEST(percent, decodes_escapes_in_either_case_and_keeps_every_other_byte) {
    std::string out;
    ASSERT_TRUE(percent_decode("p%40ss%2fw%2Frd+x", out));
    EXPECT_EQ(out, "p@ss/w/rd+x"); // '+' stays a '+' (not a form encoding)
    ASSERT_TRUE(percent_decode("%00", out));
    EXPECT_EQ(out, std::string(1, '\0'));
    ASSERT_TRUE(percent_decode("", out));
    EXPECT_EQ(out, "");
}

TEST(percent, a_percent_without_two_hex_digits_is_refused) {
    std::string out;
    for (const char* bad : {"%", "a%4", "%zz", "%4g", "x%-1", "%+1"})
        EXPECT_FALSE(percent_decode(bad, out)) << bad;
}

TEST(url_params, gives_the_items_in_order_with_their_whole_text) {
    const auto p = url_params("ttl=30&cacert=%2Fetc%2Fca.pem&verbose");
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[0].key, "ttl");
    EXPECT_EQ(p[0].value, "30");
    EXPECT_TRUE(p[0].has_value);
    EXPECT_EQ(p[1].key, "cacert");
    EXPECT_EQ(p[1].value, "%2Fetc%2Fca.pem"); // still encoded: the caller decodes values
    EXPECT_EQ(p[2].key, "verbose");
    EXPECT_EQ(p[2].value, "");
    EXPECT_FALSE(p[2].has_value);
    EXPECT_EQ(p[2].item, "verbose");
    EXPECT_EQ(p[1].item, "cacert=%2Fetc%2Fca.pem");
}

TEST(url_params, an_empty_value_has_a_value_and_an_empty_query_has_no_items) {
    EXPECT_TRUE(url_params("").empty());
    const auto p = url_params("a=&b=1=2");
    ASSERT_EQ(p.size(), 2u);
    EXPECT_TRUE(p[0].has_value);
    EXPECT_EQ(p[0].value, "");
    EXPECT_EQ(p[1].key, "b");
    EXPECT_EQ(p[1].value, "1=2"); // the first '=' splits
}

} // namespace
