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
    // Several --url are Redlock (every command but bench); a redlock:// URL among them, a
    // master that is not a standalone server, or bench over them is a usage error.
    EXPECT_EQ(run({"--url", "redlock://a:1,b:2", "--url", "redis://c:3", "status", "n"}, &err), 64);
    EXPECT_EQ(run({"--url", "redis://a:1", "--url", "redis-cluster://b:2", "status", "n"}, &err),
              64);
    EXPECT_EQ(run({"--url", "redis://a:1", "--url", "redis://b:2", "bench"}, &err), 64);
    EXPECT_EQ(run({"--url", "http://x", "status", "n"}, &err), 64);
    EXPECT_EQ(run({"unlock", "n"}, &err), 64); // --force is required
    EXPECT_EQ(run({"status", "n", "--", "x"}, &err), 64);
}

TEST(cli_usage, an_unknown_command_is_named_and_a_missing_one_is_asked_for) {
    std::string err;
    EXPECT_EQ(run({"frobnicate", "x"}, &err), 64);
    EXPECT_NE(err.find("unknown command 'frobnicate'"), std::string::npos) << err;
    EXPECT_EQ(run({"--url", "redis://h:1", "stauts", "x"}, &err), 64);
    EXPECT_NE(err.find("unknown command 'stauts'"), std::string::npos) << err;
    EXPECT_EQ(run({}, &err), 64);
    EXPECT_NE(err.find("a command is required"), std::string::npos) << err;
    EXPECT_EQ(run({"status", "--watch", "--interval", "10ms", "x"}, &err), 64);
    EXPECT_EQ(run({"list", "--watch", "--json"}, &err), 64);
}

TEST(cli_exit_codes, every_library_error_has_a_sysexits_code_and_never_1) {
    using dlock::errc;
    for (int v = static_cast<int>(errc::not_owner); v <= static_cast<int>(errc::unsupported); ++v) {
        const int code = dlock::cli::exit_code_for(make_error_code(static_cast<errc>(v)));
        EXPECT_GE(code, 64) << v;
        EXPECT_LE(code, 78) << v;
    }
    EXPECT_EQ(dlock::cli::exit_code_for(errc::unavailable), 69);
    EXPECT_EQ(dlock::cli::exit_code_for(errc::out_of_memory), 76);
    EXPECT_EQ(dlock::cli::exit_code_for(errc::auth_failed), 69);
    EXPECT_EQ(dlock::cli::exit_code_for(errc::configuration_error), 78);
    EXPECT_EQ(dlock::cli::exit_code_for(errc::unsupported), 78);
    EXPECT_EQ(dlock::cli::exit_code_for(std::make_error_code(std::errc::no_child_process)), 71);
}

TEST(cli_exit_codes, a_wrongtype_reply_is_a_data_error_that_says_what_the_key_holds) {
    const auto f = dlock::cli::diagnose(
        dlock::errc::server_error, "cannot acquire 'n'",
        "127.0.0.1:6379: WRONGTYPE Operation against a key holding the wrong kind of value", "n",
        "string");
    EXPECT_EQ(f.code, 65);
    const std::string m = f.what();
    EXPECT_NE(m.find("'n' holds a string, not a lock"), std::string::npos) << m;
    EXPECT_NE(m.find("WRONGTYPE"), std::string::npos) << m;
    EXPECT_NE(m.find("use another lock name"), std::string::npos) << m;
}

TEST(cli_exit_codes, an_unavailable_server_names_address_reason_and_what_to_do) {
    const auto refused = dlock::cli::diagnose(dlock::errc::unavailable, "cannot acquire 'n'",
                                              "connect 127.0.0.1:1: Connection refused");
    EXPECT_EQ(refused.code, 69);
    EXPECT_NE(std::string(refused.what()).find("connect 127.0.0.1:1: Connection refused"),
              std::string::npos);
    EXPECT_NE(std::string(refused.what()).find("is redis-server running there?"),
              std::string::npos);
    const auto unknown = dlock::cli::diagnose(dlock::errc::unavailable, "cannot acquire 'n'",
                                              "resolve nohost:6379: Host not found");
    EXPECT_NE(std::string(unknown.what()).find("check the host name"), std::string::npos);
    const auto oom = dlock::cli::diagnose(dlock::errc::out_of_memory, "cannot acquire 'n'",
                                          "127.0.0.1:6379: OOM command not allowed");
    EXPECT_EQ(oom.code, 76);
    EXPECT_NE(std::string(oom.what()).find("raise maxmemory"), std::string::npos);
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
