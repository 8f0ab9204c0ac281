// core/drift.hpp: the one clock-drift allowance of every backend.
#include "core/drift.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace std::chrono_literals;
using dlock::detail::drift_for;

namespace {

TEST(drift, is_one_percent_of_the_lease_plus_two_milliseconds) {
    EXPECT_EQ(drift_for(1000ms), 12ms);
    EXPECT_EQ(drift_for(30s), 302ms);
}

TEST(drift, keeps_the_fraction_of_a_millisecond) {
    EXPECT_EQ(drift_for(150ms), 3500us);
    static_assert(drift_for(100ms) == 3ms);
}

} // namespace
