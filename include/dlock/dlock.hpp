// dlock/dlock.hpp: everything public in one include.
#pragma once

#include <dlock/client.hpp>
#include <dlock/config.hpp>
#include <dlock/error.hpp>
#include <dlock/fencing.hpp>
#include <dlock/layout.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/log.hpp>
#include <dlock/metrics.hpp>
#include <dlock/multi_lock.hpp>
#include <dlock/mutex.hpp>
#include <dlock/redlock.hpp>
#include <dlock/resp3.hpp>
#include <dlock/rw_mutex.hpp>
