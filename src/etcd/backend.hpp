// etcd/backend.hpp: detail::lock_backend over etcd's v3 API, in etcd's concurrency.Mutex layout
// (layout.hpp), so that `etcdctl lock NAME` and dlock exclude each other both ways.
//
// etcd_backend owns one I/O thread (a core::runtime), one gRPC channel over every endpoint of
// the URL (rpc.hpp) and at most one live lease (session.hpp), granted on the first acquisition
// and replaced by a new one after it ended. Each acquisition is an `acquisition` (acquire.hpp)
// on the I/O thread; a granted one becomes an etcd_hold (hold.hpp). Acquisitions of one name
// by this client queue here first (one key per lease and name: the second would find the
// first's key and think it holds, as two Go Mutexes on one Session do), in arrival order.
//
// Kinds: reentrant (the default lock) and fair, both etcd's Mutex (FIFO by create revision),
// and read and write, etcd's recipes.RWMutex (no local queue: each acquisition has its own
// key); re-entry is counted locally (core/local_lock_object.cpp), and a read lock taken by the
// thread that holds the write lock is a downgrade (acquire_read_under). No fixed lease (every hold
// lives as long as the client's lease, which keeps itself alive): errc::unsupported.
//
// Run once per period (once.cpp): a slot is a key bound to a lease of its own, timed by etcd
// (docs/design/once.md, "etcd"): etcd has no clock to align slots to.
//
// Leader election (election.cpp, observe.cpp): etcd's concurrency.Election, whose keys are the
// Mutex's with the campaign's value (layout.hpp), so `etcdctl elect` and dlock elect one leader
// among them.
#pragma once

#include "core/lock_backend.hpp"
#include "core/metrics.hpp"
#include "core/runtime.hpp"
#include "etcd/layout.hpp"
#include "etcd/own_watches.hpp"
#include "etcd/rpc.hpp"
#include "etcd/session.hpp"
#include "etcd/url.hpp"

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::detail {
/// The etcd backend of an etcd:// or etcds:// URL (the contract of make_backend(), backends.hpp).
std::shared_ptr<lock_backend> make_etcd_backend(std::string_view url, std::error_code& ec,
                                                std::string* why, const log_options& log = {});
} // namespace dlock::detail

namespace dlock::detail::etcd {

class acquisition;

class etcd_backend final : public lock_backend, public std::enable_shared_from_this<etcd_backend> {
public:
    /// Errors (ec set, `why` filled): see rpc::rpc.
    etcd_backend(etcd_url url, std::error_code& ec, std::string& why, const log_options& log = {});
    ~etcd_backend() override;

    std::string_view backend_name() const noexcept override { return "etcd"; }
    const std::string& id() const noexcept override { return id_; }
    asio::any_io_executor executor() const override { return rt_.executor(); }
    bool on_io_thread() const noexcept override { return rt_.on_io_thread(); }
    std::string last_error_detail() const override;
    metrics_snapshot metrics() const override;
    bool supports(lock_kind kind) const noexcept override { return offered(kind); }
    std::error_code check_name(std::string_view name, lock_kind kind) const override;

    std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                  std::error_code& ec) override;
    void async_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;
    std::shared_ptr<hold> acquire_read_under(const hold& write, std::error_code& ec) override;
    bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) override;
    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view name, lock_kind kind,
                                                             std::error_code& ec) override;
    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) override;
    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) override;
    std::optional<period_slot> claim_period(std::string_view name, std::chrono::milliseconds period,
                                            std::error_code& ec) override;
    bool release_period(std::string_view name, const period_slot& slot,
                        std::error_code& ec) override;
    std::shared_ptr<hold> campaign(std::string_view name, std::string value,
                                   const campaign_options& opts, std::error_code& ec) override;
    void async_campaign(std::string name, std::string value, const campaign_options& opts,
                        std::function<void(std::error_code, std::shared_ptr<hold>)> done) override;
    void proclaim(hold& leader, std::string value, std::error_code& ec) override;
    std::optional<leader_info> leader(std::string_view name, std::error_code& ec) override;
    std::shared_ptr<observer> observe(std::string_view name, observe_fn cb,
                                      std::error_code& ec) override;
    void shutdown() noexcept override;

    // For the acquisitions and holds (I/O thread).
    const etcd_url& url() const noexcept { return url_; }
    rpc& client() noexcept { return *rpc_; }
    /// The watches of this client's own Mutex keys, kept between holds (own_watches.hpp).
    own_watches& own_keys() noexcept { return *own_watches_; }
    client_metrics& counters() noexcept { return metrics_; }
    bool shut() const noexcept { return shut_.load(std::memory_order_acquire); }
    void set_error(std::string why);
    /// `fn` once this client knows that its server speaks etcd 3.4 or later (version.hpp): {}
    /// then; unsupported for an older member or one without etcd's v3 API (Maintenance.Status
    /// unimplemented); or the error of the check (unavailable...: asked again at the next call).
    /// One Status request per client once it passed.
    void with_server(std::function<void(std::error_code)> fn);
    /// The live lease, granted on demand (beside with_server's check the first time); an error
    /// when it cannot be granted or the server is refused.
    void with_lease(std::function<void(std::error_code, std::shared_ptr<lease_session>)> fn);
    /// A Unix time in nanoseconds for an RWMutex key, later than every earlier one of this
    /// backend (I/O thread).
    std::int64_t unique_ns();
    /// The local queue of one key range: `go` runs (on the I/O thread) once every earlier
    /// ticket of `range` left; returns this ticket.
    std::uint64_t enter(const std::string& range, std::function<void()> go);
    /// Leaves the queue (the hold ended, or the acquisition ended without one).
    void leave(const std::string& range, std::uint64_t ticket);
    void track(std::shared_ptr<acquisition> a);
    void untrack(const acquisition* a);
    /// The current lease if there is one (any thread; tests read its id).
    std::shared_ptr<lease_session> current_lease() const;
    /// I/O thread: `fn` runs on the I/O thread when the backend shuts down, unless `owner` is
    /// gone by then (an observer drops its watch there: nothing of gRPC outlives the backend).
    void at_shutdown(std::weak_ptr<void> owner, std::function<void()> fn);

private:
    /// Runs `start` on the I/O thread and waits (up to connect_timeout x 2) for its result.
    template <class T>
    T call(std::function<void(std::function<void(T)>)> start, T on_timeout);
    /// The keys of lock `range` in create-revision order (holder first), and the read's
    /// header revision.
    void contenders(const std::string& range,
                    std::function<void(std::error_code, pb::RangeResponse&&)> done);
    /// Validates and maps `name` to its key range; invalid_argument (and last error) if bad.
    std::string range_of(std::string_view name, std::error_code& ec);

    etcd_url url_;
    std::string id_;
    runtime rt_{1}; // declared before what its handlers use: destroyed after them
    std::unique_ptr<rpc> rpc_;
    std::unique_ptr<own_watches> own_watches_; // after rpc_: its watches go first
    std::atomic<bool> shut_{false};
    client_metrics metrics_{};
    mutable std::mutex mu_;
    std::shared_ptr<lease_session> lease_{}; // guarded by mu_ (written on the I/O thread)
    std::string last_error_{};               // guarded by mu_
    // I/O thread only:
    bool granting_ = false;
    bool server_ok_ = false;
    bool checking_server_ = false;
    std::vector<std::function<void(std::error_code)>> server_waiters_{};
    std::vector<std::function<void(std::error_code, std::shared_ptr<lease_session>)>>
        lease_waiters_{};
    std::uint64_t next_ticket_ = 0;
    std::int64_t last_ns_ = 0;
    std::map<std::string, std::deque<std::pair<std::uint64_t, std::function<void()>>>> queues_{};
    std::vector<std::shared_ptr<acquisition>> active_{};
    std::vector<std::pair<std::weak_ptr<void>, std::function<void()>>> at_shutdown_{};
};

} // namespace dlock::detail::etcd
