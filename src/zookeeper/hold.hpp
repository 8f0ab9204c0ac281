// zookeeper/hold.hpp: one held ZooKeeper lock (a detail::hold), and the guaranteed delete.
//
// Loss (loss_signal: valid_until in the past, stop requested, callbacks) on: the session
// expired (Expired event), the session's deadline passed without an answer from the server
// (session.hpp), or the own node was deleted by someone else (an exists watch on it, armed
// once the hold is watch_delay old and re-armed after other events). valid_until follows the
// session's. The fencing token is the node's czxid (a zxid: epoch << 32 | counter, increasing
// across elections and never reused, unlike the sequence number); a read hold has none (readers
// share the lock).
//
// Release: delete the node, retried after each connection loss until the server answers
// (ZOK, or ZNONODE after a delete whose outcome was unknown), or the session ends, which
// deletes the node too. A node found deleted by someone else is not_owner (a loss).
// extend() is a no-op on a live hold: the session renews itself.
#pragma once

#include "core/self_renewing_hold.hpp"
#include "zookeeper/session.hpp"

#include <dlock/metrics.hpp>

#include <asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::detail::zk {

class zk_backend;

/// Deletes `path` on `s`, retrying after connection losses until the server answers or the
/// session ends; `done(rc)` gets ZOK, ZNONODE (after an unknown first outcome: ZOK), another
/// server answer, or ZSESSIONEXPIRED (the node went with the session).
void guaranteed_delete(const std::shared_ptr<session>& s, std::string path,
                       std::function<void(int rc)> done);

class zk_hold final : public self_renewing_hold, public session_observer {
public:
    zk_hold(zk_backend& backend, std::shared_ptr<session> s, std::string name, std::string path,
            std::int64_t czxid, bool shared);

    /// Joins the session's observers and, once the hold is `watch_delay` old, arms the
    /// own-node watch (I/O thread, once).
    void start();

    /// How long a hold lives before it watches its own node. The watch tells a holder that
    /// someone else deleted its node (`dlock unlock --force`, an operator) within a round trip;
    /// arming it later spares most holds, which are shorter, a fourth request per lock pair
    /// (Curator makes three and never watches its own node). A node deleted before the watch
    /// is armed is seen by the arming request itself (ZNONODE). Loss by session expiry or
    /// deadline does not depend on it.
    static constexpr std::chrono::milliseconds watch_delay{25};

    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override;
    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override;
    asio::any_io_executor executor() const override;
    void with_metrics(const std::function<void(client_metrics&)>& f) const override;

    void session_valid_until(std::chrono::steady_clock::time_point t) override;
    void session_ended(session_end why) override;

    const std::string& path() const noexcept { return path_; }
    /// The session whose ephemeral node this is.
    const std::shared_ptr<session>& owner_session() const noexcept { return session_; }
    bool shared() const noexcept { return shared_; }

private:
    /// The backend while it lives, from the I/O thread (its destruction drains the loop first,
    /// so it cannot go away under a running handler).
    zk_backend* live() const noexcept { return backend_.expired() ? nullptr : raw_; }
    void arm_watch();
    void lose(loss_cause cause);
    void finish_release(std::error_code ec);
    void start_release(std::function<void(std::error_code)> done);
    /// I/O thread, once the hold has ended: its own-node timer goes (a lease may outlive its
    /// client, and the timer must not outlive the backend's io_context).
    void drop_timers() noexcept;

    /// The backend, for calls from the user's threads (lock(): never the last reference on
    /// the I/O thread, where live() is used instead).
    std::weak_ptr<zk_backend> backend_;
    zk_backend* raw_;
    asio::any_io_executor ex_;
    std::optional<asio::steady_timer> watch_timer_; ///< dropped when the hold ends
    std::shared_ptr<session> session_;
    std::string name_;
    std::string path_;
    std::int64_t czxid_;
    bool shared_;
    std::chrono::steady_clock::time_point acquired_at_;
    // I/O thread only:
    bool releasing_ = false;
    std::vector<std::function<void(std::error_code)>> release_waiters_{};
};

} // namespace dlock::detail::zk
