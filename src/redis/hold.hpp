// detail::redis_hold: one acquisition (one owner's hold of one lock) on Redis, shared by the
// object that holds it (mutex or lease) and the renewal service. It is the single-node Redis
// implementation of detail::hold, the seam a dlock::lease talks to (core/hold.hpp).
#pragma once

#include "core/drift.hpp"
#include "core/hold.hpp"
#include "core/metrics.hpp"
#include "redis/locks/protocol.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace dlock::detail {

class redis_client;
class node;

class redis_hold final : public hold, public lock_holder {
public:
    std::weak_ptr<redis_client> client;
    /// Where the hold lives. Valid while `client` is (check client.lock() first).
    node* where = nullptr;
    const lock_protocol* protocol = nullptr;
    std::optional<std::uint64_t> token;
    std::chrono::milliseconds lease{};
    bool watchdog = false;
    int count = 0; ///< hold count as last seen (guarded by the holder)
    /// Set while the final release is in flight: the watchdog skips the hold and ignores its
    /// renewal results (a renewal ordered after our own DEL would otherwise report a loss).
    std::atomic<bool> releasing{false};

    /// When the granting attempt was sent (the start of the hold time, metrics).
    std::chrono::steady_clock::time_point acquired_at{};
    /// The last renewal batch of this hold failed with an error reply (not a transport
    /// error): a loss by deadline is then counted as loss_cause::server_error.
    std::atomic<bool> renew_server_error{false};

    /// Ends the hold normally / by loss; also gives back the client's local count once, and
    /// counts the hold's end in the client's metrics (and logs a loss). `cause`: known, or
    /// nullopt when the server said "not yours" (a follow-up EXISTS tells gone from taken).
    void end_released() noexcept;
    void end_lost(std::optional<loss_cause> cause = std::nullopt);
    /// This hold was counted by hold_registry::local_begin (a fresh acquisition); the count is
    /// given back once, when the hold is released, lost or destroyed.
    void counted_locally() noexcept { local_counted_.store(true, std::memory_order_release); }
    void end_local() noexcept;
    void end_local(redis_client* c) noexcept;

    // detail::hold, for a lease handle (hold.cpp). On Redis the name is the key N.
    const std::string& name() const noexcept override { return keys.key; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return token; }
    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override;
    void extend(std::chrono::milliseconds lease_ms, std::error_code& ec) override;
    void extend_async(std::chrono::milliseconds lease_ms,
                      std::function<void(std::error_code)> done) override;
    asio::any_io_executor executor() const override;
    std::chrono::milliseconds lease_length() const noexcept override { return lease; }
    void with_metrics(const std::function<void(client_metrics&)>& f) const override;
    /// The kind's protocol name ("reentrant", "fair", ..., or a registered kind's).
    std::string_view kind_label() const noexcept override;

    redis_hold() = default;
    redis_hold(const redis_hold&) = delete;
    redis_hold& operator=(const redis_hold&) = delete;
    ~redis_hold() override { end_local(); }

private:
    std::atomic<bool> local_counted_{false};
};

} // namespace dlock::detail
