// glob_match (core/glob.hpp), the `dlock list PATTERN` match of the backends that filter names
// themselves: no server.
#include "core/glob.hpp"

#include <gtest/gtest.h>

namespace {

using dlock::detail::glob_match;

TEST(glob, matches_like_the_redis_list) {
    EXPECT_TRUE(glob_match("", "anything"));
    EXPECT_TRUE(glob_match("jobs:*", "jobs:1"));
    EXPECT_TRUE(glob_match("jobs:?", "jobs:1"));
    EXPECT_FALSE(glob_match("jobs:?", "jobs:12"));
    EXPECT_TRUE(glob_match("*:1*", "jobs:12"));
    EXPECT_FALSE(glob_match("a*b", "acbd"));
}

} // namespace
