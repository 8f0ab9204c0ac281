// dlock/once.hpp: run something at most once per period across machines ("run once per
// period", issue 23; what ShedLock's users have asked for since 2017), on the server's clock.
//
// Time is cut into slots of `period`: slot k is [k·period, (k+1)·period) in milliseconds since
// the Unix epoch, on the *server's* clock, so a machine whose clock is skewed cannot claim a
// slot twice or a slot of its own. The first claim of a slot wins it; the claim lasts until
// the slot's end (not renewed, nothing to release), so a run that ends early still keeps the
// slot taken: ShedLock's lockAtLeastFor without its guesswork. A run that failed may give its
// slot back (release_period) so that another machine may run in the same slot.
//
//   if (auto s = dlock::claim_period(c, "nightly-report", 24h)) run();   // else: ran elsewhere
//
// Backends: Redis (standalone, Sentinel, Cluster: a key with the slot and a token, PX to the
// slot's end, the slot counted from TIME inside the script), ZooKeeper (a node per name under
// /dlock-once, the slot counted from the mtime of a write) and PostgreSQL (a row per name in
// dlock_once, the slot counted from clock_timestamp() inside the statement). etcd has no clock
// to read: there a slot is a key on a lease of its own of the period less 1 s, opened by the
// claim that finds none, so two winning claims are at least that far apart on etcd's clock
// (not aligned to the epoch; the index is the key's create revision; the period must be at
// least 3 s, else errc::invalid_argument). Redlock answers errc::unsupported
// (docs/design/once.md).
#pragma once

#include <dlock/error.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

class client;

/// A slot this process claimed (claim_period()).
struct period_slot {
    std::int64_t index = 0;             ///< the slot's number: its start is index · period
    std::chrono::milliseconds period{}; ///< as claimed
    /// What was left of the slot when it was claimed, on the server's clock.
    std::chrono::milliseconds left{};
    std::string token; ///< this claim's random id (release_period() checks it)
};

///@{
/// Claims the current slot of `period` for `name`. Returns the slot, or nullopt when the slot
/// was claimed already (by anyone, this process included). Errors: errc::invalid_argument for
/// an empty name, a name over 4096 bytes or a period under 1 ms or over 366 days;
/// errc::unsupported on a backend without it; transport and server errors as acquire().
std::optional<period_slot> claim_period(client& c, std::string_view name,
                                        std::chrono::milliseconds period);
std::optional<period_slot> claim_period(client& c, std::string_view name,
                                        std::chrono::milliseconds period, std::error_code& ec);
///@}

///@{
/// Gives the claimed slot `s` of `name` back, so that another claim of the same slot may win
/// (a failed run to be tried again elsewhere). True when it was this claim's and is gone;
/// false when the slot ended or someone else holds it now. Errors as claim_period().
bool release_period(client& c, std::string_view name, const period_slot& s);
bool release_period(client& c, std::string_view name, const period_slot& s, std::error_code& ec);
///@}

} // namespace dlock
