// detail::hold_registry: the client-local bookkeeping of holds and waiters, with one owner.
// - thread holds: a dlock::mutex's hold per (kind, owner, name), so two mutex objects of one
//   name in one thread share the hold, as two Redisson RLock objects do;
// - local hold counts: fresh acquisitions of this client that have not ended, per lock (a
//   waiter of a lock held here sleeps without asking the server; see local_begin);
// - waiting acquisitions (a count, for the sync-lane and hand-over policies) and the
//   operations to cancel at shutdown.
//
// Thread safety: every member from any thread; each structure has its own short mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlock::pubsub {
class waiter;
}

namespace dlock::detail {

class redis_hold;
class lock_protocol;

/// An operation that must end (with errc::cancelled) when the client shuts down, instead of
/// waiting for a timer or a message that will never come. cancel() runs on the I/O thread.
class cancellable {
public:
    virtual void cancel() = 0;

protected:
    ~cancellable() = default;
};

class hold_registry {
public:
    std::shared_ptr<redis_hold> find_thread_hold(const std::string& key);
    void set_thread_hold(const std::string& key, std::shared_ptr<redis_hold> h);
    void erase_thread_hold(const std::string& key, const redis_hold* h);

    /// Counts a fresh acquisition of `key` (kind `p`) with `lease`; local_end gives it back.
    void local_begin(const lock_protocol& p, const std::string& key,
                     std::chrono::milliseconds lease);
    void local_end(const lock_protocol& p, const std::string& key) noexcept;
    /// Nullopt when this client holds no fresh acquisition of the lock; otherwise the longest
    /// lease among its holds since the lock was last free here (the bound a queued waiter
    /// sleeps for at most). A hint: a hash collision only makes a waiter queue when it could
    /// have tried, which that lease bounds.
    std::optional<std::chrono::milliseconds> held_here(const lock_protocol& p,
                                                       const std::string& key);

    /// Polite release: the final release of `key` (kind `p`) just reached waiters of other
    /// clients, so this client's next acquisition of it waits on the channel until `until`
    /// (or a wake) before trying, and a woken waiter elsewhere gets the lock first.
    void polite_begin(const lock_protocol& p, const std::string& key,
                      std::chrono::steady_clock::time_point until);
    /// The end of that head start, when one runs now; nullopt otherwise.
    std::optional<std::chrono::steady_clock::time_point>
    polite_until(const lock_protocol& p, const std::string& key,
                 std::chrono::steady_clock::time_point now);

    /// Acquisitions of this client that are subscribed and waiting (any lock). While there are
    /// any, blocking calls stay off the sync lane (a releasing thread would get its reply
    /// first and re-acquire ahead of the waiter the I/O thread is about to wake).
    void waiter_added() noexcept { waiters_.fetch_add(1, std::memory_order_relaxed); }
    void waiter_removed() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }
    bool has_waiters() const noexcept { return waiters_.load(std::memory_order_relaxed) > 0; }

    /// Registers an operation to cancel at shutdown. Expired entries are pruned.
    void track(std::weak_ptr<cancellable> op);
    std::vector<std::weak_ptr<cancellable>> take_tracked();

    /// I/O thread only: the waiters of this client on each lock whose waiters queue on the
    /// server (the fair lock), in the order they joined; a release hands over only to the
    /// first, and only if it is the head of the server's queue.
    std::unordered_map<std::string, std::vector<pubsub::waiter*>> queued_waiters;

    /// I/O thread only: per unlock channel, when a hand-over last found (PUBSUB NUMSUB) that
    /// no other client waits; within handover_recheck of that, the check is skipped.
    std::unordered_map<std::string, std::chrono::steady_clock::time_point> handover_checked;

private:
    static std::size_t local_key(const lock_protocol& p, const std::string& key) noexcept;

    std::atomic<int> waiters_{0};
    std::mutex ops_mu_;
    std::vector<std::weak_ptr<cancellable>> ops_; // guarded by ops_mu_
    struct local_hold {
        int count = 0;
        std::chrono::milliseconds longest_lease{};
    };
    std::mutex local_mu_;
    /// Keyed by the hash of (kind, lock key): no copy of the key per held lock.
    std::unordered_map<std::size_t, local_hold> local_holds_; // guarded by local_mu_
    /// Head starts given by polite releases, by the same hash (guarded by local_mu_).
    std::unordered_map<std::size_t, std::chrono::steady_clock::time_point> polite_;
    std::mutex thread_holds_mu_;
    std::unordered_map<std::string, std::shared_ptr<redis_hold>> thread_holds_; // guarded
};

} // namespace dlock::detail
