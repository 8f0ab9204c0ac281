// etcd/layout.hpp: etcd's concurrency.Mutex layout, sans-I/O (no client, no server).
//
// A lock named "orders" is the key range "orders/" (with a URL prefix /p: "/p/orders/"); each
// contender is one key in it, "<range><lease id in lowercase hex>", put with that lease, empty
// value. The contender with the lowest create revision holds; a waiter waits for the deletion
// of the key with the next lower create revision (no herd). This is what etcd's Go client
// (client/v3/concurrency: NewMutex(session, "orders")) and `etcdctl lock orders` create, so
// either excludes the other. Fencing token: the own key's create revision.
//
// The read-write lock is etcd's recipes.RWMutex (client/v3/experimental/recipes/rwmutex.go) on
// the same range: a reader puts "<range>read/<unix ns>", a writer "<range>write/<unix ns>"
// (put only if absent, with the lease, empty value). A reader waits while a write key older
// than its own exists (the newest one: "<range>write" by mod revision, descending, limit 1,
// max_mod_revision = own - 1); a writer while any older key of the range does. Readers
// share; a writer waits for everyone before it, and everyone after it waits for the writer.
// Fencing token of both: the own key's create revision.
//
// The semaphore (dlock's own layout: etcd has no semaphore recipe) puts
// "<range>semaphore/<unix ns>" with the lease and the number of permits as its value (decimal);
// the N oldest keys of "<range>semaphore/" by create revision hold, and every acquisition
// names the same N (a different one is refused: the count is stored, not a convention).
// Waiters read the keys ahead of their own once, then watch "<range>semaphore/" for
// deletions and count them.
//
// Names are data: a name is refused (errc::invalid_argument) when empty, over 4096 bytes, or
// when it has a '/' (the range of "a" would contain the keys of lock "a/b": two locks would
// queue as one) or a control character. Hierarchy goes into the URL's prefix.
#pragma once

#include <dlock/lock_options.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail::etcd {

/// The kinds etcd offers: reentrant (the default lock) and fair, both the Mutex above (fair:
/// FIFO by create revision, which the Mutex is anyway), and the two sides of the RWMutex.
constexpr bool offered(lock_kind kind) noexcept {
    return kind == lock_kind::reentrant || kind == lock_kind::fair || kind == lock_kind::read ||
           kind == lock_kind::write || kind == lock_kind::semaphore;
}

/// A side of the RWMutex (read or write), not the Mutex.
constexpr bool rw_side(lock_kind kind) noexcept {
    return kind == lock_kind::read || kind == lock_kind::write;
}

/// Whether `name` can name a lock (rule above); `why` says what is wrong.
bool valid_name(std::string_view name, std::string* why);

/// The key range of lock `name` under the URL prefix `prefix` ("" or "/p"): "name/" or
/// "/p/name/".
std::string lock_range(std::string_view prefix, std::string_view name);

/// "<range><lease id in lowercase hex, no leading zeros>" (Go's "%s%x").
std::string own_key(std::string_view range, std::int64_t lease);

/// An RWMutex contender's key: "<range>read/<unix ns>" or "<range>write/<unix ns>".
std::string rw_key(std::string_view range, lock_kind side, std::int64_t unix_ns);

/// A semaphore contender's key: "<range>semaphore/<unix ns>".
std::string semaphore_key(std::string_view range, std::int64_t unix_ns);

/// The keys of the semaphore of `range`: "<range>semaphore/".
std::string semaphore_range(std::string_view range);

/// What an RWMutex contender of `side` waits behind: the older keys under "<range>write"
/// (a reader) or under "<range>" (a writer), as the recipe's waitOnLastRev prefixes them.
std::string rw_blockers(std::string_view range, lock_kind side);

/// The kind of a contender's key in `range`: write for "<range>write/<digits>", read for
/// "<range>read/<digits>", semaphore for "<range>semaphore/<digits>", reentrant for the
/// Mutex's "<range><lease hex>", nullopt otherwise.
std::optional<lock_kind> kind_of_key(std::string_view range, std::string_view key);

/// The key of `name`'s run-once-per-period slot (dlock/once.hpp, docs/design/once.md):
/// "dlock-once:<name>" (with a URL prefix /p: "/p/dlock-once:<name>"). It has no '/' after the
/// prefix, so it lies in no lock's range and lock_of_key() never reads it as a contender.
std::string once_key(std::string_view prefix, std::string_view name);

/// The lease id as etcd's tools print it: lowercase hex, no leading zeros.
std::string lease_hex(std::int64_t lease);

/// etcd's prefix range end: `prefix` with its last byte below 0xff incremented and the bytes
/// after it dropped; "\0" (the whole keyspace from `prefix` on) when every byte is 0xff or the
/// prefix is empty.
std::string range_end(std::string_view prefix);

/// The lock a key under `prefix` belongs to: the part between "<prefix>/" and the last '/',
/// when that is a valid name and what follows is a lease id in hex (a Mutex contender), or the
/// part before "/read/<digits>", "/write/<digits>" (an RWMutex contender) or
/// "/semaphore/<digits>" (a semaphore contender); nullopt
/// otherwise (not a contender of a dlock-readable lock).
std::optional<std::string> lock_of_key(std::string_view prefix, std::string_view key);

} // namespace dlock::detail::etcd
