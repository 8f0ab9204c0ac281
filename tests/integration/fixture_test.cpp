// The fixtures themselves: every topology starts, answers, and leaves nothing behind.
#include "redis_fixture.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <signal.h>

using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::server_options;

#define SKIP_WITHOUT_REDIS()                                                                       \
    if (!dlock::test::redis_available()) GTEST_SKIP() << "redis-server/redis-cli not installed"

TEST(fixture, a_standalone_server_answers_and_is_gone_after_destruction) {
    SKIP_WITHOUT_REDIS();
    pid_t pid = 0;
    std::filesystem::path dir;
    {
        redis_server s;
        pid = s.pid();
        dir = s.dir();
        EXPECT_EQ(s.cli({"PING"}), "PONG");
        EXPECT_EQ(s.cli({"SET", "k", "v"}), "OK");
        EXPECT_EQ(s.cli({"GET", "k"}), "v");
        EXPECT_TRUE(std::filesystem::exists(s.unix_socket()));
    }
    EXPECT_NE(::kill(pid, 0), 0);
    EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(fixture, kill_then_start_keeps_the_port) {
    SKIP_WITHOUT_REDIS();
    redis_server s;
    const auto port = s.port();
    s.kill();
    EXPECT_FALSE(s.running());
    s.start();
    EXPECT_EQ(s.port(), port);
    EXPECT_EQ(s.cli({"PING"}), "PONG");
}

TEST(fixture, a_paused_server_answers_again_after_resume) {
    SKIP_WITHOUT_REDIS();
    redis_server s;
    s.pause();
    s.resume();
    EXPECT_EQ(s.cli({"PING"}), "PONG");
}

TEST(fixture, the_password_variant_requires_auth) {
    SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.password = "s3cret"});
    EXPECT_EQ(s.cli({"PING"}), "PONG"); // cli() passes the password
    EXPECT_NE(s.cli({"AUTH", "default", "wrong"}).find("WRONGPASS"), std::string::npos);
    EXPECT_EQ(s.url().find("s3cret"), std::string::npos);
}

TEST(fixture, acl_lines_create_users) {
    SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.acl_lines = {"user alice on >pw ~app:* +@all"}});
    EXPECT_NE(s.cli({"ACL", "LIST"}).find("user alice"), std::string::npos);
}

TEST(fixture, the_tls_variant_serves_tls_with_the_generated_ca) {
    SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.tls = true});
    EXPECT_EQ(s.url().rfind("rediss://", 0), 0u);
    EXPECT_EQ(s.cli({"PING"}), "PONG");
    EXPECT_TRUE(std::filesystem::exists(s.tls().wrong_ca_cert));
    EXPECT_TRUE(std::filesystem::exists(s.tls().wrong_host_cert));
}

TEST(fixture, independent_masters_have_distinct_ports) {
    SKIP_WITHOUT_REDIS();
    dlock::test::redis_masters m(3);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_NE(m[0].port(), m[1].port());
    EXPECT_NE(m[1].port(), m[2].port());
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_EQ(m[i].cli({"ROLE"}).substr(0, 6), "master");
}

TEST(fixture, a_sentinel_group_reports_its_master_and_fails_over) {
    if (!dlock::test::sentinel_available()) GTEST_SKIP() << "redis-sentinel not installed";
    dlock::test::redis_sentinel_group g;
    EXPECT_EQ(g.current_master().second, g.master().port());
    EXPECT_EQ(g.url().rfind("redis-sentinel://", 0), 0u);
    g.failover_and_wait(20s);
    EXPECT_NE(g.current_master().second, g.master().port());
}

TEST(fixture, a_cluster_reaches_state_ok_and_serves_keys) {
    SKIP_WITHOUT_REDIS();
    dlock::test::redis_cluster c;
    ASSERT_EQ(c.size(), 6u);
    EXPECT_NE(c.node(0).cli({"CLUSTER", "INFO"}).find("cluster_state:ok"), std::string::npos);
    EXPECT_EQ(c.node(0).cli({"-c", "SET", "{k}a", "1"}), "OK");
    EXPECT_EQ(c.node(1).cli({"-c", "GET", "{k}a"}), "1");
}
