// hand_out.hpp: what a hold takes from acquire_options in the core rather than in its backend
// (warn_margin and max_hold: docs/design/warning.md), for every path that hands a hold out
// (client::acquire and its async twin, the async acquire_all, Redlock's acquire_with_votes).
#pragma once

#include "core/hold.hpp"

#include <dlock/lock_options.hpp>

namespace dlock::detail {

/// False for a negative warn_margin or a max_hold under 1 ms (errc::invalid_argument).
bool valid_hold_options(const acquire_options& o) noexcept;
/// Before `h` is handed out: its warning margin, and its max_hold from now (the grant).
void hand_out(hold& h, const acquire_options& o);

} // namespace dlock::detail
