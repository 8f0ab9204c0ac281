// tests/cli/elect_check.hpp: what each backend's CLI test checks of `dlock elect`: the command
// runs while leading, with DLOCK_EPOCH, and `dlock leader --json` run by it shows the value and
// that epoch.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace dlock::test {

/// The command of `dlock elect --value V NAME -- sh -c CMD` that prints the epoch it got, then
/// runs `dlock leader --json NAME` with `cli_and_url` ("/path/dlock --url 'URL'").
inline std::string print_epoch_and_leader(const std::string& cli_and_url, const std::string& name) {
    return "echo epoch=$DLOCK_EPOCH; " + cli_and_url + " leader --json " + name;
}

/// `out` (of that command) shows DLOCK_EPOCH, and `leader --json` showed `value` with it.
inline void expect_led_with_its_epoch(const std::string& out, const std::string& value) {
    const auto at = out.find("epoch=");
    ASSERT_NE(at, std::string::npos) << out;
    const auto epoch = out.substr(at + 6, out.find('\n', at) - at - 6);
    EXPECT_FALSE(epoch.empty()) << out;
    EXPECT_NE(out.find("\"vacant\":false,\"value\":\"" + value + "\",\"epoch\":" + epoch + "}"),
              std::string::npos)
        << out;
}

} // namespace dlock::test
