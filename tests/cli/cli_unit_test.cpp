// The CLI without a server: durations, usage errors and their exit codes.
#include "cli.hpp"
#include "common.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace std::chrono_literals;
using dlock::cli::parse_duration;

namespace {
int run(std::vector<std::string> args, std::string* err_text = nullptr) {
    args.insert(args.begin(), "dlock");
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    std::ostringstream out, err;
    const int rc = dlock::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
    if (err_text) *err_text = err.str();
    return rc;
}
} // namespace

TEST(cli_duration, accepts_milliseconds_seconds_minutes_hours_and_zero) {
    EXPECT_EQ(parse_duration("250ms"), 250ms);
    EXPECT_EQ(parse_duration("30s"), 30s);
    EXPECT_EQ(parse_duration("5m"), 5min);
    EXPECT_EQ(parse_duration("1h"), 1h);
    EXPECT_EQ(parse_duration("0"), 0ms);
    EXPECT_EQ(parse_duration("0s"), 0ms);
}

TEST(cli_duration, rejects_everything_else) {
    for (const char* bad :
         {"", "5", "-1s", "1.5s", "5 s", "s", "10ms5", "999999999999999h", "1001h", "5q", "ms"})
        EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
}

TEST(cli_usage, bad_options_exit_64_with_one_line) {
    std::string err;
    EXPECT_EQ(run({"exec", "--wait", "soon", "n", "--", "true"}, &err), 64);
    EXPECT_NE(err.find("--wait"), std::string::npos);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
    EXPECT_EQ(run({"exec", "n"}, &err), 64); // no command
    EXPECT_EQ(run({"exec", "--kind", "bogus", "n", "--", "true"}, &err), 64);
    EXPECT_EQ(run({"frobnicate"}, &err), 64);
    EXPECT_EQ(run({"--url", "redis://a:1", "--url", "redis://b:2", "status", "n"}, &err), 64);
    EXPECT_EQ(run({"--url", "http://x", "status", "n"}, &err), 64);
    EXPECT_EQ(run({"unlock", "n"}, &err), 64); // --force is required
    EXPECT_EQ(run({"status", "n", "--", "x"}, &err), 64);
}

TEST(cli_usage, the_password_never_appears_in_errors) {
    std::string err;
    run({"--url", "redis://u:hunter2@host:notaport", "status", "n"}, &err);
    EXPECT_EQ(err.find("hunter2"), std::string::npos);
    EXPECT_FALSE(err.empty());
}

TEST(cli_json, strings_are_escaped) {
    std::ostringstream o;
    dlock::cli::json_string(o, "a\"b\\c\n\x01");
    EXPECT_EQ(o.str(), "\"a\\\"b\\\\c\\n\\u0001\"");
}
