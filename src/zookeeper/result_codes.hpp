// zookeeper/result_codes.hpp: how the backend reads the C client's result codes, in one place
// (the acquisition, the queries, the downgrade and the fenced write ask the same questions).
#pragma once

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

/// A lost connection or a timed-out request (ZCONNECTIONLOSS, ZOPERATIONTIMEOUT): worth
/// retrying once connected, within the session.
inline bool transport_loss(int rc) noexcept {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/// The session is over (expired, closed, or the handle no longer valid): whatever it held is gone.
inline bool session_gone(int rc) noexcept {
    return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING;
}

} // namespace dlock::detail::zk
