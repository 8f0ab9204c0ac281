// make_redis_lock_object(): the lock object of a thread-bound lock on Redis (lock_object.cpp).
#pragma once

#include "core/lock_object.hpp"
#include "redis/locks/protocol.hpp"

#include <dlock/lock_options.hpp>

#include <memory>
#include <string>

namespace dlock::detail {

class redis_client;

/// Errors: dlock::error(errc::invalid_argument) for a name no Redis key can have (empty, over
/// 4096 bytes, an empty hash tag), errc::unsupported for a kind Redis does not offer.
/// The queries of one lock on its node (the lock object's, and the backend's by name). A Redis
/// error reply becomes `ec`. Blocking; errc::invalid_argument on the I/O thread.
resp3::value query_lock(redis_client& c, const lock_keys& k, const command& cmd,
                        std::error_code& ec);
bool force_unlock_lock(redis_client& c, const lock_protocol& p, const lock_keys& k,
                       std::error_code& ec);
bool lock_is_held(redis_client& c, const lock_protocol& p, const lock_keys& k, std::error_code& ec);
std::optional<std::chrono::milliseconds> lock_remaining_lease(redis_client& c, const lock_keys& k,
                                                              std::error_code& ec);

std::shared_ptr<lock_object> make_redis_lock_object(std::shared_ptr<redis_client> c,
                                                    std::string name, lock_kind kind);

} // namespace dlock::detail
