// detail::redis_backend: Redis (standalone, Sentinel, Cluster; TCP, TLS, Unix sockets) behind
// the one backend seam (core/lock_backend.hpp). It owns the redis_client (I/O thread, router,
// renewal, hold registry) and composes the acquisition front-end (redis/acquire.hpp) for every
// facade; its lock objects count re-entries on the server (redis/lock_object.cpp). What only
// Redis has (raw commands, the masters of a Cluster) is here too, reached through
// detail::access::redis(client) and errc::unsupported on the other backends.
#pragma once

#include "core/lock_backend.hpp"

#include <dlock/resp3.hpp>

#include <memory>
#include <span>

namespace dlock::detail {

class redis_client;
class request;

class redis_backend final : public lock_backend {
public:
    /// Starts the I/O thread (connections are made lazily).
    explicit redis_backend(client_options opts);
    ~redis_backend() override;

    const std::shared_ptr<redis_client>& impl() const noexcept { return c_; }

    std::string_view backend_name() const noexcept override { return "redis"; }
    const client_options& options() const noexcept override;
    const std::string& id() const noexcept override;
    asio::any_io_executor executor() const override;
    bool on_io_thread() const noexcept override;
    std::string last_error_detail() const override;
    metrics_snapshot metrics() const override;
    bool supports(lock_kind kind) const noexcept override;
    bool reentrant(lock_kind kind) const noexcept override;
    std::error_code check_name(std::string_view name, lock_kind kind) const override;
    std::shared_ptr<lock_object> make_lock_object(std::shared_ptr<lock_backend> self,
                                                  std::string name, lock_kind kind) override;

    std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                  std::error_code& ec) override;
    void async_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;

    bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) override;
    bool rw_is_locked(std::string_view name, std::error_code& ec) override;
    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view name, lock_kind kind,
                                                             std::error_code& ec) override;
    /// Every Redis kind shares the key N: the kind is read from what N holds (redis/inspect.cpp),
    /// so `kind` only has to be a Redis kind.
    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) override;
    std::optional<period_slot> claim_period(std::string_view name, std::chrono::milliseconds period,
                                            std::error_code& ec) override;
    bool release_period(std::string_view name, const period_slot& slot,
                        std::error_code& ec) override;
    /// Leader election (redis/election.cpp; the layout: redis/locks/election/protocol.hpp).
    std::shared_ptr<hold> campaign(std::string_view name, std::string value,
                                   const campaign_options& opts, std::error_code& ec) override;
    void async_campaign(std::string name, std::string value, const campaign_options& opts,
                        std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;
    void proclaim(hold& leader, std::string value, std::error_code& ec) override;
    std::optional<leader_info> leader(std::string_view name, std::error_code& ec) override;
    /// redis/observe.cpp: the election's channel, and one read per change or lease.
    std::shared_ptr<observer> observe(std::string_view name, observe_fn cb,
                                      std::error_code& ec) override;
    void shutdown() noexcept override;

    // ---- Redis only (dlock/redis.hpp: command, masters, command_on_master, async_command) -
    resp3::value command(std::span<const std::string_view> args, std::error_code& ec);
    std::size_t masters() const;
    resp3::value command_on_master(std::size_t i, std::span<const std::string_view> args,
                                   std::error_code& ec);
    void submit(request& r);

private:
    std::shared_ptr<redis_client> c_;
};

/// What `dlock status NAME` shows on Redis, read from the keys of the lock's layout (Redisson's
/// and redis-py's too): redis/inspect.cpp. Not atomic (a few commands): a lock that changes
/// meanwhile may show a mix, never a wrong kind. Errors: transport, or an error reply.
lock_status inspect_redis(redis_backend& b, std::string_view name, std::error_code& ec);
/// The locks among the keys matching `pattern` (SCAN MATCH syntax; empty = all) on every master.
std::vector<lock_status> list_redis(redis_backend& b, std::string_view pattern,
                                    std::error_code& ec);

} // namespace dlock::detail
