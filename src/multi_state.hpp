// detail::multi_state: what a dlock::multi_lease shares with its members' loss callbacks
// (multi_lock.cpp makes it, multi_lease.cpp serves the handle).
#pragma once

#include "core/loss_signal.hpp"

#include <dlock/lease.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

namespace dlock::detail {

/// What a multi_lease shares with its members' loss callbacks.
class multi_state final : public loss_signal {
public:
    std::vector<lease> members;
    /// A member was lost: the multi-lock is lost unless it was released already.
    void member_lost() {
        if (!released()) mark_lost();
    }
    void end_released() noexcept { mark_released(); }
};

/// The earliest valid_until of `held` (time_point::max() for none).
inline std::chrono::steady_clock::time_point earliest(const std::vector<lease>& held) {
    auto t = std::chrono::steady_clock::time_point::max();
    for (const auto& l : held)
        t = std::min(t, l.valid_until());
    return t;
}

} // namespace dlock::detail
