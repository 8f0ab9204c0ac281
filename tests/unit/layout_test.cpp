// dlock::redis::layout_of and lock_kinds (src/layout.cpp): the Redis kinds' key layouts; no
// server.
#include <dlock/redis.hpp>

#include <gtest/gtest.h>

using dlock::errc;

namespace {

TEST(layout, redis_answers_the_lease_table_kinds_with_unsupported) {
    std::error_code ec;
    dlock::redis::layout_of("report", dlock::lock_kind::shedlock, ec);
    EXPECT_EQ(ec, errc::unsupported);
    dlock::redis::layout_of("report", dlock::lock_kind::write, ec);
    EXPECT_FALSE(ec); // the Redis kinds are unchanged
    for (auto k : dlock::redis::lock_kinds())
        EXPECT_NE(k, dlock::lock_kind::shedlock);
}

} // namespace
