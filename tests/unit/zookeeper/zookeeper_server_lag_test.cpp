// zookeeper/server_lag.hpp: which server_lag a session's lease uses, from the URL and from the
// server's /zookeeper/config.
#include "zookeeper/server_lag.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

using namespace std::chrono_literals;

zk_url url(std::string_view text) {
    std::error_code ec;
    std::string why;
    auto u = parse_zk_url(text, ec, &why);
    EXPECT_FALSE(ec) << why;
    return u;
}

const config_answer standalone{ZOK, ""};
const config_answer quorum{ZOK, "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n"
                                "server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n"
                                "version=100000000"};
const config_answer before_3_5{ZNONODE, ""};

TEST(zk_server_lag, a_standalone_server_lags_nothing) {
    const auto c = choose_server_lag(url("zk://h:1"), &standalone, 4000ms);
    EXPECT_FALSE(c.ec) << c.why;
    EXPECT_EQ(c.lag, 0ms);
    // Lines that only mention servers elsewhere are not membership.
    const config_answer other{ZOK, "version=1\nxserver.1=a"};
    EXPECT_EQ(choose_server_lag(url("zk://h:1"), &other, 4000ms).lag, 0ms);
}

TEST(zk_server_lag, an_ensemble_is_assumed_to_lag_as_the_sample_configuration) {
    const auto fits = choose_server_lag(url("zk://h:1"), &quorum, 18001ms);
    EXPECT_FALSE(fits.ec) << fits.why;
    EXPECT_EQ(fits.lag, 12000ms);
    const auto refused = choose_server_lag(url("zk://h:1"), &quorum, 18000ms);
    EXPECT_EQ(refused.ec, make_error_code(errc::configuration_error));
    EXPECT_NE(refused.why.find("is an ensemble"), std::string::npos) << refused.why;
    EXPECT_NE(refused.why.find("server_lag"), std::string::npos) << refused.why;
    // A server before 3.5 cannot say: an ensemble's assumption, and the way out named.
    const auto old = choose_server_lag(url("zk://h:1"), &before_3_5, 10000ms);
    EXPECT_EQ(old.ec, make_error_code(errc::configuration_error));
    EXPECT_NE(old.why.find("before 3.5"), std::string::npos) << old.why;
    EXPECT_NE(old.why.find("0 for a standalone server"), std::string::npos) << old.why;
    EXPECT_EQ(choose_server_lag(url("zk://h:1"), &before_3_5, 20000ms).lag, 12000ms);
}

TEST(zk_server_lag, the_urls_lag_is_taken_but_must_fit_the_negotiated_timeout) {
    const auto u = url("zk://h:1?session_timeout=9000&server_lag=3000");
    const auto fits = choose_server_lag(u, nullptr, 9000ms);
    EXPECT_FALSE(fits.ec) << fits.why;
    EXPECT_EQ(fits.lag, 3000ms);
    // The server clamped the session to 4 s.
    const auto clamped = choose_server_lag(u, nullptr, 4000ms);
    EXPECT_EQ(clamped.ec, make_error_code(errc::configuration_error));
    EXPECT_NE(clamped.why.find("negotiated timeout (4000 ms)"), std::string::npos) << clamped.why;
    // server_lag=0 on an ensemble is the user's choice, as before.
    EXPECT_EQ(choose_server_lag(url("zk://h:1?server_lag=0"), nullptr, 4000ms).lag, 0ms);
}

TEST(zk_server_lag, a_failed_read_is_an_error_of_its_kind) {
    const config_answer lost{ZCONNECTIONLOSS, ""};
    EXPECT_EQ(choose_server_lag(url("zk://h:1"), &lost, 4000ms).ec,
              make_error_code(errc::unavailable));
    const config_answer denied{ZNOAUTH, ""};
    const auto c = choose_server_lag(url("zk://h:1"), &denied, 4000ms);
    EXPECT_EQ(c.ec, make_error_code(errc::server_error));
    EXPECT_NE(c.why.find("/zookeeper/config"), std::string::npos) << c.why;
}

} // namespace
} // namespace dlock::detail::zk
