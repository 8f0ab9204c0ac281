// redis/redlock/redlock_impl.hpp: the private types of the Redlock backend, shared by its files.
//
// Redlock over N independent masters (dlock/redlock.hpp), behind the seam as redlock_backend
// (backend.hpp). The decisions are core::quorum_round's (sans-I/O, unit-tested); these files
// are the Asio shell: one core::runtime (I/O thread), one detail::node per master, the fan-out
// of every round (fanout), the acquisition with its retries (redlock_acquire_op), the Redlock hold
// behind a dlock::lease (redlock_hold) and one watchdog for all holds (extension rounds every
// watchdog_lease / 3, one loss timer).
//
// Each master uses the simple-lock layout and scripts (locks/simple/): SET N token NX PX lease,
// simple/release.lua (compare-and-delete), simple/renew.lua (compare-and-pexpire).
//
// Threads: every round runs on the I/O thread (its votes, its timer, its verdict); blocking
// callers post the round there and wait on a completion_flag. Shared state: a hold's votes
// (votes_mu_), the watchdog's hold table (watch_, its own mutex), the acquisitions to cancel
// at shutdown (ops_mu_), the count of deletes in flight (atomic); the rest is the I/O thread's.
//
// Deletes are never dropped: a release completes only once every master answered its delete
// or the command timed out (the quorum still decides the result), and the shutdown lets every
// delete in flight (releases, lost and cancelled rounds) finish the same way before it stops
// the connections (the drain, bounded by the masters' command_timeout).
//
// Files: backend.cpp (redlock_backend: the seam, the acquisition's start), queries.cpp
// (is_locked, inspect, list, force_unlock across the masters), url.cpp (redlock:// URLs),
// redlock.cpp (redlock_impl: start, shutdown and its drain), fanout.cpp (one round on every
// master, the readers of the answers, delete_everywhere), hold.cpp (redlock_hold: release and
// extension), acquire.cpp (redlock_acquire_op) and watchdog.cpp (extend_all and the watchdog's tick
// and loss timer).
#pragma once

#include "core/completion_flag.hpp"
#include "core/deadline_watch.hpp"
#include "core/hold.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/quorum_round.hpp"
#include "core/random.hpp"
#include "core/runtime.hpp"
#include "redis/client.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/topology/node.hpp"

#include <dlock/redlock.hpp>

#include <asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <unordered_map>

namespace dlock::detail {

using clock = std::chrono::steady_clock;
using vote = quorum_round::vote;

inline redlock_vote::kind public_kind(vote v) noexcept {
    switch (v) {
    case vote::yes:
        return redlock_vote::kind::yes;
    case vote::refused:
        return redlock_vote::kind::refused;
    case vote::failed:
        return redlock_vote::kind::failed;
    case vote::timed_out:
        return redlock_vote::kind::timed_out;
    case vote::pending:
        break;
    }
    return redlock_vote::kind::pending;
}

inline const lock_protocol& layout() noexcept {
    return protocol_of(lock_kind::simple);
}

class redlock_hold;
class redlock_acquire_op;

// ---- the client side: I/O thread, nodes, watchdog --------------------------------------------

class redlock_impl : public std::enable_shared_from_this<redlock_impl> {
public:
    /// Holds per watchdog renewal script (as renewal_service::batch_size).
    static constexpr std::size_t batch_size = 100;

    explicit redlock_impl(redlock_options opts);
    ~redlock_impl();
    void start();
    void shutdown();

    const redlock_options& options() const noexcept { return opts_; }
    asio::io_context& io() noexcept { return rt_.io(); }
    std::size_t size() const noexcept { return nodes_.size(); }
    node& at(std::size_t i) noexcept { return *nodes_[i]; }
    const std::string& address(std::size_t i) const noexcept { return addresses_[i]; }
    std::chrono::milliseconds command_timeout(std::size_t i) const noexcept {
        return opts_.masters[i].command_timeout;
    }
    bool on_io_thread() const noexcept { return rt_.on_io_thread(); }
    bool shut_down() const noexcept { return shut_.load(std::memory_order_acquire); }

    /// The watchdog (any thread): extension rounds for watchdog holds, loss at valid_until.
    void watch(const std::shared_ptr<redlock_hold>& h);
    void unwatch(const redlock_hold* h);
    /// Counters (relaxed atomics, any thread) and the snapshot client::metrics() returns.
    client_metrics& metrics() noexcept { return metrics_; }
    metrics_snapshot metrics_snapshot_now() const {
        auto s = metrics_.snapshot();
        if constexpr (metrics_enabled)
            for (const auto& n : nodes_)
                n->add_counters(s);
        return s;
    }
    /// Acquisitions to cancel at shutdown (any thread).
    void track(const std::shared_ptr<redlock_acquire_op>& op);
    void untrack(const redlock_acquire_op* op);

    ///@{
    /// The deletes in flight, which the shutdown waits for (the drain). begin_delete() (any
    /// thread) counts one unless the redlock is shutting down (false then); add_delete() (I/O
    /// thread: a lost or cancelled round) counts one always; end_delete() (any thread) ends one
    /// once every master answered it or its command timed out.
    bool begin_delete() {
        deletes_.fetch_add(1);
        if (!shut_.load()) return true; // seq_cst: shutdown() stores shut_, then reads deletes_
        end_delete();
        return false;
    }
    void add_delete() { deletes_.fetch_add(1); }
    void end_delete() {
        if (deletes_.fetch_sub(1) == 1 && shut_.load()) rt_.post([this] { drained(); });
    }
    ///@}

private:
    void drain();
    void drained();
    void stop_io();
    void arm_tick();
    void tick();
    /// The watchdog's loss rule (core/deadline_watch.hpp): not while releasing; a passed
    /// deadline is loss_cause::deadline.
    struct expiry {
        static bool releasing(const redlock_hold& h) noexcept;
        static void expire(redlock_hold& h);
    };

    std::atomic<bool> shut_{false};
    client_metrics metrics_;
    redlock_options opts_;
    std::vector<std::string> addresses_;
    runtime rt_; // before the nodes and timers on its loop
    std::vector<std::unique_ptr<node>> nodes_;
    asio::steady_timer tick_timer_;  // I/O thread
    asio::steady_timer drain_timer_; // I/O thread
    std::atomic<std::size_t> deletes_{0};
    bool draining_ = false; // I/O thread
    bool stopping_ = false; // I/O thread

    deadline_watch<redlock_hold, expiry> watch_; // the watchdog's holds and loss timer

    std::mutex ops_mu_;
    std::unordered_map<const redlock_acquire_op*, std::weak_ptr<redlock_acquire_op>>
        ops_; // ops_mu_
};

// ---- one round: the fan-out to every master, read by a quorum_round ---------------------------

/// One command to one master, without a waiting caller.
struct node_call final : request {
    command cmd;
    std::function<void(std::error_code, resp3::value&&)> done;
    void complete(std::error_code ec, resp3::value&& v) override {
        done(ec, std::move(v));
        delete this;
    }
};

/// One master's answer read as votes: one (vote, reason) per round of the fan-out.
using answer = std::pair<vote, std::error_code>;

/// Rounds on the I/O thread: start() sends one command per master, which carries all the
/// fan-out's rounds (one lock, or up to batch_size locks for the watchdog); each answer becomes
/// one vote per round; the deadline (node_timeout) times out the rest. `decided` runs once per
/// round, with its verdict. Answers after a round's verdict go to `late` (and change nothing).
/// `finished` runs once, after every round was decided, when every master's command completed:
/// answered, failed, or timed out by its master's command_timeout.
class fanout final : public std::enable_shared_from_this<fanout> {
public:
    using fill_fn = std::function<void(command&)>;
    using read_fn = std::function<void(std::error_code, const resp3::value&, std::span<answer>)>;
    using decided_fn = std::function<void(fanout&, std::size_t round)>;
    using late_fn = std::function<void(fanout&, std::size_t round, std::size_t master)>;
    using finished_fn = std::function<void(fanout&)>;

    fanout(redlock_impl& r, std::size_t rounds, std::optional<std::chrono::milliseconds> lease);

    /// I/O thread. `keep` holds what the commands' views point into.
    void start(std::shared_ptr<const void> keep, const fill_fn& fill, read_fn read,
               decided_fn decided, late_fn late = {}, finished_fn finished = {});

    const quorum_round& round(std::size_t k = 0) const noexcept { return rounds_[k]; }
    /// Master `i`'s part in round `k`, as the public type.
    redlock_vote vote_of(std::size_t k, std::size_t i) const {
        return {i, r_.address(i), public_kind(rounds_[k].votes()[i]), ecs_[k][i]};
    }
    std::vector<redlock_vote> votes(std::size_t k = 0) const {
        std::vector<redlock_vote> out;
        out.reserve(r_.size());
        for (std::size_t i = 0; i < r_.size(); ++i)
            out.push_back(vote_of(k, i));
        return out;
    }

private:
    std::size_t open_rounds() const noexcept {
        return static_cast<std::size_t>(std::count(reported_.begin(), reported_.end(), 0));
    }

    void on_answer(std::size_t i, std::error_code ec, const resp3::value& v);
    void finish() {
        if (auto f = std::move(finished_)) f(*this);
    }
    void on_deadline();
    void report(std::size_t k);

    redlock_impl& r_; // outlives every round: its I/O thread runs them
    std::vector<quorum_round> rounds_;
    std::vector<std::vector<std::error_code>> ecs_; // [round][master]
    std::vector<char> reported_;
    std::vector<answer> answers_; // scratch
    asio::steady_timer timer_;
    read_fn read_;
    decided_fn decided_;
    late_fn late_;
    finished_fn finished_;
    std::size_t outstanding_ = 0; // commands not completed yet
    bool sending_ = false;
};

// The three kinds of round, on the simple-lock layout (fanout.cpp).
void read_set(std::error_code ec, const resp3::value& v, std::span<answer> out);
void read_delete(std::error_code ec, const resp3::value& v, std::span<answer> out);
/// simple/renew.lua over out.size() locks: 1 extended, 0 not ours (any more).
void read_pexpire(std::error_code ec, const resp3::value& v, std::span<answer> out);

/// What the commands of a round on one lock point into.
struct redlock_ref {
    lock_keys keys;
    std::string token; ///< 32 hex chars, 128 random bits, fresh per acquisition
    std::chrono::milliseconds lease{};
};

/// Deletes `ref`'s token on every master, best effort, nobody waiting (a lost round; a
/// cancelled acquisition); the shutdown waits for it (the drain). I/O thread.
void delete_everywhere(redlock_impl& r, std::shared_ptr<const redlock_ref> ref);

class redlock_hold;
/// One extension fan-out for `holds` (at most batch_size; I/O thread): every master gets one
/// simple/renew.lua call over all their keys, and each hold has its own round. A won round
/// sets the hold's valid_until; a refusal by a quorum makes it lost (not_owner); anything else
/// leaves it as it was (errc::unavailable). `each(h, ec)` runs when hold h's round is decided,
/// `all()` once every round is (both may be empty).
void extend_all(redlock_impl& r, std::vector<std::shared_ptr<redlock_hold>> holds,
                std::chrono::milliseconds lease,
                std::function<void(const redlock_hold&, std::error_code)> each,
                std::function<void()> all);

// ---- the hold behind a lease -----------------------------------------------------------------

class redlock_hold final : public hold {
public:
    redlock_hold(std::weak_ptr<redlock_impl> r, std::string name,
                 std::shared_ptr<const redlock_ref> ref, bool watchdog,
                 std::vector<redlock_vote> votes)
        : r_(std::move(r))
        , name_(std::move(name))
        , ref_(std::move(ref))
        , watchdog_(watchdog)
        , votes_(std::move(votes)) {}

    const std::string& name() const noexcept override { return name_; }
    /// Redlock has no sound fencing counter (see dlock/redlock.hpp).
    std::optional<std::uint64_t> fencing_token() const noexcept override { return std::nullopt; }
    bool watchdog() const noexcept { return watchdog_; }
    bool releasing() const noexcept { return releasing_.load(std::memory_order_acquire); }
    const redlock_ref& ref() const noexcept { return *ref_; }

    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override;
    void extend(std::chrono::milliseconds lease_ms, std::error_code& ec) override;
    void extend_async(std::chrono::milliseconds lease_ms,
                      std::function<void(std::error_code)> done) override;
    asio::any_io_executor executor() const override;
    void with_metrics(const std::function<void(client_metrics&)>& f) const override;
    std::string_view kind_label() const noexcept override { return "redlock"; }

    /// One extension round to `lease` (I/O thread): won sets valid_until, a refusal by a quorum
    /// makes the hold lost (not_owner), anything else leaves it as it was (errc::unavailable).
    /// `done` may be empty (the watchdog).
    void run_extension(redlock_impl& r, std::chrono::milliseconds lease,
                       std::function<void(std::error_code)> done);

    bool extending() const noexcept { return extending_; }
    void set_extending(bool b) noexcept { extending_ = b; }
    /// Ends the hold by loss / normally, counting it in the redlock's metrics once.
    void end_lost(loss_cause cause);
    void end_released();

    std::vector<redlock_vote> votes() const {
        std::lock_guard lk(votes_mu_);
        return votes_;
    }
    void set_votes(std::vector<redlock_vote> v) {
        std::lock_guard lk(votes_mu_);
        votes_ = std::move(v);
    }
    void set_vote(redlock_vote v) {
        std::lock_guard lk(votes_mu_);
        if (v.master < votes_.size()) votes_[v.master] = std::move(v);
    }

private:
    /// The checks before a release; returns the redlock when a release must be sent (the hold
    /// is then off the watchdog and marked releasing), else null with `ec` saying why.
    /// A release to send is counted as a delete in flight until run_release() finishes it.
    std::shared_ptr<redlock_impl> begin_release(std::error_code& ec);

    /// The release round (I/O thread): the token is deleted on every master; released when a
    /// quorum deleted it, lost (not_owner) when a quorum said it was not ours, otherwise ended
    /// as released with the first failure (the keys expire after their lease). The quorum
    /// decides the result, but `done` runs only once every master answered or its command
    /// timed out: a delete still on its way to a slow master is not left behind (a key kept
    /// on one master blocks the next acquirer for a lease when another master is down).
    void run_release(redlock_impl& r, std::function<void(std::error_code)> done);

    std::weak_ptr<redlock_impl> r_;
    std::string name_;
    std::shared_ptr<const redlock_ref> ref_;
    bool watchdog_ = false;
    clock::time_point acquired_at_ = clock::now(); // metrics: made when its round was won
    std::atomic<bool> releasing_{false};
    bool extending_ = false; // I/O thread
    mutable std::mutex votes_mu_;
    std::vector<redlock_vote> votes_; // guarded by votes_mu_
};

// ---- the acquisition: rounds until won, the wait is over, or cancelled -----------------------

class redlock_acquire_op final : public std::enable_shared_from_this<redlock_acquire_op> {
public:
    using done_fn = std::function<void(std::error_code, redlock_acquisition)>;

    redlock_acquire_op(std::shared_ptr<redlock_impl> r, std::string name, lock_keys keys,
                       std::chrono::milliseconds lease, bool watchdog, retry_schedule schedule,
                       done_fn done)
        : r_(std::move(r))
        , name_(std::move(name))
        , keys_(std::move(keys))
        , lease_(lease)
        , watchdog_(watchdog)
        , schedule_(schedule)
        , done_(std::move(done))
        , timer_(r_->io()) {}

    /// Any thread: the rounds run on the I/O thread.
    void start();
    /// I/O thread (shutdown): a round in flight is deleted everywhere; the caller gets
    /// errc::cancelled.
    void cancel();

private:
    void round();
    /// The verdict of the current round; returns the hold when it was won.
    std::weak_ptr<redlock_hold> decided(fanout& f, const std::shared_ptr<redlock_ref>& ref);
    void finish(std::error_code ec, redlock_acquisition a);

    std::shared_ptr<redlock_impl> r_;
    clock::time_point started_at_ = clock::now(); // metrics: the wait starts here
    std::shared_ptr<redlock_acquire_op> self_;    // from start() to finish()
    std::string name_;
    lock_keys keys_;
    std::chrono::milliseconds lease_;
    bool watchdog_;
    retry_schedule schedule_;
    done_fn done_;
    asio::steady_timer timer_;
    // I/O thread:
    unsigned rounds_ = 0;
    bool finished_ = false;
    std::shared_ptr<const redlock_ref> current_; // the round in flight
    std::vector<redlock_vote> last_votes_;
};

} // namespace dlock::detail
