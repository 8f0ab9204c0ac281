// Release, detached release and local hand-over, for every kind (the kind's protocol builds
// the commands and reads the replies; one reader per kind, so every path agrees on what a
// reply means).
#pragma once

#include "redis/client.hpp"
#include "redis/hold.hpp"

#include <functional>
#include <memory>

namespace dlock::detail {

using release_done = std::function<void(release_outcome)>;

/// Sends `fill`'s command to `n` without waiting; `done` (may be empty) gets the raw outcome on
/// the I/O thread. `keep` holds whatever the command's views point into.
void submit_detached(redis_client& c, node& n, std::shared_ptr<const void> keep,
                     const std::function<void(command&)>& fill,
                     std::function<void(std::error_code, resp3::value&&)> done);

/// Releases one hold count of `h`, blocking (not on the I/O thread). When the release is
/// final and an acquisition of this client waits, the release is decided on the I/O thread
/// and may hand the lock over (client_options::handover). Marks nothing on `h`.
release_outcome release_blocking(redis_client& c, const std::shared_ptr<redis_hold>& h);
/// The same without waiting; `done` (may be empty) runs on the I/O thread.
void release_async(redis_client& c, const std::shared_ptr<redis_hold>& h, release_done done);

} // namespace dlock::detail
