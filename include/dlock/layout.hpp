// dlock/layout.hpp: which Redis keys a lock uses, as the library itself writes them. For tools
// that read or break locks from outside (`dlock status`, `dlock list`, `dlock keys`,
// benchmarks): they ask here instead of spelling key names.
#pragma once

#include <dlock/lock_options.hpp>

#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock {

/// The Redis keys and channels of one lock, as layout_of() gives them.
struct lock_layout {
    /// The kind these keys belong to.
    lock_kind kind{};
    std::string kind_name;   ///< the library's name ("reentrant", "simple", "read", ...)
    std::string key;         ///< N itself
    std::string data_type;   ///< Redis TYPE of N while held ("hash", "string")
    std::string channel;     ///< where releases publish the unlock message
    std::string fencing_key; ///< the fencing counter; empty when the kind has none
    std::string queue_key;   ///< fair lock: the waiter queue (LIST); empty otherwise
    std::string timeout_key; ///< fair lock: the waiters' deadlines (ZSET, epoch ms)
    /// fair lock: each waiter sleeps on channel + ":" + its owner field; empty otherwise
    std::string waiter_channel_prefix;
    /// read-write lock: the marker of a waiting dlock writer (new dlock readers wait while it
    /// exists); empty for other kinds
    std::string writer_intent_key;
};

/// The layout of the lock `name` of `kind`. Errors: errc::invalid_argument for a name no lock
/// may have (empty, over 4096 bytes, or keys that would fall into different cluster slots).
///@{
lock_layout layout_of(std::string_view name, lock_kind kind);
lock_layout layout_of(std::string_view name, lock_kind kind, std::error_code& ec);
///@}

/// Every lock kind, in the order of lock_kind.
std::vector<lock_kind> lock_kinds();

} // namespace dlock
