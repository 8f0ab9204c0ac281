// zookeeper/backend.hpp: detail::lock_backend over ZooKeeper, in Apache Curator's layout.
//
// zk_backend owns one I/O thread (a core::runtime) and at most one live session
// (session.hpp); an expired session is replaced by a new one on the next request. Each
// acquisition is an `acquisition` (acquire.cpp) run on the I/O thread: create a protected
// EPHEMERAL_SEQUENTIAL child `_c_<uuid>-<infix>` under the lock's directory (CONTAINER
// parents created on demand), list the children, hold when first (names.hpp decides), else
// getData+watch the predecessor and list again when it fires. A granted acquisition becomes a
// zk_hold (hold.cpp): fencing token = the node's czxid, valid_until from the session, loss on
// session expiry / session deadline / own node deleted, release = delete retried until the
// server confirms it (or the session is gone, which deletes the node too).
#pragma once

#include "core/lock_backend.hpp"
#include "core/metrics.hpp"
#include "core/runtime.hpp"
#include "zookeeper/names.hpp"
#include "zookeeper/session.hpp"
#include "zookeeper/url.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail {
/// The ZooKeeper backend of a zk:// URL (the contract of make_backend(), backends.hpp).
std::shared_ptr<lock_backend> make_zookeeper_backend(std::string_view url, std::error_code& ec,
                                                     std::string* why, const log_options& log = {});
} // namespace dlock::detail

namespace dlock::detail::zk {

class acquisition;

/// The node infix Curator uses for `kind`, or empty when ZooKeeper does not offer the kind.
std::string_view infix_of(lock_kind kind) noexcept;

class zk_backend final : public lock_backend, public std::enable_shared_from_this<zk_backend> {
public:
    explicit zk_backend(zk_url url, const log_options& log = {});
    ~zk_backend() override;

    std::string_view backend_name() const noexcept override { return "zookeeper"; }
    const std::string& id() const noexcept override { return id_; }
    asio::any_io_executor executor() const override { return rt_.executor(); }
    bool on_io_thread() const noexcept override { return rt_.on_io_thread(); }
    std::string last_error_detail() const override;
    metrics_snapshot metrics() const override;
    bool supports(lock_kind kind) const noexcept override { return !infix_of(kind).empty(); }
    /// A semaphore lease is not re-entered (Curator's leases are not either).
    bool reentrant(lock_kind kind) const noexcept override { return kind != lock_kind::semaphore; }

    std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                  std::error_code& ec) override;
    void async_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;

    /// Downgrade (Curator >= 5.5, CURATOR-621): a plain EPHEMERAL `_c_<uuid>-__READ__<seq>`
    /// node at the write node's sequence, on the writer's session, so that no writer queued
    /// behind the write node gets in between (names.hpp sorts it right after its writer).
    std::shared_ptr<hold> acquire_read_under(const hold& write, std::error_code& ec) override;
    bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) override;
    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view name, lock_kind kind,
                                                             std::error_code& ec) override;
    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) override;

    // Leader election in Curator's LeaderLatch layout (election.cpp, observe.cpp).
    std::shared_ptr<hold> campaign(std::string_view name, std::string value,
                                   const campaign_options& opts, std::error_code& ec) override;
    void async_campaign(std::string name, std::string value, const campaign_options& opts,
                        std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;
    void proclaim(hold& leader, std::string value, std::error_code& ec) override;
    std::optional<leader_info> leader(std::string_view name, std::error_code& ec) override;
    std::shared_ptr<observer> observe(std::string_view name, observe_fn cb,
                                      std::error_code& ec) override;

    // Run once per period (once.cpp): the slot from the mtime of a write.
    std::optional<period_slot> claim_period(std::string_view name, std::chrono::milliseconds period,
                                            std::error_code& ec) override;
    bool release_period(std::string_view name, const period_slot& slot,
                        std::error_code& ec) override;

    void shutdown() noexcept override;

    // For the acquisitions and holds (I/O thread).
    const zk_url& url() const noexcept { return url_; }
    const std::string& node_data() const noexcept { return node_data_; }
    client_metrics& counters() noexcept { return metrics_; }
    bool shut() const noexcept { return shut_.load(std::memory_order_acquire); }
    /// The live session, connected and with its chroot checked, or an error (unavailable
    /// after connect_timeout, configuration_error for a missing chroot).
    void with_session(std::function<void(std::error_code, std::shared_ptr<session>)> fn);
    void set_error(std::string why);
    /// Keeps `a` alive until it finishes (an acquisition without a deadline is referenced by
    /// nothing else while it waits for a watch); untrack() when it finished.
    void track(std::shared_ptr<acquisition> a);
    void untrack(const acquisition* a);
    /// A waiter's predecessor watch fired (counted for the no-herd test).
    void note_wake() noexcept { wakes_.fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t wakes() const noexcept { return wakes_.load(std::memory_order_relaxed); }
    /// A waiter's watch is set on the server and it waits (counted so that tests can tell a
    /// waiting acquisition from one still on its way there).
    void note_wait() noexcept { waits_.fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t waits() const noexcept { return waits_.load(std::memory_order_relaxed); }

    /// dlock::zookeeper::fenced_set (dlock/zookeeper.hpp): writes `data` to the znode `node`
    /// (created when missing) in one multi with a check that `lock_node` still exists. Blocking
    /// (not on the I/O thread). Errors: not_owner when the lock node is gone (nothing written),
    /// invalid_argument for a bad node path or one inside the lock's directory,
    /// configuration_error when the node's parent is missing, ambiguous when the answer was
    /// lost, unavailable, server_error.
    std::error_code fenced_set(const std::string& lock_node, std::string_view node,
                               std::string_view data);

    /// The current session if there is one (any thread; for tests: its id and timeout).
    std::shared_ptr<session> current_session() const;

private:
    /// Runs `start` on the I/O thread and waits (up to connect_timeout x 2) for its result
    /// (runtime::call); `on_timeout` after that, or at once on the I/O thread.
    template <class T>
    T call(std::function<void(std::function<void(T)>)> start, T on_timeout);
    /// A claim (release_slot < 0) or a release of `release_slot`; blocking (once.cpp).
    std::pair<std::optional<period_slot>, bool> run_once(std::string_view name,
                                                         std::chrono::milliseconds period,
                                                         std::int64_t release_slot,
                                                         std::string token, std::error_code& ec);
    /// A new session's checks, once connected (I/O thread): the chroot exists, and its
    /// server_lag (server_lag.hpp; a read of /zookeeper/config when the URL gives none) fits
    /// the negotiated timeout. `done` gets {} or the error, with set_error's line.
    void check_session(const std::shared_ptr<session>& s,
                       std::function<void(std::error_code)> done);
    void snapshot_dir(const std::string& dir, bool stats,
                      std::function<void(std::error_code, lock_status)> done);
    /// A semaphore's directory (semaphore.hpp): its leases and the queue on its gate.
    void snapshot_semaphore(const std::string& dir,
                            std::function<void(std::error_code, lock_status)> done);

    zk_url url_;
    std::string id_;
    std::string node_data_;
    runtime rt_{1}; // only its I/O thread runs the loop
    std::atomic<bool> shut_{false};
    client_metrics metrics_{};
    mutable std::mutex mu_;
    std::shared_ptr<session> session_{}; // guarded by mu_ (written on the I/O thread)
    bool session_checked_ = false;       // for session_: check_session passed (I/O thread)
    std::string last_error_{};           // guarded by mu_
    std::atomic<std::uint64_t> old_connects_{0};
    std::atomic<std::uint64_t> old_reconnects_{0};
    std::atomic<std::uint64_t> old_requests_{0};
    std::atomic<std::uint64_t> wakes_{0};
    std::atomic<std::uint64_t> waits_{0};
    std::vector<std::shared_ptr<acquisition>> active_{}; // I/O thread
};

} // namespace dlock::detail::zk
