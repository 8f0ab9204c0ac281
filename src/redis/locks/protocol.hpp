// locks::protocol: everything dlock knows about one lock kind on Redis, in one place.
//
// A protocol owns its key layout (and checks that every key of a lock shares one hash slot),
// the commands of an attempt, a release, a batched renewal, a hand-over and a forced unlock,
// the reading of each reply, the wake rule of its unlock messages, whether it has a fencing
// token, and what `dlock status` shows. Nothing outside src/redis/locks/<kind>/ tests a kind:
// the acquire, release and renewal code asks the protocol of the hold or request at hand.
//
// Adding a kind: a folder src/redis/locks/<kind>/ with protocol.cpp (a class derived from
// lock_protocol) and its .lua scripts (embedded and named by the build, e.g.
// <kind>/acquire.lua -> script_id::<kind>_acquire), plus one line in registry.cpp. A kind that
// users name needs a lock_kind enumerator and, if it has a facade of its own, a public type.
#pragma once

#include "core/wait_fsm.hpp"
#include "redis/pubsub/mode.hpp"
#include "redis/scripts.hpp"

#include <dlock/error.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/resp3.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::detail {

/// The keys of one lock; all in `slot` (checked when they are made).
struct lock_keys {
    std::string key;       ///< N
    std::string channel;   ///< unlock channel
    std::string token_key; ///< fencing counter (empty: the kind has none)
    // A kind's further keys (the fair lock's queue and deadlines) are derived from N when a
    // command is built (command::own), not stored: every hold keeps its lock_keys, and 10,000
    // held locks must stay under 1 KiB each.
    std::uint16_t slot = 0;
};

/// What a protocol needs of a hold: the lock's keys and the owner that holds it. The Redis
/// hold (redis/hold.hpp, redis_hold) is one; the protocols see only this part of it.
struct lock_holder {
    lock_keys keys;
    std::string owner; ///< reentrant: "<client-id>:<owner-id>"; simple: the 32-hex token
};

/// One command being built: views into strings that outlive it, plus a few strings of its own
/// (numbers). Not movable: its views may point into its own strings. Reused across attempts.
class command {
public:
    command() = default;
    command(const command&) = delete;
    command& operator=(const command&) = delete;

    /// Starts `EVALSHA <sha> ...`, with the script's text as the NOSCRIPT fallback.
    command& script(script_id id);
    /// Starts a plain command.
    command& plain(std::string_view name);
    command& arg(std::string_view a) {
        args_.push_back(a);
        return *this;
    }
    /// Appends a string this command keeps (four without an allocation of their own; a
    /// semaphore's renewal batch keeps one per permit).
    command& own(std::string s);
    command& number(std::int64_t n) { return own(std::to_string(n)); }

    std::span<const std::string_view> args() const noexcept { return args_; }
    std::string_view eval_fallback() const noexcept { return fallback_; }
    bool empty() const noexcept { return args_.empty(); }

private:
    /// Room for the arguments of every single-lock command in one allocation (a lock's
    /// commands have at most 12; a renewal batch grows it once).
    void reserve() {
        if (args_.capacity() < 16) args_.reserve(16);
    }
    void clear() noexcept {
        args_.clear();
        fallback_ = {};
        owned_count_ = 0;
        more_.clear();
    }
    std::vector<std::string_view> args_;
    std::string_view fallback_;
    std::array<std::string, 4> owned_;
    std::size_t owned_count_ = 0;
    std::vector<std::unique_ptr<std::string>> more_; // past the fourth (stable addresses)
};

/// What a release's reply meant. A malformed reply is errc::protocol_error, never not_owner:
/// only the server saying so makes a hold lost.
struct release_outcome {
    enum class kind { released, still_held, not_owner, error } what = kind::error;
    std::error_code ec; ///< error
    /// released: how many connections received the unlock message (0: unknown or none)
    std::int64_t receivers = 0;
};

/// What a hand-over script's reply meant, for the releasing caller and for the waiter.
struct handover_reading {
    release_outcome releaser;
    handover_result waiter = handover_result::unknown;
    std::uint64_t token = 0; ///< handed over: the waiter's fencing token (0: none)
};

/// Who waits on a lock's unlock messages, for `dlock status`.
struct layout_info {
    std::string_view data_type; ///< Redis TYPE of N when held: "hash" or "string"
};

class lock_protocol {
public:
    virtual ~lock_protocol() = default;

    /// Stable name ("reentrant", "simple", "read", ...): thread-hold registry keys, status.
    virtual std::string_view name() const noexcept = 0;
    /// Small index in the registry (local bookkeeping per kind).
    std::size_t index() const noexcept { return index_; }

    /// The keys of the lock `name` (all of them in one hash slot). Errors: errc::invalid_argument
    /// for an empty name, one over 4096 bytes, or one whose keys would fall into different cluster
    /// slots ("a{}b").
    lock_keys keys(std::string_view name, std::error_code& ec) const;
    /// Re-entry by the same owner is counted on the server (owner = client id + thread or
    /// handle); otherwise every acquisition has a fresh random token as its owner.
    virtual bool reentrant() const noexcept = 0;
    virtual bool has_fencing_token() const noexcept = 0;
    /// False for the stand-in of a lock_kind only other backends offer (registry.cpp): its
    /// keys() fail with errc::unsupported, so nothing of it is ever sent.
    virtual bool offered() const noexcept { return true; }
    virtual layout_info layout() const noexcept = 0;

    /// The attempt of `owner` with `lease_ms`.
    virtual void attempt(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease) const = 0;
    /// The attempt of an acquisition that may wait: a kind whose waiters queue on the server
    /// joins (or refreshes its place in) the queue when refused; `place_timeout` is how long
    /// a queued waiter keeps its place without trying again. Others: attempt().
    virtual void waiting_attempt(command& c, const lock_keys& k, std::string_view owner,
                                 std::chrono::milliseconds lease,
                                 std::chrono::milliseconds /*place_timeout*/) const {
        attempt(c, k, owner, lease);
    }
    /// The attempt of an acquisition that carries a value its grant stores (a campaign: the
    /// election's leader record), and the pub/sub mode of the message the grant sends. Only
    /// called for a request with a payload (acquire_request::payload); the default ignores it.
    virtual void payload_attempt(command& c, const lock_keys& k, std::string_view owner,
                                 std::chrono::milliseconds lease, std::string_view /*payload*/,
                                 pubsub::mode /*m*/) const {
        attempt(c, k, owner, lease);
    }
    virtual attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const = 0;
    /// Waiters queue on the server (a fair lock): the order comes from there, so a waiter
    /// never queues locally behind this client's holder, a local hand-over goes only to the
    /// head of that queue, and one that gives up leaves the queue (abandon).
    virtual bool queues_on_server() const noexcept { return false; }
    /// The channel `owner` waits on: the lock's channel, or one of its own (a fair lock wakes
    /// exactly the head of its queue).
    virtual std::string waiter_channel(const lock_keys& k, std::string_view /*owner*/) const {
        return k.channel;
    }
    /// The key by which a waiting writer holds new readers back (the read-write lock); "" for
    /// kinds without one. For tools (dlock status).
    virtual std::string intent_key(const lock_keys& /*k*/) const { return {}; }
    /// A waiting acquisition of `owner` gave up (its wait ended, not acquired, or an
    /// ambiguous attempt is undone): undoes what its waiting attempts announced. Returns false
    /// (no command) for kinds that announce nothing, the default; the fair lock leaves its
    /// queue, the read-write lock's writer withdraws its intent marker.
    virtual bool abandon(command& /*c*/, const lock_keys& /*k*/, std::string_view /*owner*/,
                         pubsub::mode /*m*/) const {
        return false;
    }
    /// Holds of different owners coexist (readers): a new acquisition does not sleep behind
    /// this client's own holds of the kind without asking the server (hold_registry::held_here).
    virtual bool shared_holds() const noexcept { return false; }
    /// A re-entry's lease never shortens the lock (its TTL stays the longest of the holds'):
    /// a re-entered hold stays valid until the later of its old and new bounds. Otherwise a
    /// re-entry's lease replaces the lock's TTL (Redisson RLock).
    virtual bool reentry_keeps_longest_lease() const noexcept { return false; }
    /// A refusal does not carry the holder's PTTL: the waiter asks with ttl_query before
    /// sleeping on it.
    virtual bool ttl_after_refusal() const noexcept { return false; }
    void ttl_query(command& c, const lock_keys& k) const;
    static std::int64_t read_ttl(std::error_code ec, const resp3::value& r) noexcept;

    /// Releases one hold of `owner` and, when it was the last, publishes the unlock message.
    virtual void release(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease, pubsub::mode m) const = 0;
    virtual release_outcome read_release(std::error_code ec, const resp3::value& r) const = 0;

    /// Renews `holds` (all of this kind, on one node and, where it matters, one slot) to
    /// `lease`; read_renew sets ok[i] for each hold the server still gave to its owner and
    /// returns false for a reply that is not one answer per hold (nothing renewed).
    virtual void renew(command& c, std::span<const lock_holder* const> holds,
                       std::chrono::milliseconds lease) const = 0;
    static bool read_renew(std::error_code ec, const resp3::value& r, std::size_t n,
                           std::vector<char>& ok);

    /// The kind can pass a finally released lock to a waiter of the same client in one script
    /// (local hand-over). A kind whose order must come from the server (a fair queue) says no.
    virtual bool has_handover() const noexcept { return false; }
    /// The final release of `from` that gives the lock to `to_owner` (with `to_lease`) in one
    /// script unless another client waits (`check_others`). Only when has_handover().
    virtual void handover(command& c, const lock_holder& from, std::string_view to_owner,
                          std::chrono::milliseconds to_lease, bool check_others,
                          pubsub::mode m) const;
    virtual handover_reading read_handover(std::error_code ec, const resp3::value& r) const;

    /// How many holds `owner` has on the lock (0: none): the query and the reading of its reply
    /// (errc::protocol_error for a reply this kind never stores).
    virtual void hold_count(command& c, const lock_keys& k, std::string_view owner) const = 0;
    virtual std::int64_t read_hold_count(const resp3::value& r, std::string_view owner,
                                         std::error_code& ec) const = 0;

    /// Whether the lock is held (basic_mutex::is_locked): the query, whose reply is integer 1
    /// when it is. The default is EXISTS N; a kind with modes asks about its own.
    virtual void locked_query(command& c, const lock_keys& k) const;

    /// Deletes the lock whoever holds it and wakes a waiter; read: true if there was one.
    virtual void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const = 0;

    /// Whom an unlock message of this kind wakes.
    virtual pubsub::wake_rule wake_rule() const noexcept = 0;

    /// The waiter queue (LIST) of a kind that queues on the server (the fair lock), derived
    /// from N; "" for the other kinds.
    std::string queue_key(const lock_keys& k) const;
    /// The fair lock's waiter deadlines; the semaphore's permit expiries (ZSET); "" otherwise.
    virtual std::string timeout_key(const lock_keys& k) const;

protected:
    /// The companion key prefixes of this kind: the unlock channel and the fencing counter
    /// ("" for none), as Redisson's prefixName(p, N).
    virtual std::string_view channel_prefix() const noexcept = 0;
    virtual std::string_view token_prefix() const noexcept { return {}; }
    /// The queue and deadline key prefixes of a kind that queues on the server ("" for none).
    virtual std::string_view queue_prefix() const noexcept { return {}; }
    virtual std::string_view deadline_prefix() const noexcept { return {}; }

    /// Building blocks shared by kinds.
    /// `EVALSHA <id> n key1..keyn lease owner1..ownern` (the renew scripts' layout).
    static void renew_batch(command& c, script_id id, std::span<const lock_holder* const> holds,
                            std::chrono::milliseconds lease);
    /// A transport failure or an error reply of a hand-over: fills `h` and returns true.
    static bool handover_failed(std::error_code ec, const resp3::value& r, handover_reading& h);
    /// The arguments every hand-over script takes after its keys: the unlock message, the
    /// releasing owner, the publish command, the NUMSUB command ("" when `check_others` is
    /// false), the waiting owner and its lease.
    static void handover_args(command& c, std::string_view message, const lock_holder& from,
                              std::string_view to_owner, std::chrono::milliseconds to_lease,
                              bool check_others, pubsub::mode m);
    /// The reply of a hand-over script that gives the waiter a fencing token (reentrant and
    /// write): {2, token} handed over, 1 released and published (another client waits), nil
    /// not the owner; anything else is errc::protocol_error.
    static handover_reading read_token_handover(std::error_code ec, const resp3::value& r);
    /// The lock left the releaser (handed over or published): what the waiter got.
    static handover_reading released_with(handover_result waiter, std::uint64_t token = 0) {
        return {{release_outcome::kind::released, {}}, waiter, token};
    }
    /// common/force_unlock.lua on N and the kind's channel.
    static void force_unlock_script(command& c, const lock_keys& k, pubsub::mode m);

private:
    friend struct protocol_registry;
    std::size_t index_ = 0;
};

/// The protocol of a public lock kind; for a kind Redis does not offer (the lease tables of
/// other backends), a stand-in whose keys() fail with errc::unsupported.
const lock_protocol& protocol_of(lock_kind kind) noexcept;
/// The metrics slot of `p` (core/kinds.hpp): a built-in kind's own, else the custom slot.
std::size_t metrics_slot_of(const lock_protocol& p) noexcept;
/// The lock kinds Redis offers, in the order they were registered.
std::vector<lock_kind> offered_kinds();
/// Adds a protocol (tests register a throwaway kind this way); returns its index. Not
/// thread-safe against running clients: call before using it.
std::size_t register_protocol(lock_protocol& p);

/// Shared readers.
std::error_code reply_error(const resp3::value& v) noexcept;
/// The tagged pair most acquire scripts answer: {1, token >= 1} acquired fresh, {0, ms} held (ms:
/// how long until it may free, -1 unknown) and, when `reentry`, {2, count >= 2} re-entered. A
/// transport or server error is passed on; any other shape is errc::protocol_error.
attempt_outcome read_counted_attempt(std::error_code ec, const resp3::value& r,
                                     bool reentry) noexcept;
/// A final release's `1 + receivers` (any integer >= 1): released, and how many connections got
/// the message.
bool read_published_release(const resp3::value& r, release_outcome& out) noexcept;
/// Redisson's LockPubSub rule: "1" (a read unlock) wakes every waiter, anything else one.
pubsub::wake redisson_wake_rule(std::string_view payload) noexcept;

} // namespace dlock::detail
