// core::wait_fsm: the wait loop of one acquisition, as a sans-I/O state machine.
//
//   attempt ──held──> [ttl query] ──> subscribe ──confirmed──> last attempt ──held──> sleep
//      ^                                  (covered: skip the last attempt)               │
//      └──────────── wake (unlock message, hand-over refused) / timer (holder's TTL) ────┘
//
// The shell (redis/acquire_op.cpp) feeds it events with resume(event) and carries out the action
// it returns: send a command, join a channel, arm a timer, finish. It never touches sockets,
// timers or clocks itself (the time comes in every event), so every transition is unit-tested
// by hand (tests/unit/core/core_wait_fsm_test.cpp). Nothing in it knows a lock kind: what an
// attempt's reply means is decided before it arrives here (attempt_outcome).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <system_error>

namespace dlock::detail {

/// What one attempt's reply meant.
struct attempt_outcome {
    enum class kind { acquired, reentered, held, error } what = kind::error;
    std::uint64_t token = 0;  ///< acquired: the fencing token (0: the kind has none)
    std::int64_t count = 1;   ///< reentered: the new hold count
    std::int64_t ttl_ms = -1; ///< held: PTTL of the holder (-1 none/unknown, -2 vanished)
    std::error_code ec{};     ///< error: transport, server error reply, or protocol_error
};

/// What a hand-over script that named this waiter did, for the waiter.
enum class handover_result { handed_over, published, unknown, ambiguous };

/// Whether an attempt's error means "try again, maybe elsewhere" when the server can move.
bool transient_error(std::error_code ec) noexcept;

class wait_fsm {
public:
    using clock = std::chrono::steady_clock;

    /// Fixed for the life of one acquisition.
    struct params {
        std::optional<clock::time_point> deadline; ///< nullopt: wait forever
        bool single_try = false;                   ///< wait == 0: one attempt, never sleep
        /// Poll instead of subscribing: `spin_attempts` tries in total, `spin_delay` plus a
        /// uniform jitter in [0, spin_jitter] between them (acquire_options::retry).
        std::optional<unsigned> spin_attempts;
        std::chrono::milliseconds spin_delay{};
        std::chrono::milliseconds spin_jitter{};
        std::uint32_t seed = 1; ///< for the jitter
        /// The kind's refusal does not carry the holder's PTTL: ask for it before sleeping.
        bool ttl_after_refusal = false;
        /// No earlier hold by this owner: what an ambiguous or late reply may have given us
        /// can be undone without hurting an earlier hold.
        bool fresh_owner = true;
        /// The server can move (Sentinel): an attempt that failed because it was unreachable,
        /// refused by a replica or not ready (unavailable, ambiguous, readonly, server_busy)
        /// is tried again after `transient_delay`, until the deadline; without a deadline for
        /// at most `transient_budget` of failures in a row. Never reported as "held".
        bool retry_transient = false;
        std::chrono::milliseconds transient_delay{20};
        std::chrono::milliseconds transient_budget{30000};
    };

    enum class event_type {
        start,          ///< make the first attempt
        start_queued,   ///< sleep at once (another owner of this client holds the lock, or a
                        ///< polite release gives other clients a head start); ttl_ms bounds it
        start_refused,  ///< the caller's own first attempt was refused (ttl_ms, sent_at)
        attempt_reply,  ///< attempt
        ttl_reply,      ///< ttl_ms (-1 unknown)
        subscribed,     ///< the shell joined the channel; covered: it was already confirmed
                        ///< before the last attempt was sent
        active,         ///< the channel subscription is confirmed
        wake,           ///< an unlock message (or a stored permit, or a reconnect)
        timer,          ///< the armed timer fired
        cancel,         ///< the client shuts down
        handover_begin, ///< a release of this client names this sleeping waiter
        handover_done,  ///< handover (and token)
        paused,         ///< instead of an attempt: acquisitions are paused for ttl_ms more
                        ///< (lock-delay after a failover); no command was sent
    };

    struct event {
        event_type type = event_type::start;
        clock::time_point now{};
        attempt_outcome attempt{};
        std::int64_t ttl_ms = -1;    ///< ttl_reply, start_refused; start_queued: the bound
        clock::time_point sent_at{}; ///< start_refused: when that attempt was sent
        bool covered = false;        ///< subscribed
        handover_result handover = handover_result::unknown;
        std::uint64_t token = 0; ///< handover_done
    };

    enum class action_type {
        none,
        send_attempt,   ///< send the kind's attempt command
        send_ttl_query, ///< ask for the holder's PTTL
        subscribe,      ///< join the channel, then resume(subscribed) saying whether it was covered
        sleep,          ///< sleep until a wake or `until` (on_channel: as a sleeper of the channel)
        wait_active,    ///< wait for `active`, or the timer at `until`
        done,           ///< finished: `ec`, or acquired / not acquired
    };

    struct action {
        action_type type = action_type::none;
        clock::time_point until = clock::time_point::max(); ///< sleep/wait_active: the timer
        bool on_channel = false;    ///< sleep: register as a sleeper (false: timer only, spin)
        bool join_channel = false;  ///< sleep: join the channel first (queued start)
        bool stop_sleeping = false; ///< the waiter left the channel's sleepers by timer
        bool undo = false; ///< first release what an ambiguous or late reply may have given
        bool leave_channel = false;  ///< done: the waiter is on the channel and must leave it
        std::error_code ec{};        ///< done
        bool acquired = false;       ///< done
        bool reentered = false;      ///< done
        std::uint64_t token = 0;     ///< done
        std::int64_t count = 1;      ///< done
        clock::time_point sent_at{}; ///< done: when the winning attempt was sent
    };

    enum class state {
        idle,
        trying,
        ttl_query,
        subscribing,
        sleeping,
        handover,
        paused, ///< waiting out a lock-delay or a transient failure (timer only)
        finished
    };

    explicit wait_fsm(params p);

    action resume(const event& ev);

    state current() const noexcept { return state_; }
    /// When the last attempt was sent (a subscription confirmed before it covers it).
    clock::time_point sent_at() const noexcept { return sent_at_; }
    /// Asleep on the channel, so a release of this client may hand the lock over to it.
    bool may_take_handover() const noexcept {
        return state_ == state::sleeping && !p_.spin_attempts;
    }

private:
    action attempt(clock::time_point now);
    action refused(std::int64_t ttl, clock::time_point now);
    action not_acquired(std::int64_t ttl, clock::time_point now);
    action after_subscribed(std::int64_t ttl, clock::time_point now);
    action pause_until(clock::time_point until);
    action finish(std::error_code ec);
    action finish(const attempt_outcome& out);
    bool expired(clock::time_point now) const noexcept {
        return p_.deadline && now >= *p_.deadline;
    }
    clock::time_point deadline_or_max() const noexcept {
        return p_.deadline ? *p_.deadline : clock::time_point::max();
    }

    params p_;
    state state_ = state::idle;
    clock::time_point sent_at_{};
    bool subscribed_ = false;
    std::int64_t pending_ttl_ = -1;
    unsigned tries_ = 0;
    std::optional<clock::time_point> first_transient_; ///< of the failures in a row
    std::error_code transient_ec_;                     ///< the last of them
    std::minstd_rand rng_;
};

/// When a refused waiter tries again if no unlock message comes: at the holder's expiry
/// (now + ttl) but never after the deadline. A negative ttl (no TTL, or unknown) waits for the
/// message or the deadline only.
std::chrono::steady_clock::time_point sleep_until(std::chrono::steady_clock::time_point now,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::int64_t ttl_ms);

} // namespace dlock::detail
