// dlock/dlock.hpp: everything public in one include.
#pragma once

#include <dlock/client.hpp>
#include <dlock/config.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/log.hpp>
#include <dlock/metrics.hpp>
#include <dlock/multi_lock.hpp>
#include <dlock/mutex.hpp>
#include <dlock/once.hpp>
#include <dlock/postgres.hpp>
#include <dlock/redis.hpp>
#include <dlock/redlock.hpp>
#include <dlock/resp3.hpp>
#include <dlock/rw_mutex.hpp>
#include <dlock/zookeeper.hpp>

/// @namespace dlock
/// Distributed locks on Redis, ZooKeeper, PostgreSQL and etcd: the client, the lock objects and
/// lease handles, their options and errors (README.md: "Using the library"; ARCHITECTURE.md for
/// how they work).

/// @namespace dlock::redis
/// What only a Redis client has: raw commands, masters, fenced_set, key layouts
/// (dlock/redis.hpp).

/// @namespace dlock::zookeeper
/// What only a ZooKeeper client has: its fenced write (dlock/zookeeper.hpp).

/// @namespace dlock::resp3
/// The reply values of dlock's RESP2/RESP3 codec and the codec's limits.
