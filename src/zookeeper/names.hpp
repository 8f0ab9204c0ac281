// zookeeper/names.hpp: the Curator lock layout on ZooKeeper, sans-I/O (no client, no server).
//
// A lock named "orders" (under the URL's chroot) is the directory /orders; its contenders are
// the directory's children. dlock creates them as Curator does (zookeeper-sql.md §1a):
//   mutex   _c_<uuid>-lock-<seq10>       (InterProcessMutex)
//   write   _c_<uuid>-__WRIT__<seq10>    (InterProcessReadWriteLock, exclusive side)
//   read    _c_<uuid>-__READ__<seq10>    (InterProcessReadWriteLock, shared side)
//   lease   _c_<uuid>-lease-<seq10>      (InterProcessSemaphoreV2, under <lock>/leases)
//   latch   _c_<uuid>-latch-<seq10>      (LeaderLatch: an election's participant, data = value)
// and reads other clients' children tolerantly: any child whose name ends in 10 digits is a
// contender, ordered by that number (Kazoo's rule), so Kazoo or ZooKeeper-recipe nodes in the
// same directory are respected. A child without the 10 digits is not a lock node; the caller
// reports it (the directory is polluted; Curator would sort it by its whole name).
//
// Who holds (one rule for mutex and read-write directories): the first contender holds; a
// read contender also holds when no non-read contender sorts before it, or only the holding
// writer of its own sequence (a downgrade: the writer's read node is a plain EPHEMERAL node at
// the writer's sequence, as Curator >= 5.5 creates it, CURATOR-621; equal sequences sort the
// writer first). A waiter watches its
// immediate predecessor, a blocked reader the first non-read contender before it (Curator's
// InterProcessReadWriteLock rules); no herd for the mutex.
//
// Known limit: the sequence is the parent's cversion, a signed 32-bit counter; after 2^31
// creations under one directory it turns negative ("-000000005") and the order breaks, in
// Curator as here. It is never used as a fencing token (the token is the node's czxid).
#pragma once

#include "core/glob.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::zk {

/// The node name each kind creates, without the protection prefix and the sequence.
inline constexpr std::string_view mutex_infix = "lock-";
inline constexpr std::string_view read_infix = "__READ__";
inline constexpr std::string_view write_infix = "__WRIT__";
inline constexpr std::string_view lease_infix = "lease-";
inline constexpr std::string_view latch_infix = "latch-";
/// Curator's protection prefix: "_c_" + 36-character UUID + "-" (40 characters).
inline constexpr std::string_view protect_prefix = "_c_";
inline constexpr std::size_t protected_length = 40;

/// True for a valid znode path segment: non-empty, not "." or "..", no '/', no control
/// characters.
bool valid_segment(std::string_view s) noexcept;

/// The directory of lock `name` ("orders", "/orders" or "a/b/c") as an absolute path under the
/// chroot ("/orders", "/a/b/c"). Empty when the name is invalid (empty, a bad segment, or the
/// reserved /zookeeper tree); `why` says what is wrong.
std::string lock_dir(std::string_view name, std::string* why);

/// "_c_<uuid>-" + infix: what create() is given (the server appends the sequence).
std::string node_prefix(std::string_view uuid, std::string_view infix);

/// One child of a lock directory, parsed.
struct contender {
    std::string name{};   ///< the child's name (not the full path)
    std::int64_t seq = 0; ///< the trailing 10 digits
    bool shared = false;  ///< a read node (contains "__READ__"); everything else excludes
    std::string owner{};  ///< "_c_<uuid>" for a protected node, else the name before seq
};

/// Parses a child name: nullopt when it does not end in 10 digits (not a lock node).
std::optional<contender> parse_child(std::string_view name);

/// The directory's children as contenders in queue order (by sequence, a writer before a
/// reader of the same sequence, then name), and the
/// names that are not lock nodes (in `strangers`, when given).
std::vector<contender> sort_children(const std::vector<std::string>& children,
                                     std::vector<std::string>* strangers = nullptr);

/// An election's children in Curator LeaderLatch's order (LockInternals.getSortedChildren with
/// StandardLockInternalsDriver.fixForSorting): by what follows the last "latch-" in the name (the
/// 10-digit sequence), or by the whole name when it has none; stable. The first one leads.
std::vector<std::string> sort_latch(std::vector<std::string> children);

/// Whether the contender at `i` holds (rule above).
bool holds_at(const std::vector<contender>& sorted, std::size_t i) noexcept;

/// The decision for one contender.
struct decision {
    bool found = false;       ///< own node is among the children (false: gone, i.e. lost)
    bool holds = false;       ///< it holds the lock now
    std::size_t position = 0; ///< its index in the queue
    std::string watch{};      ///< when waiting: the child to watch (its deletion wakes us)
};

/// Decides for the child named `own` of `sorted`.
decision decide(const std::vector<contender>& sorted, std::string_view own);

/// Decides for `own` on the queue `sorted` was, less the child `gone` whose deletion a watch
/// reported: a waiter whose predecessor went takes the lock without listing again when this
/// holds. A sequential child made since has a higher sequence (the directory cannot be reaped
/// while `own` is in it), so it cannot stand before `own`, and a child deleted since only
/// frees the way; so "holds" here is true of the queue the server has now. The one child made
/// later at a lower sequence is a downgrade's read node, at its writer's sequence: so the
/// answer is "list again" (holds false) when a write node stands before `own`.
decision decide_without(std::vector<contender> sorted, std::string_view own, std::string_view gone);

/// The child of `children` created with protection prefix `prefix` ("_c_<uuid>-"), if any
/// (protected-mode recovery after a connection loss during create).
std::optional<std::string> find_protected(const std::vector<std::string>& children,
                                          std::string_view prefix);

/// Glob match with * and ? (dlock list patterns): core/glob.hpp.
using detail::glob_match;

/// "0x" + 16 lowercase hex digits of a session id.
std::string session_hex(std::int64_t session);

} // namespace dlock::detail::zk
