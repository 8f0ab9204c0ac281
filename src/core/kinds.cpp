// The one table of lock kinds (kinds.hpp) and the public lookups of dlock/lock_options.hpp.
#include "core/kinds.hpp"

#include <array>

namespace dlock {
namespace detail {
namespace {

// A new kind: one row here, its enumerator, and its implementation in each backend that
// offers it (tests/unit/core/core_kinds_test.cpp checks the offered_by column against the
// backends).
constexpr std::array<kind_info, kind_count> table{{
    {lock_kind::reentrant, "lock", "reentrant", "redis, zookeeper, postgresql, etcd"},
    {lock_kind::simple, "simple", "simple", "redis, redlock, postgresql"},
    {lock_kind::fair, "fair", "fair", "redis, zookeeper, postgresql, etcd"},
    {lock_kind::read, "read", "read", "redis, zookeeper, postgresql, etcd"},
    {lock_kind::write, "write", "write", "redis, zookeeper, postgresql, etcd"},
    {lock_kind::shedlock, "shedlock", "shedlock", "postgresql"},
    {lock_kind::lease, "lease", "lease", "postgresql"},
    {lock_kind::versioned, "versioned", "versioned", "postgresql"},
    {lock_kind::semaphore, "semaphore", "semaphore", "redis, zookeeper, postgresql, etcd"},
}};

} // namespace

const kind_info* kinds_begin() noexcept {
    return table.data();
}
const kind_info* kinds_end() noexcept {
    return table.data() + table.size();
}

std::size_t metrics_slot(lock_kind kind) noexcept {
    for (std::size_t i = 0; i < table.size(); ++i)
        if (table[i].kind == kind) return i;
    return custom_kind_slot;
}

const kind_info& info_of(lock_kind kind) noexcept {
    const auto i = metrics_slot(kind);
    return table[i < table.size() ? i : 0];
}

std::string unsupported_kind_text(std::string_view backend, lock_kind kind) {
    return "dlock: the " + std::string(backend) + " backend does not offer the '" +
           std::string(info_of(kind).name) +
           "' kind (offered by: " + std::string(info_of(kind).offered_by) + ")";
}

} // namespace detail

std::string_view kind_name(lock_kind kind) noexcept {
    return detail::info_of(kind).name;
}

std::optional<lock_kind> kind_from_name(std::string_view name) noexcept {
    for (const auto& k : detail::table)
        if (k.name == name) return k.kind;
    return std::nullopt;
}

std::vector<lock_kind> all_kinds() {
    std::vector<lock_kind> out;
    for (const auto& k : detail::table)
        out.push_back(k.kind);
    return out;
}

std::string_view backends_offering(lock_kind kind) noexcept {
    return detail::info_of(kind).offered_by;
}

} // namespace dlock
