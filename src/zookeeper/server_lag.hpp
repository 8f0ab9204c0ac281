// zookeeper/server_lag.hpp: the server_lag a session's lease uses, from the URL and from what
// the server says of itself (sans-I/O; docs/design/zookeeper.md, "A follower cut off from its
// leader").
//
// A URL that gives server_lag is taken at its word. A URL that omits it has the server asked
// for /zookeeper/config (ZooKeeper >= 3.5 keeps the ensemble's membership there, empty outside
// quorum mode):
// - empty: a standalone server, which expires its own sessions: lag 0;
// - server.N= lines: an ensemble, whose (syncLimit + 1) x tickTime a client cannot learn:
//   ZooKeeper's sample zoo.cfg (tickTime 2000, syncLimit 5), 12 s, is assumed;
// - no such node (a server before 3.5): either, so the ensemble's assumption.
// Either way the negotiated session timeout (the server clamps the URL's) must be more than
// 1.5 x the lag, or the session is refused with errc::configuration_error and one line saying
// what to set.
#pragma once

#include "zookeeper/url.hpp"

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail::zk {

/// ZooKeeper's sample zoo.cfg: (syncLimit 5 + 1) x tickTime 2000.
inline constexpr std::chrono::milliseconds assumed_ensemble_lag{12000};

/// The answer to a read of /zookeeper/config.
struct config_answer {
    int rc = 0;         ///< ZOK, ZNONODE, ...
    std::string data{}; ///< with ZOK
};

struct lag_choice {
    std::chrono::milliseconds lag{0};
    std::error_code ec{}; ///< configuration_error (refused), unavailable or server_error
    std::string why{};    ///< with ec: one line
};

/// The lag for a session of `url` whose negotiated timeout is `negotiated`; `config` is null
/// when the URL gives server_lag (nothing need be read).
lag_choice choose_server_lag(const zk_url& url, const config_answer* config,
                             std::chrono::milliseconds negotiated);

} // namespace dlock::detail::zk
