// dlock/zk_fencing.hpp: writing a resource kept in ZooKeeper only while the lock is held.
//
// The ZooKeeper twin of fenced_set() (dlock/fencing.hpp): instead of comparing tokens, the
// write and a check that the holder's own lock node still exists go to the server as one
// transaction (a ZooKeeper multi), so a holder whose node is gone (its session expired, the
// lock was broken with unlock --force, it was paused past its session) cannot write, whatever
// it believes. The check is made by the server in its total order: no later holder's write
// can come before it.
//
//   dlock::client c("zk://zk1:2181/app");
//   auto l = c.acquire("orders", {.wait = 5s});
//   dlock::zk_fenced_set(c, l, "state/orders", "42"); // throws errc::not_owner once lost
#pragma once

#include <string_view>
#include <system_error>

namespace dlock {

class client;
class lease;

/// Writes `data` to the znode `node` (a path under the client's chroot, created as a
/// persistent node when missing; its parent must exist) only if `held`'s lock node still
/// exists: one multi of check(lock node) and setData (or create) of `node`.
/// Errors: errc::not_owner when the lock node is gone (lost or released: nothing written);
/// errc::unsupported when `c` is not a ZooKeeper client; errc::invalid_argument for an empty
/// or non-ZooKeeper lease, a bad path, or a `node` inside the lock's own directory (other data
/// there would block lock clients); errc::configuration_error when the node's parent is
/// missing; errc::ambiguous when an answer was lost and the write, sent again once reconnected
/// (the check still guards it), was refused or could not be sent (the first may have applied);
/// errc::unavailable, errc::server_error. The ec form returns false with `ec` set.
/// Blocking: one round trip (two when the node is created). Thread safety: any thread except
/// the client's I/O thread.
///@{
void zk_fenced_set(client& c, const lease& held, std::string_view node, std::string_view data);
[[nodiscard]] bool zk_fenced_set(client& c, const lease& held, std::string_view node,
                                 std::string_view data, std::error_code& ec);
///@}

} // namespace dlock
