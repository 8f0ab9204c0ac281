// etcd/acquire.hpp: one acquisition of an etcd Mutex (etcd's concurrency.Mutex.Lock), on the
// backend's I/O thread.
//
// States: the local queue of the name (backend::enter) -> the lease (backend::with_lease) ->
// one Txn: if the own key "<range><lease hex>" has create revision 0, put it with the lease,
// else read it (a key this lease left: adopted, as the Go Mutex does); both branches read the
// range's first key by create revision -> holds when that is the own key, else the wait:
// read the range's last key created before the own one (sort by create revision descending,
// limit 1, max_create_revision = own - 1) and watch it for its deletion from the read's
// revision (key_watch), then read again. Each read is one read-only Txn that also compares the
// own key's create revision (still_mine_then: gone with the lease, start again), so that a
// waiter woken by its predecessor's deletion holds after one round trip -> an etcd_hold.
// The wait deadline (opts.wait) ends a watch at once; a request in flight at the deadline may
// still grant at its answer, otherwise the own key is deleted and the result is "not
// acquired". Transient errors (no member, no leader) are retried every 100 ms up to the hard
// deadline (wait + connect_timeout: errc::unavailable); others end the acquisition. A lease that
// ends while waiting (expiry, revoke: the own key went with it) starts the acquisition again on
// a new lease, while the wait lasts.
//
// A side of the RWMutex (read, write) runs the same states with its own key
// "<range>read|write/<unix ns>" (layout.hpp) and no local queue (every acquisition has a key
// of its own): one Txn puts the key and reads the two newest keys under its blockers, so the
// uncontended path is one round trip and a contended one watches the newest older blocker at
// once; afterwards the blocker is read as the recipe's waitOnLastRev reads it.
//
// A campaign (elect(): etcd's concurrency.Election) is a Mutex acquisition whose key carries
// the campaign's value; the hold is the leader's.
//
// A semaphore (layout.hpp) puts "<range>semaphore/<unix ns>" (value: the permits) and reads the
// whole range in the same Txn: fewer than `permits` keys older than its own, it holds; else it
// keeps one watch of the range for deletions, synced from etcd's current revision, and counts
// them itself (in_line(), wait_in_line(), read_line(): no request per waiter when a holder
// leaves). A key among the `permits` oldest with another number of permits ends the acquisition
// with errc::invalid_argument.
#pragma once

#include "etcd/backend.hpp"
#include "etcd/watch.hpp"

#include <asio/steady_timer.hpp>

#include <optional>
#include <unordered_set>

namespace dlock::detail::etcd {

class acquisition final : public std::enable_shared_from_this<acquisition>, public lease_observer {
public:
    using clock = std::chrono::steady_clock;
    using done_fn = std::function<void(std::error_code, std::shared_ptr<hold>)>;

    /// `b` outlives every handler of the acquisition (its shutdown drains the I/O loop).
    acquisition(etcd_backend& b, std::string name, std::string range, const acquire_options& opts,
                done_fn done);
    /// Before start(): a campaign of an election (concurrency.Election's layout, the Mutex's
    /// keys): the own key is put with `value`, and an adopted own key gets it too.
    void elect(std::string value) { value_ = std::move(value); }
    void start();
    /// Ends the acquisition with errc::cancelled (backend shutdown).
    void cancel();

    void lease_valid_until(clock::time_point) override {}
    void lease_ended(loss_cause why) override;

private:
    void connect();
    void put();
    void on_put(grpc::Status s, pb::TxnResponse&& r);
    /// The own key of a (new) attempt: the Mutex's, or a unique one for the other kinds.
    std::string new_key();
    void on_rw_put(pb::TxnResponse&& r);
    void on_semaphore_put(pb::TxnResponse&& r);
    /// `keys`: the semaphore's keys read at `revision` (with the put, the own one among them).
    /// Fewer than `permits` created before the own key: holds; else, unless `watching` (a
    /// reread under the wait's watch, which goes on), wait_in_line().
    void in_line(const pb::RangeResponse& keys, std::int64_t revision, bool watching);
    /// False (and the acquisition failed) when a holder among `holders` (the `permits` oldest
    /// by create revision) names another number of permits.
    bool permits_match(const pb::RangeResponse& holders);
    /// A semaphore waiter starts its wait again (after a broken watch, a retry): reads the
    /// line, then in_line().
    void line();
    /// Reads the keys ahead of the own one, and the own one, in one revision, for step `gen`
    /// (the own key gone: restart()), then in_line().
    void read_line(std::uint64_t gen, bool watching);
    /// One watch of the semaphore's range for the whole wait, from etcd's current revision (a
    /// synced watch): a deletion of a key ahead takes it off `ahead_` (holds once fewer than
    /// `permits` are left, after the line is settled); of the own key, starts again; a broken
    /// watch reads the line again. `read_at`: the revision `ahead_` was read at; a watch
    /// created later reads the line again (read_line(gen, true)) before it may grant.
    void wait_in_line(std::int64_t read_at);
    void next_predecessor();
    /// Watches `key` (created at revision `created`, read at `read_at`) for its deletion,
    /// then reads the next predecessor. The watch starts at etcd's current revision (0): one
    /// from a revision already passed, as read_at + 1 is once anyone wrote since the read, is
    /// caught up by a loop that runs every 100 ms (mvcc's unsynced watchers), which delayed
    /// busy hand-offs by up to 100 ms. When the creation answers with a revision after
    /// read_at, the key is read again (recheck()): gone or put again, the next predecessor.
    void wait_for(const std::string& key, std::int64_t read_at, std::int64_t created);
    void recheck(std::uint64_t gen, const std::string& key, std::int64_t created);
    void granted(std::int64_t seen_revision);
    void give_up();
    void restart();
    /// A failed request: retried after 100 ms when transient and the hard deadline allows.
    void failed(const grpc::Status& s, void (acquisition::*retry)(), const char* doing);
    /// Runs `retry` after 100 ms (the hard deadline still ends the acquisition with
    /// errc::unavailable); an endless wait gives up with `ec` after an hour.
    void retry_later(std::error_code ec, void (acquisition::*retry)());
    void fail(std::error_code ec, std::string why);
    void finish(std::error_code ec, std::shared_ptr<hold> h);
    bool wait_over() const;

    etcd_backend* backend_;
    std::string name_;
    std::string range_;
    lock_kind kind_;
    std::string blockers_;       ///< an RWMutex side's blocker prefix; empty for the Mutex
    unsigned permits_;           ///< a semaphore's permits; 0 for the other kinds
    std::string semaphore_keys_; ///< a semaphore's key range
    std::unordered_set<std::string> ahead_{}; ///< a semaphore waiter's keys older than its own
    bool settled_ = false; ///< the watch covers every deletion after `ahead_` was read
    std::unordered_set<std::string> gone_{}; ///< deletions the watch brought before it settled
    std::optional<std::string> value_;       ///< a campaign's value (elect()); none for a lock
    std::optional<clock::time_point> deadline_;
    clock::time_point started_;
    done_fn done_;
    asio::steady_timer wait_timer_;
    asio::steady_timer hard_timer_;
    asio::steady_timer retry_timer_;
    std::shared_ptr<lease_session> lease_{};
    std::shared_ptr<key_watch> watch_{};
    std::string key_{};    ///< the own key, once put
    std::int64_t rev_ = 0; ///< its create revision
    std::uint64_t ticket_ = 0;
    bool queued_ = false;   ///< holds a ticket of the local queue
    std::uint64_t gen_ = 0; ///< bumped per step: stale answers are ignored
    bool waiting_ = false;  ///< on a watch
    bool finished_ = false;
    bool late_ = false; ///< the wait deadline passed while a request was in flight
    int restarts_ = 0;
};

} // namespace dlock::detail::etcd
