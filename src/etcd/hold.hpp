// etcd/hold.hpp: one held etcd Mutex (a detail::hold).
//
// Fencing token: the own key's create revision (what `etcdctl lock` exports as ETCD_LOCK_REV;
// etcd's revisions only grow, across leader changes too). valid_until follows the lease's
// (session.hpp). Loss (loss_signal: valid_until in the past, stop requested, callbacks) when:
// - the lease ended: revoked or expired (`gone`: its keys went with it), or no keep-alive
//   answer before valid_until (`deadline`);
// - the own key was deleted (`dlock unlock --force`, `etcdctl del`, a lease revoke seen
//   first here): a watch on it from the revision at which the lock was granted (a Mutex key's
//   watch is kept for the next hold of the same key: own_watches.hpp). When that watch breaks
//   (member gone, compaction) the key is read again and watched anew.
// Release: a Mutex key ("<range><lease id>") is deleted outright, as Go's Mutex.Unlock does: only
// this client puts it, one hold at a time (the client's queue of the name), so no newer
// incarnation can be hit; nothing deleted is not_owner (the hold was lost). An RWMutex or
// semaphore key: a Txn deleting it if its create revision is still ours. Retried every 200 ms
// on transient errors while the lease is valid (after that the key goes with the lease). extend()
// is a no-op on a live hold: the lease keeps itself alive.
#pragma once

#include "core/self_renewing_hold.hpp"
#include "etcd/session.hpp"
#include "etcd/watch.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlock::detail::etcd {

class etcd_backend;

class etcd_hold final : public self_renewing_hold, public lease_observer {
public:
    etcd_hold(etcd_backend& backend, const std::shared_ptr<lease_session>& lease, std::string name,
              std::string range, std::string key, std::int64_t rev, std::uint64_t ticket);

    /// Joins the lease's observers and watches the own key from `watch_from` (I/O thread).
    void start(std::int64_t watch_from);

    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override {
        return static_cast<std::uint64_t>(rev_);
    }
    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override;
    asio::any_io_executor executor() const override;
    void with_metrics(const std::function<void(client_metrics&)>& f) const override;

    void lease_valid_until(std::chrono::steady_clock::time_point t) override;
    void lease_ended(loss_cause why) override;

    const std::string& key() const noexcept { return key_; }
    const std::string& range() const noexcept { return range_; }
    std::int64_t revision() const noexcept { return rev_; }
    std::shared_ptr<lease_session> lease() const { return lease_.lock(); }

private:
    /// The backend while it lives, from the I/O thread (its shutdown drains the loop first).
    etcd_backend* live() const noexcept { return backend_.expired() ? nullptr : raw_; }
    void watch(std::int64_t from);
    /// Stops watching the own key (a kept watch goes back to own_watches, idle).
    void end_watch();
    void recheck();
    void lose(loss_cause cause);
    void start_release(std::function<void(std::error_code)> done);
    void send_release();
    /// The release's answer: `deleted`, the key was there (else not_owner).
    void on_released(const grpc::Status& s, bool deleted);
    void finish_release(std::error_code ec);
    /// Leaves the backend's local queue of the name (once: released or lost).
    void leave_queue();

    std::weak_ptr<etcd_backend> backend_;
    etcd_backend* raw_;
    asio::any_io_executor ex_;
    std::weak_ptr<lease_session> lease_;
    std::string name_;
    std::string range_;
    std::string key_;
    std::int64_t rev_;
    std::uint64_t ticket_;
    std::chrono::steady_clock::time_point acquired_at_;
    bool mutex_key_; ///< "<range><lease id>": the next hold of the name has the same key
    // I/O thread only:
    std::shared_ptr<key_watch> watch_{}; ///< a watch of its own (not a Mutex key's)
    std::uint64_t watch_ticket_ = 0;     ///< the kept watch of the Mutex key (own_watches)
    bool left_ = false;
    bool releasing_ = false;
    std::vector<std::function<void(std::error_code)>> release_waiters_{};
};

} // namespace dlock::detail::etcd
