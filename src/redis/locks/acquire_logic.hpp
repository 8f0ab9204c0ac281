// Sans-I/O decisions of the acquire operation: what an attempt's replies mean, and how long a
// waiter may sleep. Pure functions, unit-tested without sockets (tests/unit/acquire_logic_test).
#pragma once

#include <dlock/client.hpp>
#include <dlock/resp3.hpp>

#include <chrono>
#include <cstdint>
#include <system_error>

namespace dlock::detail {

struct attempt_outcome {
    enum class kind { acquired, reentered, held, error } what = kind::error;
    std::uint64_t token = 0;  ///< acquired (reentrant): the fencing token
    std::int64_t count = 1;   ///< reentered: the new hold count
    std::int64_t ttl_ms = -1; ///< held: PTTL of the holder (-1 none/unknown, -2 vanished)
    std::error_code ec;       ///< error: transport, server error reply, or protocol_error
};

/// Interprets one attempt. Reentrant: the reply of lock_acquire.lua ({1,token}, {2,count},
/// {0,pttl}). Simple: the reply of `SET NX PX` (+OK or null) and, when one was asked, of the
/// `PTTL` that followed a refusal (a null `r1` means unknown: -1).
/// Anything else is errc::protocol_error: an unexpected reply is never taken for success.
attempt_outcome interpret_attempt(lock_kind kind, std::error_code ec0, const resp3::value& r0,
                                  std::error_code ec1, const resp3::value& r1);

/// When a waiter that was refused should try again if no unlock message arrives: at the
/// holder's expiry (now + ttl) but never after the wait deadline. A negative ttl (no TTL, or
/// unknown) waits for the message or the deadline only.
std::chrono::steady_clock::time_point sleep_until(std::chrono::steady_clock::time_point now,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::int64_t ttl_ms);

} // namespace dlock::detail
