// detail::redlock_backend: Redlock over independent Redis masters behind the one backend seam
// (core/lock_backend.hpp), over redlock_impl (the rounds, holds and watchdog of this folder).
// It offers lock_kind::simple (the simple-lock layout on every master); its lock objects are
// the default, locally counted and not reentrant. The queries ask every master and decide by
// the quorum (queries.cpp; the rule is at the top of dlock/redlock.hpp). What only Redlock has
// (votes, masters, quorum) is reached through detail::access::redlock(client) (src/redlock.cpp).
#pragma once

#include "core/lock_backend.hpp"

#include <dlock/redlock.hpp>

#include <memory>

namespace dlock::detail {

class redlock_impl;

class redlock_backend final : public lock_backend {
public:
    /// Starts the I/O thread (connections are made lazily). Errors: dlock::error
    /// (errc::configuration_error) for options redlock_impl refuses.
    explicit redlock_backend(redlock_options opts);
    ~redlock_backend() override;

    redlock_impl& impl() const noexcept { return *r_; }

    std::string_view backend_name() const noexcept override { return "redlock"; }
    const std::string& id() const noexcept override { return id_; }
    asio::any_io_executor executor() const override;
    bool on_io_thread() const noexcept override;
    /// Each master's last failure ("<address>: <reason>"), joined with "; ".
    std::string last_error_detail() const override;
    metrics_snapshot metrics() const override;
    bool supports(lock_kind kind) const noexcept override { return kind == lock_kind::simple; }
    std::error_code check_name(std::string_view name, lock_kind kind) const override;

    std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                  std::error_code& ec) override;
    void async_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;

    bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) override;
    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view name, lock_kind kind,
                                                             std::error_code& ec) override;
    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) override;
    void shutdown() noexcept override;

    // ---- Redlock only (dlock/redlock.hpp) ------------------------------------------------
    /// The rounds of one acquisition; `done` runs once on the I/O thread (errors there too).
    void start_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, redlock_acquisition)> done);
    /// Blocking form of start_acquire (errc::invalid_argument on the I/O thread).
    redlock_acquisition acquire_with_votes(std::string_view name, const acquire_options& opts,
                                           std::error_code& ec);

private:
    std::shared_ptr<redlock_impl> r_;
    std::string id_;
};

} // namespace dlock::detail
