// The registered lock kinds. A new kind adds one line here (and its folder).
#include "redis/locks/protocol.hpp"

#include <vector>

namespace dlock::detail {

lock_protocol& reentrant_protocol() noexcept;
lock_protocol& simple_protocol() noexcept;
lock_protocol& fair_protocol() noexcept;

struct protocol_registry {
    std::vector<const lock_protocol*> all;
    std::size_t builtin = 0;
    protocol_registry() {
        add(reentrant_protocol()); // lock_kind::reentrant (= index 0, in lock_kind order)
        add(simple_protocol());    // lock_kind::simple
        add(fair_protocol());      // lock_kind::fair
        builtin = all.size();
    }
    std::size_t add(lock_protocol& p) {
        p.index_ = all.size();
        all.push_back(&p);
        return p.index_;
    }
};

namespace {
protocol_registry& the_registry() {
    static protocol_registry r;
    return r;
}
} // namespace

const lock_protocol& protocol_of(lock_kind kind) noexcept {
    // The built-in kinds are registered first, in the order of lock_kind.
    return *the_registry().all[static_cast<std::size_t>(kind)];
}

std::size_t builtin_kinds() noexcept {
    return the_registry().builtin;
}
std::size_t register_protocol(lock_protocol& p) {
    return the_registry().add(p);
}

} // namespace dlock::detail
