// zookeeper/acquire.hpp: one acquisition of a ZooKeeper lock, as Curator's LockInternals
// does it, on the backend's I/O thread.
//
// States: connect (backend::with_session) -> create the protected node (parents made as
// CONTAINERs on NONODE; after a connection loss, find the node by its "_c_<uuid>-" prefix
// before creating again: protected mode) -> list the children and decide (names.hpp) ->
// hold, or getData+watch the predecessor and list again when the watch fires (or hold at
// once when the listing showed that predecessor alone before this node). On a standalone
// server the first listing is sent with the create, without waiting for its answer (the
// server answers a session's requests in order): two round trips when the lock is free,
// where Curator takes three; its answer counts only when the create succeeded.
// The wait deadline (opts.wait) ends a watch at once; a request in flight at the deadline may
// still grant the lock at its decision, otherwise the node is deleted (guaranteed) and the
// result is "not acquired". A hard deadline of wait + connect_timeout bounds requests that get
// no answer (errc::unavailable). If the session expires or the node vanishes while waiting,
// the acquisition starts again with a new node on a (new) session, while the wait lasts.
// A directory child that is not a lock node is errc::configuration_error.
//
// Lease mode (opts.kind == lock_kind::semaphore, run by semaphore.cpp while it holds the
// semaphore's internal `locks` mutex): the node is `_c_<uuid>-lease-<seq10>` under
// <lock>/leases; it holds when the directory has at most opts.permits children (its own
// included), else it keeps its node and waits on a children watch of the directory (only the
// mutex holder watches: no herd), as Curator's InterProcessSemaphoreV2 does. A vanished node
// or session is not retried here (the retry must take the mutex again): it ends with
// `retry_error()`.
//
// Election mode (elect(), run by election.cpp): the node is `_c_<uuid>-latch-<seq10>` with the
// participant's value as data (Curator's LeaderLatch); otherwise the mutex rules: the lowest
// sequence leads, the others watch their predecessor (getData + watch, as LeaderLatch does).
#pragma once

#include "zookeeper/backend.hpp"
#include "zookeeper/names.hpp"

#include <asio/steady_timer.hpp>

#include <optional>
#include <vector>

namespace dlock::detail::zk {

class acquisition final : public std::enable_shared_from_this<acquisition>,
                          public session_observer {
public:
    using clock = std::chrono::steady_clock;
    using done_fn = std::function<void(std::error_code, std::shared_ptr<hold>)>;

    /// `b` outlives every handler of the acquisition: its destruction drains the I/O loop
    /// first. (A shared_ptr here could make the I/O thread destroy the backend.)
    acquisition(zk_backend& b, std::string name, std::string dir, const acquire_options& opts,
                done_fn done);
    void start();
    /// What a lease-mode acquisition reports when it must start over through the mutex.
    static std::error_code retry_error() noexcept;
    /// Do not count this acquisition in the metrics (the semaphore's internal mutex).
    void internal() noexcept { internal_ = true; }
    /// Election mode: a LeaderLatch node with `value` as data, not counted as a lock
    /// acquisition in the metrics. Before start().
    void elect(std::string value);
    /// Ends the acquisition with errc::cancelled (backend shutdown).
    void cancel();

    void session_valid_until(clock::time_point) override {}
    void session_ended(session_end why) override;

    /// How many times a predecessor watch woke this acquisition (tests: no herd).
    std::size_t wakes() const noexcept { return wakes_; }

private:
    void connect();
    void create();
    void on_created(reply&& r);
    void make_parents(std::size_t pos);
    void recover();
    void adopt(const std::string& child);
    void list();
    void on_children(reply&& r);
    void watch(const std::string& child);
    /// The watched child went (`child`), or changed (empty): take the lock or list again.
    void predecessor_went(const std::string& child);
    void on_children_changed();
    void count(std::error_code ec, bool acquired);
    void granted();
    void give_up();
    void restart();
    void fail(std::error_code ec, std::string why);
    void finish(std::error_code ec, std::shared_ptr<hold> h);
    bool wait_over() const;
    void retry_when_connected(void (acquisition::*step)());

    zk_backend* backend_;
    std::string name_;
    std::string dir_;
    lock_kind kind_;
    std::string_view infix_;
    unsigned permits_ = 0; ///< lease mode: the semaphore's permits (0: lock rules)
    bool internal_ = false;
    std::optional<std::string> data_{}; ///< election mode: the node's data (else node_data())
    std::optional<clock::time_point> deadline_;
    clock::time_point started_;
    done_fn done_;
    asio::steady_timer wait_timer_;
    asio::steady_timer hard_timer_;
    std::shared_ptr<session> session_{};
    std::string prefix_{};           ///< "_c_<uuid>-<infix>"
    std::string own_{};              ///< own child name, once known
    std::vector<contender> queue_{}; ///< the directory as last listed (names.hpp), sorted
    std::int64_t czxid_ = 0;
    std::uint64_t gen_ = 0; ///< bumped per decision round: stale watches are ignored
    bool waiting_ = false;  ///< on a predecessor watch (lease mode: on the children watch)
    bool changed_ = false;  ///< lease mode: the children watch fired before its answer
    bool create_in_flight_ = false;
    bool listed_with_create_ = false; ///< the first listing was sent with the create
    bool finished_ = false;
    bool late_ = false; ///< the wait deadline passed while a request was in flight
    int restarts_ = 0;
    int parent_rounds_ = 0;
    std::size_t wakes_ = 0;
};

} // namespace dlock::detail::zk
