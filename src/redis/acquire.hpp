// The one acquisition front-end, for dlock::mutex and dlock::lease alike:
//   prepare()          validates the options and builds the request (keys from the kind's
//                      protocol, the node from the router);
//   acquire_blocking() the caller's first attempt on the sync lane, then (refused or lane busy)
//                      the acquire operation on the I/O thread, waited for on a flag;
//   acquire_async()    the acquire operation only;
//   make_hold()        the hold of a successful acquisition, registered with the watchdog.
// The acquire operation is a thin Asio shell around core::wait_fsm (acquire_op.cpp).
#pragma once

#include "redis/client.hpp"
#include "redis/hold.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dlock::detail {

struct acquire_request {
    const lock_protocol* protocol = nullptr;
    node* where = nullptr;
    lock_keys keys;
    std::string owner;
    std::optional<std::chrono::milliseconds> wait; ///< nullopt: forever
    std::chrono::milliseconds lease{};
    bool watchdog = true;              ///< no explicit lease: renewed by the watchdog
    bool fresh_owner = true;           ///< no earlier hold by this owner (best-effort undo is safe)
    std::optional<retry_policy> retry; ///< poll instead of subscribing
    /// A value the grant stores (a campaign's: lock_protocol::payload_attempt); nullopt for a lock.
    std::optional<std::string> payload;
    /// The caller already made the first attempt (on the sync lane) and was refused with this
    /// PTTL (-1: unknown): the operation starts by subscribing instead of trying again.
    std::optional<std::int64_t> refused_ttl;
    /// When that first attempt was sent (a subscription confirmed before it covers it).
    std::chrono::steady_clock::time_point refused_sent_at{};
    /// When prepare() ran: the start of the wait the metrics measure.
    std::chrono::steady_clock::time_point started_at{};
};

struct acquire_result {
    bool acquired = false;
    bool reentered = false;  ///< held by this owner already; count incremented
    std::int64_t count = 1;  ///< hold count after this acquisition
    std::uint64_t token = 0; ///< fresh acquisition of a kind with a fencing token
    std::chrono::steady_clock::time_point sent_at; ///< steady time before the winning attempt
};
/// The outcome, with the request it answers (make_hold reads it; no copy is kept elsewhere).
using acquire_done = std::function<void(std::error_code, acquire_result, const acquire_request&)>;

/// Fills `req` for the lock `keys` of kind `p` with `opts` (kind ignored) and `owner`.
/// Errors: errc::invalid_argument for a lease under 1 ms or a bad retry policy.
std::error_code prepare(redis_client& c, const lock_protocol& p, lock_keys keys,
                        const acquire_options& opts, std::string owner, acquire_request& req);
/// The owner of a new acquisition: for a reentrant kind "<client-id>:<owner-id>" of the
/// calling thread (thread_bound) or of a new handle; otherwise a fresh 128-bit random token.
std::string new_owner(const redis_client& c, const lock_protocol& p, bool thread_bound);
/// Appends "<client_id>:<n>", an owner, to `out`; at most client_id.size() + 1 +
/// owner_digits_max characters.
void append_owner(std::string& out, const std::string& client_id, std::uint64_t n);
inline constexpr std::size_t owner_digits_max = 20;
/// The owner of the calling thread's thread-bound holds on `c`: "<client-id>:<thread owner id>"
/// (one allocation: it is built on every lock() and unlock()).
std::string thread_owner(const redis_client& c);

/// Blocking acquisition (not on the I/O thread). Not acquired within the wait: res.acquired
/// is false and `ec` clear. May shorten `req.wait` and set `req.refused_*` (what make_hold
/// reads stays as it was).
acquire_result acquire_blocking(redis_client& c, acquire_request& req, std::error_code& ec);
/// Starts the acquire operation; `done` runs on the I/O thread.
void acquire_async(redis_client& c, acquire_request req, acquire_done done);

/// The hold of a successful acquisition, registered with the renewal service.
std::shared_ptr<redis_hold> make_hold(redis_client& c, const acquire_request& req,
                                      const acquire_result& r);
/// The same, taking the keys and owner out of `req` instead of copying them (a blocking
/// acquisition, whose request ends here: four fewer allocations per acquisition).
std::shared_ptr<redis_hold> make_hold(redis_client& c, acquire_request&& req,
                                      const acquire_result& r);

/// Releases, best-effort and without waiting, what an ambiguous attempt may have given `req`
/// (fail closed: its caller is told it does not hold the lock). Only for a fresh owner.
void undo(redis_client& c, const acquire_request& req);
/// Withdraws, best-effort and without waiting, what the waiting attempts of `req` announced
/// (lock_protocol::abandon), when it gave up without the lock.
void abandon(redis_client& c, const acquire_request& req);

} // namespace dlock::detail
