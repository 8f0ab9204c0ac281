// The one table of lock kinds (kinds.cpp): each kind's name (CLI, status, man page), its
// metrics label and slot, and the backends that offer it (for messages). Facades, metrics and
// the CLI read kinds from here, never from the order of the lock_kind enumerators.
#pragma once

#include <dlock/lock_options.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::detail {

struct kind_info {
    lock_kind kind;
    std::string_view name;          ///< "lock", "simple", ... (the CLI's --kind)
    std::string_view metrics_label; ///< the `kind` label of the metrics ("reentrant", ...)
    std::string_view offered_by;    ///< "redis, zookeeper, postgresql" (for messages)
};

/// Every kind; a kind's metrics slot is its index here.
const kind_info* kinds_begin() noexcept;
const kind_info* kinds_end() noexcept;
/// The number of kinds, and the metrics slot of kinds a backend registers itself (custom).
inline constexpr std::size_t kind_count = 9;
inline constexpr std::size_t custom_kind_slot = kind_count;
/// The row of `kind` (every lock_kind has one).
const kind_info& info_of(lock_kind kind) noexcept;
/// The metrics slot of `kind`.
std::size_t metrics_slot(lock_kind kind) noexcept;
/// "dlock: the redis backend does not offer the 'semaphore' kind (offered by: zookeeper)".
std::string unsupported_kind_text(std::string_view backend, lock_kind kind);

} // namespace dlock::detail
