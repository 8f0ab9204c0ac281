// zookeeper/semaphore.hpp: one acquisition of a semaphore lease in the layout of Apache
// Curator's InterProcessSemaphoreV2 (zookeeper-sql.md §1a), on the backend's I/O thread.
//
// A semaphore named "pool" is the directory /pool with two children:
//   /pool/locks   an InterProcessMutex (`_c_<uuid>-lock-<seq10>` nodes): the "gate"
//   /pool/leases  one `_c_<uuid>-lease-<seq10>` EPHEMERAL_SEQUENTIAL node per lease
// Order of operations (Curator's internalAcquire1Lease): take the gate (a mutex acquisition
// of /pool/locks, FIFO, each waiter watching its predecessor); create the lease node; list
// /pool/leases with a children watch; when the leases (own included) are at most `permits`,
// the lease is held; else keep the node and wait for the watch (only the gate holder
// watches the leases, so a freed permit wakes one client); in every case release the gate
// afterwards. Not acquired within the wait: the lease node is deleted (guaranteed), then the
// gate released. A lease node or session that vanished while counting starts over from the
// gate (bounded, within the wait). The hold is the lease node (zk_hold: token = its czxid,
// loss on session expiry, deadline or the node deleted).
//
// `permits` is a convention of the clients, stored nowhere (as in Curator): every client of
// one semaphore must pass the same number.
#pragma once

#include "zookeeper/backend.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace dlock::detail::zk {

/// The two children of a semaphore's directory (Curator's LOCK_PARENT and LEASE_PARENT).
inline constexpr std::string_view semaphore_gate = "locks";
inline constexpr std::string_view semaphore_leases = "leases";

class semaphore_acquisition final : public std::enable_shared_from_this<semaphore_acquisition> {
public:
    using clock = std::chrono::steady_clock;
    using done_fn = std::function<void(std::error_code, std::shared_ptr<hold>)>;

    semaphore_acquisition(zk_backend& b, std::string name, std::string dir,
                          const acquire_options& opts, done_fn done);
    void start();

private:
    void take_gate();
    void on_gate(std::error_code ec, std::shared_ptr<hold> gate);
    void take_lease();
    void on_lease(std::error_code ec, std::shared_ptr<hold> lease);
    void open_gate();
    std::optional<std::chrono::milliseconds> remaining() const;

    zk_backend* backend_;
    std::string name_;
    std::string dir_;
    acquire_options opts_;
    std::optional<clock::time_point> deadline_;
    clock::time_point started_;
    done_fn done_;
    std::shared_ptr<hold> gate_{};
    int rounds_ = 0;
};

} // namespace dlock::detail::zk
