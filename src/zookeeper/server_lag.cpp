#include "zookeeper/server_lag.hpp"

#include "zookeeper/result_codes.hpp"

#include <dlock/error.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

using std::chrono::milliseconds;

std::string ms(milliseconds d) {
    return std::to_string(d.count()) + " ms";
}

/// Quorum mode: a membership line ("server.1=host:2888:3888:participant;...").
bool names_servers(std::string_view config) {
    for (std::size_t at = 0; at < config.size();) {
        const auto end = std::min(config.find('\n', at), config.size());
        if (config.substr(at, end - at).starts_with("server.")) return true;
        at = end + 1;
    }
    return false;
}

} // namespace

lag_choice choose_server_lag(const zk_url& url, const config_answer* config,
                             milliseconds negotiated) {
    lag_choice c;
    const auto refuse = [&](std::string why) {
        c.ec = make_error_code(errc::configuration_error);
        c.why = std::move(why);
        return c;
    };
    std::string assumed; // why the lag was assumed, for the refusal
    if (url.server_lag) {
        c.lag = *url.server_lag;
    } else if (!config) {
        c.ec = make_error_code(errc::configuration_error);
        c.why = "zk:// server_lag neither given nor read from the server";
        return c;
    } else if (config->rc == ZOK && !names_servers(config->data)) {
        return c; // standalone: lag 0
    } else if (config->rc == ZOK || config->rc == ZNONODE) {
        c.lag = assumed_ensemble_lag;
        assumed = config->rc == ZOK ? "ZooKeeper " + url.display() + " is an ensemble (quorum mode)"
                                    : "ZooKeeper " + url.display() +
                                          " does not say whether it is an ensemble (it has no "
                                          "/zookeeper/config: a server before 3.5)";
    } else {
        c.ec = make_error_code(transport_loss(config->rc) ? errc::unavailable : errc::server_error);
        c.why = "ZooKeeper " + url.display() + ": reading /zookeeper/config: " + zerror(config->rc);
        return c;
    }
    if (2 * negotiated > 3 * c.lag) return c;
    if (!assumed.empty())
        return refuse(assumed + ", and its negotiated session timeout (" + ms(negotiated) +
                      ") is not above 1.5 x the server_lag assumed for an ensemble (" + ms(c.lag) +
                      ", ZooKeeper's sample zoo.cfg): set the zk:// URL's server_lag to "
                      "(syncLimit + 1) x tickTime in ms (0 for a standalone server) and a "
                      "session_timeout above 1.5 x it; a follower cut off from its leader "
                      "goes on answering for syncLimit x tickTime, which a lock's deadline "
                      "must leave out");
    return refuse("the ZooKeeper session's negotiated timeout (" + ms(negotiated) +
                  ") is not above 1.5 x the zk:// URL's server_lag (" + ms(c.lag) +
                  "): raise session_timeout (the server clamps it to its maxSessionTimeout, "
                  "20 x tickTime unless set)");
}

} // namespace dlock::detail::zk
