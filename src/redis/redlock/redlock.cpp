// dlock::redlock: Redlock over N independent masters. The decisions are core::quorum_round's
// (sans-I/O, unit-tested); this file is the Asio shell: one io_context and I/O thread, one
// detail::node per master, the fan-out of every round (fanout), the acquisition with its
// retries (acquire_op), the Redlock hold behind a dlock::lease (redlock_hold) and one watchdog
// for all holds (extension rounds every watchdog_lease / 3, one loss timer).
//
// Each master uses the simple-lock layout and scripts (locks/simple/): SET N token NX PX lease,
// simple/release.lua (compare-and-delete), simple/renew.lua (compare-and-pexpire).
//
// Threads: every round runs on the I/O thread (its votes, its timer, its verdict); blocking
// callers post the round there and wait on a completion_flag. Shared state: a hold's votes
// (votes_mu_), the watchdog's hold table (watch_mu_), the acquisitions to cancel at shutdown
// (ops_mu_), the count of deletes in flight (atomic); the rest is the I/O thread's.
//
// Deletes are never dropped: a release completes only once every master answered its delete
// or the command timed out (the quorum still decides the result), and the shutdown lets every
// delete in flight (releases, lost and cancelled rounds) finish the same way before it stops
// the connections (the drain, bounded by the masters' command_timeout).
#include "core/completion_flag.hpp"
#include "core/hold.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/quorum_round.hpp"
#include "core/random.hpp"
#include "redis/client_impl.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/topology/node.hpp"

#include <dlock/redlock.hpp>

#include <asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

namespace dlock::detail {
namespace {

using clock = std::chrono::steady_clock;
using vote = quorum_round::vote;

redlock_vote::kind public_kind(vote v) noexcept {
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

const lock_protocol& layout() noexcept {
    return protocol_of(lock_kind::simple);
}

} // namespace

class redlock_hold;
class acquire_op;

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
    asio::io_context& io() noexcept { return io_; }
    std::size_t size() const noexcept { return nodes_.size(); }
    node& at(std::size_t i) noexcept { return *nodes_[i]; }
    const std::string& address(std::size_t i) const noexcept { return addresses_[i]; }
    std::chrono::milliseconds command_timeout(std::size_t i) const noexcept {
        return opts_.masters[i].command_timeout;
    }
    bool on_io_thread() const noexcept {
        return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire);
    }
    bool shut_down() const noexcept { return shut_.load(std::memory_order_acquire); }

    /// The watchdog (any thread): extension rounds for watchdog holds, loss at valid_until.
    void watch(const std::shared_ptr<redlock_hold>& h);
    void unwatch(const redlock_hold* h);
    /// Counters (relaxed atomics, any thread) and the snapshot redlock::metrics() returns.
    client_metrics& metrics() noexcept { return metrics_; }
    metrics_snapshot metrics_snapshot_now() const {
        auto s = metrics_.snapshot();
        if constexpr (metrics_enabled)
            for (const auto& n : nodes_)
                n->add_counters(s);
        return s;
    }
    /// Where the redlock's own records go: the first master's client_options::log.
    const log_options& log_opts() const noexcept { return opts_.masters.front().log; }
    /// Acquisitions to cancel at shutdown (any thread).
    void track(const std::shared_ptr<acquire_op>& op);
    void untrack(const acquire_op* op);

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
        if (deletes_.fetch_sub(1) == 1 && shut_.load()) asio::post(io_, [this] { drained(); });
    }
    ///@}

private:
    void drain();
    void drained();
    void stop_io();
    void arm_tick();
    void tick();
    void arm_loss(clock::time_point when);
    void check_deadlines();

    std::atomic<bool> shut_{false};
    client_metrics metrics_;
    redlock_options opts_;
    std::vector<std::string> addresses_;
    asio::io_context io_;
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    std::vector<std::unique_ptr<node>> nodes_;
    asio::steady_timer tick_timer_;  // I/O thread
    asio::steady_timer loss_timer_;  // I/O thread
    asio::steady_timer drain_timer_; // I/O thread
    std::atomic<std::size_t> deletes_{0};
    bool draining_ = false; // I/O thread
    bool stopping_ = false; // I/O thread
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};

    std::mutex watch_mu_;
    std::unordered_map<const redlock_hold*, std::shared_ptr<redlock_hold>> holds_; // watch_mu_
    clock::time_point loss_armed_ = clock::time_point::max();                      // watch_mu_
    bool stopped_ = false;                                                         // watch_mu_

    std::mutex ops_mu_;
    std::unordered_map<const acquire_op*, std::weak_ptr<acquire_op>> ops_; // ops_mu_
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

    fanout(redlock_impl& r, std::size_t rounds, std::optional<std::chrono::milliseconds> lease)
        : r_(r)
        , ecs_(rounds, std::vector<std::error_code>(r.size()))
        , reported_(rounds, 0)
        , timer_(r.io()) {
        const auto now = clock::now();
        rounds_.reserve(rounds);
        for (std::size_t k = 0; k < rounds; ++k)
            rounds_.emplace_back(r.size(), now, r.options().node_timeout, lease);
    }

    /// I/O thread. `keep` holds what the commands' views point into.
    void start(std::shared_ptr<const void> keep, const fill_fn& fill, read_fn read,
               decided_fn decided, late_fn late = {}, finished_fn finished = {}) {
        read_ = std::move(read);
        decided_ = std::move(decided);
        late_ = std::move(late);
        finished_ = std::move(finished);
        outstanding_ = r_.size();
        sending_ = true; // a master that fails at once answers inside submit()
        for (std::size_t i = 0; i < r_.size(); ++i) {
            auto* call = new node_call();
            fill(call->cmd);
            call->args = call->cmd.args();
            call->eval_fallback = call->cmd.eval_fallback();
            call->deadline = clock::now() + r_.command_timeout(i);
            call->done = [self = shared_from_this(), keep,
                          i](std::error_code ec, resp3::value&& v) { self->on_answer(i, ec, v); };
            r_.at(i).conn().submit(*call);
        }
        sending_ = false;
        for (std::size_t k = 0; k < rounds_.size(); ++k)
            if (rounds_[k].state() != quorum_round::verdict::open) report(k);
        if (outstanding_ == 0) finish();
        if (open_rounds() == 0) return;
        // Weak: the commands in flight keep an open round alive; a handler left in the queue
        // at shutdown must not keep the redlock alive through the round's callbacks.
        timer_.expires_at(rounds_.front().deadline());
        timer_.async_wait([w = weak_from_this()](std::error_code ec) {
            if (auto self = w.lock(); self && !ec) self->on_deadline();
        });
    }

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

    void on_answer(std::size_t i, std::error_code ec, const resp3::value& v) {
        answers_.assign(rounds_.size(), answer{vote::failed, {}});
        read_(ec, v, answers_);
        const auto now = clock::now();
        for (std::size_t k = 0; k < rounds_.size(); ++k) {
            auto& q = rounds_[k];
            if (q.votes()[i] != vote::pending) continue; // timed out already
            const bool open = q.state() == quorum_round::verdict::open;
            ecs_[k][i] = answers_[k].second;
            q.on_vote(i, answers_[k].first, now);
            if (!open) {
                if (late_) late_(*this, k, i);
            } else if (!sending_ && q.state() != quorum_round::verdict::open) {
                report(k);
            }
        }
        // The last answer has every vote in, so every round is decided (or start() decides
        // them when it came inside submit()).
        if (--outstanding_ == 0 && !sending_) finish();
    }

    void finish() {
        if (auto f = std::move(finished_)) f(*this);
    }

    void on_deadline() {
        const auto now = clock::now();
        for (std::size_t k = 0; k < rounds_.size(); ++k) {
            auto& q = rounds_[k];
            if (q.state() != quorum_round::verdict::open) continue;
            for (std::size_t i = 0; i < r_.size(); ++i)
                if (q.votes()[i] == vote::pending && !r_.at(i).conn().connected())
                    ecs_[k][i] = make_error_code(errc::unavailable);
            q.on_deadline(now);
            report(k);
        }
    }

    void report(std::size_t k) {
        if (reported_[k]) return;
        reported_[k] = 1;
        if (open_rounds() == 0) timer_.cancel();
        decided_(*this, k);
    }

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

// The three kinds of round, on the simple-lock layout.

void read_set(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    const auto a = layout().read_attempt(ec, v);
    switch (a.what) {
    case attempt_outcome::kind::acquired:
        out[0] = {vote::yes, {}};
        break;
    case attempt_outcome::kind::held:
        out[0] = {vote::refused, {}};
        break;
    default:
        out[0] = {vote::failed, a.ec ? a.ec : make_error_code(errc::protocol_error)};
    }
}

void read_delete(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    const auto a = layout().read_release(ec, v);
    switch (a.what) {
    case release_outcome::kind::released:
        out[0] = {vote::yes, {}};
        break;
    case release_outcome::kind::not_owner:
        out[0] = {vote::refused, {}};
        break;
    default:
        out[0] = {vote::failed, a.ec ? a.ec : make_error_code(errc::protocol_error)};
    }
}

/// simple/renew.lua over out.size() locks: 1 extended, 0 not ours (any more).
void read_pexpire(std::error_code ec, const resp3::value& v, std::span<answer> out) {
    if (!ec) ec = reply_error(v);
    std::vector<char> ok;
    if (!ec && !lock_protocol::read_renew({}, v, out.size(), ok))
        ec = make_error_code(errc::protocol_error);
    for (std::size_t k = 0; k < out.size(); ++k)
        out[k] = ec ? answer{vote::failed, ec} : answer{ok[k] ? vote::yes : vote::refused, {}};
}

/// What the commands of a round on one lock point into.
struct lock_ref {
    lock_keys keys;
    std::string token; ///< 32 hex chars, 128 random bits, fresh per acquisition
    std::chrono::milliseconds lease{};
};

/// Deletes `ref`'s token on every master, best effort, nobody waiting (a lost round; a
/// cancelled acquisition); the shutdown waits for it (the drain). I/O thread.
void delete_everywhere(redlock_impl& r, std::shared_ptr<const lock_ref> ref) {
    auto fo = std::make_shared<fanout>(r, 1, std::nullopt);
    const auto& k = *ref;
    r.add_delete();
    fo->start(
        ref,
        [&](command& c) { layout().release(c, k.keys, k.token, k.lease, pubsub::mode::classic); },
        &read_delete, [](fanout&, std::size_t) {}, {}, [&r](fanout&) { r.end_delete(); });
}

class redlock_hold;
/// One extension fan-out for `holds` (at most batch_size; I/O thread): every master gets one
/// simple/renew.lua call over all their keys, and each hold has its own round. A won round
/// sets the hold's valid_until; a refusal by a quorum makes it lost (not_owner); anything else
/// leaves it as it was (errc::unavailable). `each(k, ec)` runs when hold k's round is decided,
/// `all()` once every round is (both may be empty).
void extend_all(redlock_impl& r, std::vector<std::shared_ptr<redlock_hold>> holds,
                std::chrono::milliseconds lease,
                std::function<void(std::size_t, std::error_code)> each, std::function<void()> all);

// ---- the hold behind a lease -----------------------------------------------------------------

class redlock_hold final : public hold {
public:
    redlock_hold(std::weak_ptr<redlock_impl> r, std::string name,
                 std::shared_ptr<const lock_ref> ref, bool watchdog,
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
    const lock_ref& ref() const noexcept { return *ref_; }

    void release_blocking(std::error_code& ec) override {
        ec.clear();
        auto r = begin_release(ec);
        if (!r) return;
        auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
        if (r->on_io_thread()) return self->run_release(*r, {});
        completion_flag flag;
        asio::post(r->io(), [&, self, raw = r.get()] { // `r` on this stack keeps it alive
            self->run_release(*raw, [&](std::error_code e) {
                ec = e;
                flag.set();
            });
        });
        flag.wait();
    }

    void release_async(std::function<void(std::error_code)> done) override {
        std::error_code ec;
        auto r = begin_release(ec);
        if (!r) return done(ec);
        auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
        if (r->on_io_thread()) return run_release(*r, std::move(done));
        asio::post(r->io(), [self, w = std::weak_ptr(r), done = std::move(done)]() mutable {
            if (auto live = w.lock())
                self->run_release(*live, std::move(done));
            else
                done(make_error_code(errc::cancelled));
        });
    }

    void extend(std::chrono::milliseconds lease_ms, std::error_code& ec) override {
        ec.clear();
        if (released() || lost()) {
            ec = make_error_code(errc::not_owner);
            return;
        }
        auto r = r_.lock();
        if (!r || r->shut_down()) {
            ec = make_error_code(errc::cancelled);
            return;
        }
        if (lease_ms <= r->options().node_timeout) {
            ec = make_error_code(errc::invalid_argument);
            return;
        }
        if (r->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return;
        }
        auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
        completion_flag flag;
        asio::post(r->io(), [&, self, raw = r.get()] { // `r` on this stack keeps it alive
            self->run_extension(*raw, lease_ms, [&](std::error_code e) {
                ec = e;
                flag.set();
            });
        });
        flag.wait();
    }

    void extend_async(std::chrono::milliseconds lease_ms,
                      std::function<void(std::error_code)> done) override {
        if (released() || lost()) return done(make_error_code(errc::not_owner));
        auto r = r_.lock();
        if (!r || r->shut_down()) return done(make_error_code(errc::cancelled));
        if (lease_ms <= r->options().node_timeout)
            return done(make_error_code(errc::invalid_argument));
        auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
        if (r->on_io_thread()) return run_extension(*r, lease_ms, std::move(done));
        asio::post(r->io(),
                   [self, lease_ms, w = std::weak_ptr(r), done = std::move(done)]() mutable {
                       if (auto live = w.lock())
                           self->run_extension(*live, lease_ms, std::move(done));
                       else
                           done(make_error_code(errc::cancelled));
                   });
    }

    asio::any_io_executor executor() const override {
        auto r = r_.lock();
        return r && !r->shut_down() ? asio::any_io_executor(r->io().get_executor())
                                    : asio::any_io_executor{};
    }

    /// One extension round to `lease` (I/O thread): won sets valid_until, a refusal by a quorum
    /// makes the hold lost (not_owner), anything else leaves it as it was (errc::unavailable).
    /// `done` may be empty (the watchdog).
    void run_extension(redlock_impl& r, std::chrono::milliseconds lease,
                       std::function<void(std::error_code)> done) {
        if (released() || lost() || releasing()) {
            if (done) done(make_error_code(errc::not_owner));
            return;
        }
        std::vector<std::shared_ptr<redlock_hold>> one{
            std::static_pointer_cast<redlock_hold>(shared_from_this())};
        extend_all(r, std::move(one), lease,
                   [done = std::move(done)](std::size_t, std::error_code ec) {
                       if (done) done(ec);
                   },
                   {});
    }

    bool extending() const noexcept { return extending_; }
    void set_extending(bool b) noexcept { extending_ = b; }
    /// Ends the hold by loss / normally, counting it in the redlock's metrics once.
    void end_lost(loss_cause cause) {
        if (!mark_lost()) return;
        if (auto r = r_.lock()) {
            r->metrics().hold_ended(clock::now() - acquired_at_);
            r->metrics().loss(cause);
            log(r->log_opts(), log_level::warning, "lock lost",
                {{"lock", name_}, {"kind", "redlock"}, {"cause", to_string(cause)}});
        }
    }
    void end_released() {
        if (!mark_released()) return;
        if (auto r = r_.lock()) r->metrics().hold_ended(clock::now() - acquired_at_);
    }

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
    std::shared_ptr<redlock_impl> begin_release(std::error_code& ec) {
        if (released()) return nullptr;
        auto r = r_.lock();
        if (!r || !r->begin_delete()) {
            mark_released();
            ec = make_error_code(errc::cancelled);
            return nullptr;
        }
        r->unwatch(this);
        if (lost()) {
            r->end_delete();
            ec = make_error_code(errc::not_owner);
            return nullptr;
        }
        releasing_.store(true, std::memory_order_release);
        return r;
    }

    /// The release round (I/O thread): the token is deleted on every master; released when a
    /// quorum deleted it, lost (not_owner) when a quorum said it was not ours, otherwise ended
    /// as released with the first failure (the keys expire after their lease). The quorum
    /// decides the result, but `done` runs only once every master answered or its command
    /// timed out: a delete still on its way to a slow master is not left behind (a key kept
    /// on one master blocks the next acquirer for a lease when another master is down).
    void run_release(redlock_impl& r, std::function<void(std::error_code)> done) {
        auto self = std::static_pointer_cast<redlock_hold>(shared_from_this());
        auto result = std::make_shared<std::error_code>();
        auto fo = std::make_shared<fanout>(r, 1, std::nullopt);
        const auto& k = *ref_;
        fo->start(
            ref_,
            [&](command& c) {
                layout().release(c, k.keys, k.token, k.lease, pubsub::mode::classic);
            },
            &read_delete,
            [self, result](fanout& f, std::size_t) {
                self->set_votes(f.votes());
                const auto& q = f.round();
                std::error_code ec;
                using rr = client_metrics::release_result;
                auto owner = self->r_.lock();
                if (q.state() == quorum_round::verdict::won) {
                    self->end_released();
                    if (owner) owner->metrics().release(rr::released);
                } else if (q.refused_by_quorum()) {
                    self->end_lost(loss_cause::undetermined);
                    if (owner) owner->metrics().release(rr::not_owner);
                    ec = make_error_code(errc::not_owner);
                } else {
                    self->end_released();
                    if (owner) owner->metrics().release(rr::failed);
                    for (std::size_t i = 0; i < q.nodes() && !ec; ++i)
                        ec = f.vote_of(0, i).ec;
                    if (!ec) ec = make_error_code(errc::unavailable);
                }
                *result = ec;
            },
            [self](fanout& f, std::size_t, std::size_t i) { self->set_vote(f.vote_of(0, i)); },
            [&r, result, done = std::move(done)](fanout&) {
                if (done) done(*result);
                r.end_delete();
            });
    }

    std::weak_ptr<redlock_impl> r_;
    std::string name_;
    std::shared_ptr<const lock_ref> ref_;
    bool watchdog_ = false;
    clock::time_point acquired_at_ = clock::now(); // metrics: made when its round was won
    std::atomic<bool> releasing_{false};
    bool extending_ = false; // I/O thread
    mutable std::mutex votes_mu_;
    std::vector<redlock_vote> votes_; // guarded by votes_mu_
};

void extend_all(redlock_impl& r, std::vector<std::shared_ptr<redlock_hold>> holds,
                std::chrono::milliseconds lease,
                std::function<void(std::size_t, std::error_code)> each, std::function<void()> all) {
    struct batch {
        std::vector<std::shared_ptr<redlock_hold>> holds;
        std::size_t open = 0;
    };
    auto b = std::make_shared<batch>();
    b->holds = std::move(holds);
    b->open = b->holds.size();
    for (auto& h : b->holds)
        h->set_extending(true);
    auto fo = std::make_shared<fanout>(r, b->holds.size(), lease);
    fo->start(
        b,
        [&](command& c) {
            // simple/renew.lua: KEYS = the locks, ARGV = lease, then each lock's token.
            c.script(script_id::simple_renew).number(static_cast<std::int64_t>(b->holds.size()));
            for (const auto& h : b->holds)
                c.arg(h->ref().keys.key);
            c.number(lease.count());
            for (const auto& h : b->holds)
                c.arg(h->ref().token);
        },
        &read_pexpire,
        [&r, b, each = std::move(each), all = std::move(all)](fanout& f, std::size_t k) {
            auto& h = *b->holds[k];
            h.set_extending(false);
            h.set_votes(f.votes(k));
            const auto& q = f.round(k);
            std::error_code ec;
            if (h.released() || h.lost() || h.releasing()) {
                ec = make_error_code(errc::not_owner);
            } else if (q.state() == quorum_round::verdict::won) {
                h.set_valid_until(q.valid_until());
            } else if (q.refused_by_quorum()) {
                r.unwatch(&h);
                h.end_lost(loss_cause::undetermined); // a quorum said "not ours": gone or taken
                ec = make_error_code(errc::not_owner);
            } else {
                ec = make_error_code(errc::unavailable);
            }
            if (each) each(k, ec);
            if (--b->open == 0 && all) all();
        },
        [b](fanout& f, std::size_t k, std::size_t i) { b->holds[k]->set_vote(f.vote_of(k, i)); });
}

// ---- the acquisition: rounds until won, the wait is over, or cancelled -----------------------

class acquire_op final : public std::enable_shared_from_this<acquire_op> {
public:
    using done_fn = std::function<void(std::error_code, redlock_acquisition)>;

    acquire_op(std::shared_ptr<redlock_impl> r, std::string name, lock_keys keys,
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
    void start() {
        self_ = shared_from_this(); // alive until finish(); handlers hold weak references
        r_->track(self_);
        asio::post(r_->io(), [w = weak_from_this()] {
            if (auto self = w.lock()) self->round();
        });
    }

    /// I/O thread (shutdown): a round in flight is deleted everywhere; the caller gets
    /// errc::cancelled.
    void cancel() {
        if (finished_) return;
        timer_.cancel();
        if (current_) delete_everywhere(*r_, current_);
        finish(make_error_code(errc::cancelled), {});
    }

private:
    void round() {
        if (finished_) return;
        if (r_->shut_down()) return finish(make_error_code(errc::cancelled), {});
        ++rounds_;
        auto ref = std::make_shared<lock_ref>();
        ref->keys = keys_;
        ref->token = random_token();
        ref->lease = lease_;
        current_ = ref;
        // The hold a won round made, for answers that come after the decision (the op may be
        // gone by then).
        auto won = std::make_shared<std::weak_ptr<redlock_hold>>();
        auto fo = std::make_shared<fanout>(*r_, 1, lease_);
        fo->start(
            ref, [&](command& c) { layout().attempt(c, ref->keys, ref->token, ref->lease); },
            &read_set,
            [w = weak_from_this(), ref, won](fanout& f, std::size_t) {
                if (auto self = w.lock()) *won = self->decided(f, ref);
            },
            [won](fanout& f, std::size_t, std::size_t i) {
                if (auto h = won->lock()) h->set_vote(f.vote_of(0, i));
            });
    }

    /// The verdict of the current round; returns the hold when it was won.
    std::weak_ptr<redlock_hold> decided(fanout& f, const std::shared_ptr<lock_ref>& ref) {
        if (finished_) return {}; // cancelled meanwhile: cancel() deleted the token
        const auto& q = f.round();
        if (q.state() == quorum_round::verdict::won) {
            current_.reset();
            auto h = std::make_shared<redlock_hold>(r_, name_, ref, watchdog_, f.votes());
            h->set_valid_until(q.valid_until());
            r_->watch(h);
            finish({}, {access::make_lease(h), f.votes(), rounds_});
            return h;
        }
        delete_everywhere(*r_, ref);
        current_.reset();
        last_votes_ = f.votes();
        const auto now = clock::now();
        thread_local std::minstd_rand rng{std::random_device{}()};
        const auto next = schedule_.next(rounds_, now, static_cast<std::uint32_t>(rng()));
        if (!next) {
            finish({}, {lease{}, std::move(last_votes_), rounds_});
            return {};
        }
        timer_.expires_at(*next);
        timer_.async_wait([w = weak_from_this()](std::error_code ec) {
            if (auto self = w.lock(); self && !ec) self->round();
        });
        return {};
    }

    void finish(std::error_code ec, redlock_acquisition a) {
        finished_ = true;
        // Counted under the simple kind: Redlock takes the simple-lock layout on every master.
        r_->metrics().acquisition(1, ec, static_cast<bool>(a.held), false,
                                  clock::now() - started_at_);
        if (a.votes.empty()) a.votes = std::move(last_votes_);
        if (a.rounds == 0) a.rounds = rounds_;
        r_->untrack(this);
        auto keep = std::move(self_);
        auto done = std::move(done_);
        done(ec, std::move(a));
    }

    std::shared_ptr<redlock_impl> r_;
    clock::time_point started_at_ = clock::now(); // metrics: the wait starts here
    std::shared_ptr<acquire_op> self_;            // from start() to finish()
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
    std::shared_ptr<const lock_ref> current_; // the round in flight
    std::vector<redlock_vote> last_votes_;
};

// ---- redlock_impl ----------------------------------------------------------------------------

namespace {

const redlock_options& checked(const redlock_options& o) {
    using std::chrono::milliseconds;
    if (o.masters.empty()) throw error(errc::configuration_error, "dlock: Redlock needs masters");
    for (const auto& m : o.masters)
        if (m.kind != topology::standalone)
            throw error(errc::configuration_error,
                        "dlock: every Redlock master must be a standalone server (" + to_string(m) +
                            ")");
    if (o.node_timeout <= milliseconds(0) || o.retry_delay < milliseconds(0) ||
        o.retry_jitter < milliseconds(0))
        throw error(errc::configuration_error,
                    "dlock: Redlock node_timeout must be positive and retry_delay/jitter "
                    "not negative");
    if (o.watchdog_lease < milliseconds(30) || o.watchdog_lease <= o.node_timeout)
        throw error(errc::configuration_error,
                    "dlock: Redlock watchdog_lease must be at least 30 ms and above node_timeout");
    return o;
}

net::target target_of(const client_options& o) {
    net::target t;
    if (!o.unix_socket.empty()) {
        t.unix_socket = o.unix_socket;
    } else {
        t.host = o.endpoints.at(0).host;
        t.port = o.endpoints.at(0).port;
    }
    return t;
}

} // namespace

redlock_impl::redlock_impl(redlock_options opts)
    : opts_(checked(opts))
    , work_(asio::make_work_guard(io_))
    , tick_timer_(io_)
    , loss_timer_(io_)
    , drain_timer_(io_) {
    for (auto m : opts_.masters) {
        if (m.command_timeout <= std::chrono::milliseconds(0) ||
            m.connect_timeout <= std::chrono::milliseconds(0))
            throw error(errc::configuration_error, "dlock: timeouts must be positive");
        // Every call goes through the I/O thread (rounds are decided there): no sync lane.
        m.sync_io = blocking_io::io_thread;
        addresses_.push_back(to_string(m));
        nodes_.push_back(std::make_unique<node>(io_, m, target_of(m), pubsub::mode::classic));
    }
}

redlock_impl::~redlock_impl() {
    shutdown();
}

void redlock_impl::start() {
    for (auto& n : nodes_)
        n->start();
    asio::post(io_, [this] { arm_tick(); });
    thread_ = std::thread([this] {
        thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
        io_.run();
    });
    thread_id_.store(thread_.get_id(), std::memory_order_release);
}

void redlock_impl::shutdown() {
    shut_.store(true); // seq_cst: begin_delete() counts, then reads shut_
    if (!thread_.joinable()) return;
    asio::post(io_, [this] { drain(); });
    if (on_io_thread())
        thread_.detach(); // the drain goes on after this returns
    else
        thread_.join(); // until stop_io() stopped the I/O thread
}

/// I/O thread: cancels the acquisitions (their rounds are deleted everywhere) and the watchdog,
/// then waits until every delete in flight completed, for at most the longest command_timeout
/// (each command times out by then; the timer is a backstop), and stops.
void redlock_impl::drain() {
    std::vector<std::shared_ptr<acquire_op>> ops;
    {
        std::lock_guard lk(ops_mu_);
        for (auto& [p, w] : ops_)
            if (auto op = w.lock()) ops.push_back(std::move(op));
    }
    for (auto& op : ops)
        op->cancel();
    {
        std::lock_guard lk(watch_mu_);
        stopped_ = true;
        holds_.clear();
    }
    tick_timer_.cancel();
    loss_timer_.cancel();
    draining_ = true;
    auto bound = std::chrono::milliseconds(0);
    for (const auto& m : opts_.masters)
        bound = std::max(bound, m.command_timeout);
    // The connection checks its deadlines every command_timeout / 10, at most 100 ms.
    drain_timer_.expires_after(bound + std::chrono::milliseconds(200));
    drain_timer_.async_wait([this](std::error_code ec) {
        if (!ec) stop_io();
    });
    drained();
}

void redlock_impl::drained() {
    if (draining_ && deletes_.load() == 0) stop_io();
}

void redlock_impl::stop_io() {
    if (stopping_) return;
    stopping_ = true;
    drain_timer_.cancel();
    for (auto& n : nodes_)
        n->stop();
    work_.reset();
    asio::post(io_, [this] { io_.stop(); });
}

void redlock_impl::track(const std::shared_ptr<acquire_op>& op) {
    std::lock_guard lk(ops_mu_);
    ops_.emplace(op.get(), op);
}

void redlock_impl::untrack(const acquire_op* op) {
    std::lock_guard lk(ops_mu_);
    ops_.erase(op);
}

void redlock_impl::watch(const std::shared_ptr<redlock_hold>& h) {
    const auto until = h->valid_until();
    {
        std::lock_guard lk(watch_mu_);
        if (stopped_) return;
        holds_.emplace(h.get(), h);
        if (until >= loss_armed_) return;
        loss_armed_ = until;
    }
    asio::post(io_, [this, until] { arm_loss(until); });
}

void redlock_impl::unwatch(const redlock_hold* h) {
    std::lock_guard lk(watch_mu_);
    holds_.erase(h);
}

void redlock_impl::arm_tick() {
    tick_timer_.expires_after(opts_.watchdog_lease / 3);
    tick_timer_.async_wait([this](std::error_code ec) {
        if (ec) return;
        tick();
        arm_tick();
    });
}

void redlock_impl::tick() {
    std::vector<std::shared_ptr<redlock_hold>> due;
    {
        std::lock_guard lk(watch_mu_);
        if (stopped_) return;
        for (auto& [p, h] : holds_)
            if (h->watchdog() && !h->extending() && !h->releasing()) due.push_back(h);
    }
    // One fan-out per batch of up to batch_size holds: every master gets one renew script
    // over the batch's keys, and each hold is decided by its own quorum round.
    for (std::size_t first = 0; first < due.size(); first += batch_size) {
        const auto last = std::min(due.size(), first + batch_size);
        std::vector<std::shared_ptr<redlock_hold>> batch(
            due.begin() + static_cast<std::ptrdiff_t>(first),
            due.begin() + static_cast<std::ptrdiff_t>(last));
        extend_all(*this, std::move(batch), opts_.watchdog_lease, {},
                   [this] { check_deadlines(); });
    }
}

void redlock_impl::check_deadlines() {
    const auto now = clock::now();
    std::vector<std::shared_ptr<redlock_hold>> lost;
    auto next = clock::time_point::max();
    {
        std::lock_guard lk(watch_mu_);
        if (stopped_) return;
        for (auto it = holds_.begin(); it != holds_.end();) {
            auto& h = it->second;
            if (h->released() || h->lost()) {
                it = holds_.erase(it);
                continue;
            }
            const auto until = h->valid_until();
            if (!h->releasing() && until <= now) {
                lost.push_back(std::move(h));
                it = holds_.erase(it);
                continue;
            }
            next = std::min(next, until);
            ++it;
        }
        loss_armed_ = next;
    }
    for (auto& h : lost)
        h->end_lost(loss_cause::deadline);
    if (next != clock::time_point::max()) arm_loss(next);
}

void redlock_impl::arm_loss(clock::time_point when) {
    {
        std::lock_guard lk(watch_mu_);
        if (stopped_ || when > loss_armed_) return;
    }
    loss_timer_.expires_at(when);
    loss_timer_.async_wait([this](std::error_code ec) {
        if (ec) return;
        check_deadlines();
    });
}

} // namespace dlock::detail

// ---- the public facade -----------------------------------------------------------------------

namespace dlock {

namespace {
redlock_options with_urls(const std::vector<std::string>& urls, redlock_options o) {
    o.masters.clear();
    for (const auto& u : urls)
        o.masters.push_back(parse_url(u));
    return o;
}
} // namespace

redlock::redlock(const std::vector<std::string>& urls, redlock_options opts)
    : redlock(with_urls(urls, std::move(opts))) {}

redlock::redlock(redlock_options opts)
    : impl_(std::make_shared<detail::redlock_impl>(std::move(opts))) {
    impl_->start();
}

redlock::~redlock() {
    if (impl_) impl_->shutdown();
}
redlock::redlock(redlock&&) noexcept = default;
redlock& redlock::operator=(redlock&& o) noexcept {
    if (this != &o) {
        if (impl_) impl_->shutdown();
        impl_ = std::move(o.impl_);
    }
    return *this;
}

const redlock_options& redlock::options() const noexcept {
    return impl_->options();
}
std::size_t redlock::masters() const noexcept {
    return impl_->size();
}
metrics_snapshot redlock::metrics() const {
    return impl_->metrics_snapshot_now();
}

std::size_t redlock::quorum() const noexcept {
    return detail::quorum_round::quorum_of(impl_->size());
}

lease redlock::acquire(std::string_view name, const acquire_options& opts) {
    std::error_code ec;
    auto l = acquire(name, opts, ec);
    throw_if(ec);
    return l;
}

lease redlock::acquire(std::string_view name, const acquire_options& opts, std::error_code& ec) {
    return acquire_with_votes(name, opts, ec).held;
}

redlock_acquisition redlock::acquire_with_votes(std::string_view name, const acquire_options& opts,
                                                std::error_code& ec) {
    ec.clear();
    if (impl_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    detail::completion_flag flag;
    redlock_acquisition out;
    start_acquire(std::string(name), opts, [&](std::error_code e, redlock_acquisition a) {
        ec = e;
        out = std::move(a);
        flag.set();
    });
    flag.wait();
    return out;
}

void redlock::start_acquire(std::string name, const acquire_options& opts,
                            std::function<void(std::error_code, redlock_acquisition)> done) {
    auto r = impl_;
    std::error_code ec;
    auto keys = detail::protocol_of(lock_kind::simple).keys(name, ec);
    const auto lease_ms = opts.lease.value_or(r->options().watchdog_lease);
    if (!ec &&
        (lease_ms <= r->options().node_timeout || (opts.retry && opts.retry->attempts == 0) ||
         (opts.retry && (opts.retry->delay.count() < 0 || opts.retry->jitter.count() < 0))))
        ec = make_error_code(errc::invalid_argument);
    if (!ec && r->shut_down()) ec = make_error_code(errc::cancelled);
    if (ec) return asio::post(r->io(), [done = std::move(done), ec] { done(ec, {}); });
    detail::retry_schedule s;
    const auto wait = opts.wait ? std::max(*opts.wait, std::chrono::milliseconds(0))
                                : std::optional<std::chrono::milliseconds>{};
    if (wait) s.wait_deadline = std::chrono::steady_clock::now() + *wait;
    if (wait && wait->count() == 0) s.attempts = 1;
    s.delay = r->options().retry_delay;
    s.jitter = r->options().retry_jitter;
    if (opts.retry) {
        s.attempts = s.attempts == 1 ? 1 : opts.retry->attempts;
        s.delay = opts.retry->delay;
        s.jitter = opts.retry->jitter;
    }
    auto op = std::make_shared<detail::acquire_op>(r, std::move(name), std::move(keys), lease_ms,
                                                   !opts.lease.has_value(), s, std::move(done));
    op->start();
}

std::vector<redlock_vote> redlock::votes(const lease& l) const {
    auto h = std::dynamic_pointer_cast<detail::redlock_hold>(detail::access::state(l));
    return h ? h->votes() : std::vector<redlock_vote>{};
}

asio::any_io_executor redlock::get_executor() const {
    return impl_->io().get_executor();
}

} // namespace dlock
