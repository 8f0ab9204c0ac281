// postgresql:// URLs (postgres/settings.hpp) and error classification (postgres/errors.hpp):
// no server.
#include "postgres/advisory.hpp"
#include "postgres/errors.hpp"
#include "postgres/settings.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace pg = dlock::detail::pg;
using dlock::errc;
using namespace std::chrono_literals;

namespace {

std::string param(const pg::settings& s, std::string_view k) {
    for (const auto& [key, v] : s.params)
        if (key == k) return v;
    return "<unset>";
}

TEST(pg_settings, a_url_becomes_libpq_parameters_and_a_display_without_the_password) {
    std::error_code ec;
    auto s =
        pg::parse_settings("postgresql://alice:s3cr%40t@db.example:5433/app?sslmode=require", ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(s.display, "postgresql://alice@db.example:5433/app");
    EXPECT_EQ(param(s, "password"), "s3cr@t");
    EXPECT_EQ(param(s, "sslmode"), "require");
    EXPECT_EQ(param(s, "fallback_application_name"), "dlock");
    EXPECT_EQ(s.key, pg::key_scheme::sha256_le64);
    EXPECT_TRUE(s.fence);
    EXPECT_EQ(s.check_period, 2000ms);
    // Both spellings of the password are redacted from any message.
    EXPECT_EQ(pg::redact("x s3cr%40t y s3cr@t", s.secrets), "x *** y ***");
    EXPECT_FALSE(pg::parse_settings("postgres://h/db", ec).display.empty());
    EXPECT_FALSE(ec);
}

TEST(pg_settings, keepalive_is_set_on_both_ends_unless_the_url_says_otherwise) {
    std::error_code ec;
    auto s = pg::parse_settings("postgresql://h/db", ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(param(s, "keepalives_idle"), "5");
    EXPECT_EQ(param(s, "tcp_user_timeout"), "10000");
    const auto opts = param(s, "options");
    EXPECT_NE(opts.find("-c tcp_keepalives_idle=5"), std::string::npos);
    EXPECT_NE(opts.find("-c tcp_keepalives_count=3"), std::string::npos);
    EXPECT_NE(opts.find("-c client_connection_check_interval=1000"), std::string::npos);
    EXPECT_EQ(s.keep.server_bound(), 11000ms);

    s = pg::parse_settings("postgresql://h/db?keepalives_idle=30&options=-c%20work_mem%3D1MB"
                           "&dlock_keepalive=2:1:3:4000",
                           ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(param(s, "keepalives_idle"), "30"); // the URL's own wins
    EXPECT_EQ(std::count_if(s.params.begin(), s.params.end(),
                            [](const auto& p) { return p.first == "keepalives_idle"; }),
              1);
    EXPECT_NE(param(s, "options").find("tcp_keepalives_idle=2"), std::string::npos);
    EXPECT_NE(param(s, "options").find("-c work_mem=1MB"), std::string::npos); // after ours
    EXPECT_EQ(s.keep.server_bound(), 4000ms);

    s = pg::parse_settings("postgresql://h/db?dlock_keepalive=off", ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(param(s, "keepalives_idle"), "<unset>");
    EXPECT_EQ(param(s, "options").find("tcp_keepalives"), std::string::npos);
}

TEST(pg_settings, dlock_parameters_are_read_and_removed) {
    std::error_code ec;
    auto s = pg::parse_settings("postgresql://h/db?dlock_key=crc32-pair&dlock_fence=off&"
                                "dlock_check=500&dlock_pool=2&dlock_timeout=700&"
                                "dlock_connect_timeout=800&dlock_table=jobs_lock&"
                                "dlock_versioned_table=app_locks&dlock_lease=600&dlock_prepare=off",
                                ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(s.key, pg::key_scheme::crc32_pair);
    EXPECT_FALSE(s.fence);
    EXPECT_EQ(s.check_period, 500ms);
    EXPECT_EQ(s.pool, 2U);
    EXPECT_EQ(s.request_timeout, 700ms);
    EXPECT_EQ(s.connect_timeout, 800ms);
    EXPECT_EQ(s.shedlock_table, "jobs_lock");
    EXPECT_EQ(s.versioned_table, "app_locks");
    EXPECT_EQ(s.row_lease, 600ms);
    EXPECT_FALSE(s.prepare);
    EXPECT_EQ(pg::parse_settings("postgresql://h/db", ec).versioned_table, "locks");
    EXPECT_TRUE(pg::parse_settings("postgresql://h/db", ec).prepare);
    EXPECT_TRUE(pg::parse_settings("postgresql://h/db?dlock_prepare=on", ec).prepare);
    EXPECT_FALSE(pg::parse_settings("postgresql://h/db", ec).row_lease);
    for (const auto& [k, v] : s.params)
        EXPECT_NE(k.substr(0, 6), "dlock_");
}

TEST(pg_settings, a_check_period_not_shorter_than_the_keepalive_bound_is_rejected) {
    // A cut-off holder would believe past the moment the server frees its session's locks.
    std::error_code ec;
    std::string why;
    pg::parse_settings("postgresql://h/db?dlock_check=60000", ec, &why); // bound 11 s
    EXPECT_EQ(ec, dlock::errc::configuration_error);
    EXPECT_NE(why.find("dlock_check (60000 ms) must be shorter than the server's keepalive "
                       "bound (11000 ms"),
              std::string::npos)
        << why;
    pg::parse_settings("postgresql://h/db?dlock_check=3000&dlock_keepalive=1:1:2:3000", ec);
    EXPECT_EQ(ec, dlock::errc::configuration_error); // bound 3 s: equal is too long
    auto s =
        pg::parse_settings("postgresql://h/db?dlock_check=2999&dlock_keepalive=1:1:2:3000", ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(s.check_period, 2999ms);
    // Keepalive off: the bound is the server's defaults (2 h 11 min 15 s).
    pg::parse_settings("postgresql://h/db?dlock_keepalive=off&dlock_check=600000", ec);
    EXPECT_FALSE(ec);
}

TEST(pg_settings, bad_urls_are_configuration_errors_that_never_show_the_password) {
    const char* bad[] = {
        "redis://h",
        "postgresql://h/db?dlock_nope=1",
        "postgresql://h/db?dlock_key=md5",
        "postgresql://h/db?dlock_check=5",
        "postgresql://h/db?dlock_fence=maybe",
        "postgresql://h/db?dlock_prepare=sometimes",
        "postgresql://h/db?dlock_keepalive=1:2",
        "postgresql://h/db?dlock_timeout",
        "postgresql://h/db?dlock_lease=29",
        "postgresql://h/db?dlock_lease=-1",
        "postgresql://h/db?dlock_versioned_table=locks;drop",
        "postgresql://h/db?dlock_versioned_table=1locks",
        "postgresql://h/"
        "db?dlock_versioned_table=a23456789012345678901234567890123456789012345678901234567890",
        "postgresql://u:hunter2@h/db?nosuchparam=1",
    };
    for (const char* u : bad) {
        std::error_code ec;
        std::string why;
        pg::parse_settings(u, ec, &why);
        EXPECT_EQ(ec, errc::configuration_error) << u;
        EXPECT_FALSE(why.empty()) << u;
        EXPECT_EQ(why.find("hunter2"), std::string::npos) << why;
    }
}

TEST(pg_errors, sqlstates_map_onto_dlock_codes) {
    EXPECT_EQ(pg::classify_sqlstate("42501"), errc::permission_denied);
    EXPECT_EQ(pg::classify_sqlstate("28P01"), errc::auth_failed);
    EXPECT_EQ(pg::classify_sqlstate("53200"), errc::out_of_memory);
    EXPECT_EQ(pg::classify_sqlstate("53300"), errc::server_busy);
    EXPECT_EQ(pg::classify_sqlstate("57P01"), errc::unavailable);
    EXPECT_EQ(pg::classify_sqlstate("08006"), errc::unavailable);
    EXPECT_EQ(pg::classify_sqlstate("57014"), errc::cancelled);
    EXPECT_EQ(pg::classify_sqlstate("25006"), errc::readonly);
    EXPECT_EQ(pg::classify_sqlstate("42P01"), errc::server_error);
    EXPECT_EQ(pg::classify_sqlstate("42P01", true), errc::invalid_argument);
    EXPECT_EQ(pg::classify_sqlstate("XX000"), errc::server_error);
}

TEST(pg_errors, connection_failures_are_classified_by_their_wording) {
    EXPECT_EQ(pg::classify_connect_failure(
                  "connection to server at \"127.0.0.1\", port 1 failed: Connection refused"),
              errc::unavailable);
    EXPECT_EQ(pg::classify_connect_failure("connection to server at \"127.0.0.1\", port 5432 "
                                           "failed: FATAL:  password authentication failed for "
                                           "user \"postgres\""),
              errc::auth_failed);
    EXPECT_EQ(pg::classify_connect_failure("FATAL:  role \"x\" does not exist"), errc::auth_failed);
    EXPECT_EQ(pg::classify_connect_failure("FATAL:  database \"x\" does not exist"),
              errc::configuration_error);
    EXPECT_EQ(pg::classify_connect_failure("FATAL:  sorry, too many clients already"),
              errc::server_busy);
    EXPECT_EQ(pg::classify_connect_failure("could not translate host name \"x\" to address"),
              errc::unavailable);
}

} // namespace
