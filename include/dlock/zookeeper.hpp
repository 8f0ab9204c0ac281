// dlock/zookeeper.hpp: what only a ZooKeeper client has, as free functions over a dlock::client.
//
// A ZooKeeper client is made from a zk:// URL (when this build has libzookeeper-st); its lock
// objects, leases, multi-locks, inspect/list and force_unlock are the neutral client's
// (dlock/client.hpp), with the kinds of lock_kind that ZooKeeper offers (reentrant, read, write,
// semaphore). What ZooKeeper alone has is its fenced write, here in namespace dlock::zookeeper.
// On a client of another backend it fails with errc::unsupported (the throwing overload's
// what() names the call, the zk:// client it needs and the client's backend). The Redis and
// PostgreSQL counterparts are dlock/redis.hpp and dlock/postgres.hpp; docs/design/fencing.md
// tells the fenced-write story of all three.
//
// The fenced write: instead of comparing tokens (as dlock::redis::fenced_set does), the write
// and a check that the holder's own lock node still exists go to the server as one transaction
// (a ZooKeeper multi), so a holder whose node is gone (its session expired, the lock was broken
// with unlock --force, it was paused past its session) cannot write, whatever it believes. The
// check is made by the server in its total order: no later holder's write can come before it.
//
//   dlock::client c("zk://zk1:2181/app");
//   auto l = c.acquire("orders", {.wait = 5s});
//   dlock::zookeeper::fenced_set(c, l, "state/orders", "42"); // throws errc::not_owner once lost
#pragma once

#include <dlock/client.hpp>
#include <dlock/lease.hpp>

#include <string_view>
#include <system_error>

namespace dlock::zookeeper {

///@{
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
void fenced_set(client& c, const lease& held, std::string_view node, std::string_view data);
[[nodiscard]] bool fenced_set(client& c, const lease& held, std::string_view node,
                              std::string_view data, std::error_code& ec);
///@}

} // namespace dlock::zookeeper
