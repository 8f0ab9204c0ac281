// dlock/postgres.hpp: the PostgreSQL backend's page. It declares no call of its own.
//
// A PostgreSQL client is made from a postgresql:// or postgres:// URL (a libpq conninfo URI,
// when this build has libpq); dlock's own settings are URL parameters named dlock_* (dlock_key,
// dlock_fence, dlock_check, dlock_keepalive, dlock_pool, dlock_timeout, dlock_connect_timeout,
// dlock_table, dlock_versioned_table; docs/design/postgres.md). Everything it offers is the
// neutral client's (dlock/client.hpp): lock objects and leases over advisory locks (reentrant,
// simple, fair, read, write) and over rows (lock_kind::shedlock, lock_kind::lease,
// lock_kind::versioned), multi-locks, inspect/list, force_unlock. There is nothing
// PostgreSQL-only to call, so this header only gathers what a PostgreSQL program includes (the
// client and the lease) and says how it fences; the calls of dlock/redis.hpp and
// dlock/zookeeper.hpp are errc::unsupported on a PostgreSQL client.
//
// Fencing (docs/design/fencing.md tells the story of all three backends): lease::token() and
// mutex::fencing_token() are drawn from the sequence dlock_fence (advisory kinds unless
// dlock_fence=off, and lock_kind::lease) or are the row's record version (lock_kind::versioned);
// lock_kind::shedlock has none. Tokens strictly increase per database while the sequence
// survives. dlock offers no fenced-write call here: a resource kept in the same database (or
// anywhere) checks the token itself, in the statement that writes, for example
//
//   UPDATE orders SET state = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// where zero rows updated means a newer holder has written (the write is stale).
//
//   dlock::client c("postgresql://app@db/app?dlock_check=2s");
//   if (auto l = c.acquire("orders:42", {.wait = 5s})) write_with_fence(*l.token());
#pragma once

#include <dlock/client.hpp>
#include <dlock/lease.hpp>
