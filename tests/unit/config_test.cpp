// URLs, option printing (never the password) and error classification.
#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <gtest/gtest.h>

using dlock::errc;
using dlock::parse_url;
using dlock::topology;

TEST(config, parses_every_url_form) {
    auto o = parse_url("redis://127.0.0.1:6380/2");
    EXPECT_EQ(o.kind, topology::standalone);
    EXPECT_EQ(o.endpoints.at(0), (dlock::endpoint{"127.0.0.1", 6380}));
    EXPECT_EQ(o.db, 2);
    EXPECT_FALSE(o.tls.enabled);

    o = parse_url("rediss://alice:p%40ss@cache.example:7000");
    EXPECT_TRUE(o.tls.enabled);
    EXPECT_EQ(o.username, "alice");
    EXPECT_EQ(o.password, "p@ss");
    EXPECT_EQ(o.endpoints.at(0).host, "cache.example");

    o = parse_url("redis://:onlypass@h");
    EXPECT_EQ(o.username, "");
    EXPECT_EQ(o.password, "onlypass");
    EXPECT_EQ(o.endpoints.at(0).port, 6379);

    o = parse_url("redis://[::1]:6390");
    EXPECT_EQ(o.endpoints.at(0).host, "::1");
    EXPECT_EQ(o.endpoints.at(0).port, 6390);

    o = parse_url("unix:///run/redis.sock?db=3");
    EXPECT_EQ(o.unix_socket, "/run/redis.sock");
    EXPECT_EQ(o.db, 3);

    o = parse_url("redis-sentinel://a:26379,b:26380,c/mymaster");
    EXPECT_EQ(o.kind, topology::sentinel);
    EXPECT_EQ(o.endpoints.size(), 3u);
    EXPECT_EQ(o.endpoints[2].port, 26379);
    EXPECT_EQ(o.master_name, "mymaster");

    o = parse_url("redis-cluster://n1:7000,n2:7001");
    EXPECT_EQ(o.kind, topology::cluster);
    EXPECT_EQ(o.endpoints.size(), 2u);
}

TEST(config, sentinel_urls_carry_the_database_tls_and_the_sentinels_own_credentials) {
    auto o = parse_url("rediss-sentinel://app:pw@a:1,b:2/mymaster/3?sentinel_user=s&"
                       "sentinel_password=s%40cret&wait=2:250&lock_delay=5000");
    EXPECT_EQ(o.kind, topology::sentinel);
    EXPECT_TRUE(o.tls.enabled);
    EXPECT_EQ(o.master_name, "mymaster");
    EXPECT_EQ(o.db, 3);
    EXPECT_EQ(o.username, "app");
    EXPECT_EQ(o.password, "pw");
    EXPECT_EQ(o.sentinel_username, "s");
    EXPECT_EQ(o.sentinel_password, "s@cret");
    EXPECT_EQ(o.wait_replicas.replicas, 2);
    EXPECT_EQ(o.wait_replicas.timeout, std::chrono::milliseconds(250));
    EXPECT_EQ(o.failover_lock_delay, std::chrono::milliseconds(5000));
    const auto s = dlock::to_string(o);
    EXPECT_EQ(s, "rediss-sentinel://app:***@a:1,b:2/mymaster/3?wait=2:250&lock_delay=5000&"
                 "sentinel_user=s&sentinel_password=***");
    o = parse_url("redis://h:1?wait=1");
    EXPECT_EQ(o.wait_replicas.replicas, 1);
    EXPECT_EQ(o.wait_replicas.timeout, std::chrono::milliseconds(100));
}

TEST(config, rejects_bad_urls_with_a_reason_that_has_no_password) {
    for (const char* bad : {"127.0.0.1:6379",
                            "http://h",
                            "redis://h:0",
                            "redis://h:70000",
                            "redis://h:abc",
                            "redis://:pw@h:1,h2:2",
                            "redis-sentinel://h:1",
                            "redis://h/x",
                            "redis-cluster://h/1",
                            "unix://relative",
                            "redis://u:%zz@h",
                            "redis://",
                            "redis://h?wait=x",
                            "redis://h?wait=1:-5",
                            "redis://h?lock_delay=soon",
                            "redis://h?nope=1",
                            "redis://h?wait",
                            "redis-sentinel://h:1/m/x",
                            "redis-sentinel://h:1//2",
                            "redis-sentinel://h:1/m?sentinel_password=%zz"}) {
        std::error_code ec;
        std::string why;
        parse_url(bad, ec, &why);
        EXPECT_EQ(ec, errc::configuration_error) << bad;
        EXPECT_FALSE(why.empty()) << bad;
        EXPECT_EQ(why.find("pw"), std::string::npos) << why;
    }
    EXPECT_THROW(parse_url("nope"), dlock::error);
}

TEST(config, to_string_never_prints_the_password) {
    const auto o = parse_url("redis://app:s3cr3t@10.0.0.1:6400/1");
    const auto s = dlock::to_string(o);
    EXPECT_EQ(s.find("s3cr3t"), std::string::npos);
    EXPECT_EQ(s, "redis://app:***@10.0.0.1:6400/1");
    EXPECT_EQ(dlock::to_string(parse_url("redis-sentinel://a:1,b:2/m")),
              "redis-sentinel://a:1,b:2/m");
}

TEST(errors, server_errors_are_classified_by_their_first_word) {
    const std::pair<const char*, errc> table[] = {
        {"NOSCRIPT No matching script. Please use EVAL.", errc::no_script},
        {"READONLY You can't write against a read only replica.", errc::readonly},
        {"MOVED 6035 127.0.0.1:17102", errc::moved},
        {"ASK 6035 127.0.0.1:17102", errc::moved},
        {"OOM command not allowed when used memory > 'maxmemory'.", errc::out_of_memory},
        {"BUSY Redis is busy running a script.", errc::server_busy},
        {"LOADING Redis is loading the dataset in memory", errc::server_busy},
        {"MASTERDOWN Link with MASTER is down", errc::server_busy},
        {"TRYAGAIN Multiple keys request during rehashing", errc::server_busy},
        {"CLUSTERDOWN The cluster is down", errc::server_busy},
        {"NOAUTH Authentication required.", errc::auth_failed},
        {"WRONGPASS invalid username-password pair", errc::auth_failed},
        {"NOPERM this user has no permissions", errc::permission_denied},
        {"CROSSSLOT Keys in request don't hash to the same slot", errc::cross_slot},
        {"NOREPLICAS Not enough good replicas to write.", errc::server_busy},
        {"UNKILLABLE Sorry the script already executed write commands", errc::server_busy},
        {"DENIED Redis is running in protected mode", errc::auth_failed},
        {"ERR The user executing the script can't run this command or subcommand script: "
         "3a95..., on @user_script:1.",
         errc::permission_denied}, // an ACL denial inside a script (Redis 7)
        {"ERR The user executing the script can't access at least one of the keys",
         errc::permission_denied},
        {"ERR unknown command", errc::server_error},
        {"ERR Script killed by user with SCRIPT KILL...", errc::server_error},
        // Not a condition of its own: the transaction was discarded (dlock sends no MULTI).
        {"EXECABORT Transaction discarded because of previous errors.", errc::server_error},
        {"FOO bar", errc::server_error}, // an unknown first word
        {"WRONGTYPE Operation against a key", errc::server_error},
        {"", errc::server_error},
        {"OOMX not a prefix match", errc::server_error},
    };
    for (const auto& [msg, code] : table)
        EXPECT_EQ(dlock::classify_server_error(msg), code) << msg;
}

TEST(errors, the_category_names_every_code) {
    EXPECT_STREQ(dlock::error_category().name(), "dlock");
    for (int e = 1; e <= static_cast<int>(errc::invalid_argument); ++e)
        EXPECT_NE(dlock::error_category().message(e), "unknown dlock error") << e;
    static_assert(std::is_error_code_enum<errc>::value);
    const std::error_code ec = errc::not_owner;
    EXPECT_EQ(ec.category(), dlock::error_category());
}
