// The backends dlock::client can stand on, chosen by the URL's scheme.
//
// Redis schemes (redis, rediss, unix, redis-sentinel, rediss-sentinel, redis-cluster) make the
// Redis backend (src/redis/backend.hpp). zk:// names the ZooKeeper backend (src/zookeeper/),
// postgresql:// and postgres:// the PostgreSQL backend (src/postgres/), etcd:// and etcds://
// the etcd backend (src/etcd/); each is compiled in when its Debian packages were found at
// configure time (DLOCK_WITH_ZOOKEEPER, DLOCK_WITH_POSTGRES, DLOCK_WITH_ETCD), otherwise its
// scheme is errc::unsupported. Each backend declares its factory in its own header (same
// contract and signature as make_backend()); only backends.cpp includes them, and no backend
// includes this header.
#pragma once

#include "core/lock_backend.hpp"

#include <dlock/log.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail {

/// The backend `url` names, its events going to `log` (every backend: the sink is carried by
/// its client_metrics, core/metrics.hpp). Errors (null returned): `ec` = errc::unsupported for a
/// backend this build lacks, errc::configuration_error for a bad URL or an unknown scheme (`why`
/// then lists the known ones); `why` (when given) gets one line for the message (never a password).
std::shared_ptr<lock_backend> make_backend(std::string_view url, std::error_code& ec,
                                           std::string* why, const log_options& log = {});

/// Every scheme make_backend() knows, for messages and help: "redis://, rediss://, ...".
std::string known_schemes();

} // namespace dlock::detail
