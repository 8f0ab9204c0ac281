// Shared helpers of the integration tests: skip macros and client options with short bounds.
#pragma once

#include "redis_fixture.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#define DLOCK_SKIP_WITHOUT_REDIS()                                                                 \
    if (!dlock::test::redis_available()) GTEST_SKIP() << "redis-server/redis-cli not installed"

namespace dlock::test {

using namespace std::chrono_literals;

/// Options for `url` with timeouts short enough that a broken test fails fast.
inline client_options fast_options(const std::string& url) {
    auto o = parse_url(url);
    o.connect_timeout = 1s;
    o.command_timeout = 1s;
    o.reconnect_min = 5ms;
    o.reconnect_max = 50ms;
    return o;
}

} // namespace dlock::test
