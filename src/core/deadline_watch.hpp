// core/deadline_watch.hpp: the loss timer of the holds a backend renews one by one (Redis's
// renewal_service, Redlock's watchdog). Each watched hold has a valid_until (loss_signal); the
// watch keeps one steady_timer armed for the earliest of them and, when it fires or check() is
// called after a renewal round, ends lost every hold whose valid_until passed. A hold leaves the
// watch when it is released or lost (seen at the next check) or removed.
//
// Backends whose holds live as long as one session (ZooKeeper, etcd) or one connection
// (PostgreSQL advisory locks) have one deadline, the session's, and no per-hold watch.
//
// Policy (static members, so that the backend's hold type needs no new virtual):
//   static bool releasing(const Hold&);  // a release is in flight: do not declare loss yet;
//                                        // a release that gives the hold back add()s it again
//   static void expire(Hold&);           // its deadline passed: end it lost, with the cause
//
// Thread safety: add(), remove(), size() and select() from any thread; they take a short
// mutex, and add() wakes the I/O thread only when the new deadline is earlier than the one
// armed, so an acquire/release pair costs no hop. check() and stop(): I/O thread.
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

template <class Hold, class Policy>
class deadline_watch {
public:
    using clock = std::chrono::steady_clock;

    explicit deadline_watch(asio::io_context& io)
        : io_(io)
        , timer_(io) {}

    /// Watches `h` (until released, lost or removed); for a hold already watched, re-arms the
    /// check when its deadline is earlier than the one armed. Ignored after stop().
    void add(std::shared_ptr<Hold> h) {
        const auto until = h->valid_until();
        {
            std::lock_guard lk(mu_);
            if (stopped_) return;
            holds_.emplace(h.get(), std::move(h));
            if (until >= armed_) return; // the armed check comes first and re-arms
            armed_ = until;
        }
        asio::post(io_, [this, until] { arm(until); });
    }

    void remove(const Hold* h) {
        std::lock_guard lk(mu_);
        holds_.erase(h);
    }

    std::size_t size() const {
        std::lock_guard lk(mu_);
        return holds_.size();
    }

    /// Calls `visit(const std::shared_ptr<Hold>&)` for every watched hold, under the watch's
    /// mutex (keep it short: copy what you need). False after stop().
    template <class Visit>
    bool for_each(Visit visit) const {
        std::lock_guard lk(mu_);
        if (stopped_) return false;
        for (const auto& [p, h] : holds_)
            visit(h);
        return true;
    }

    /// I/O thread: no more checks; every hold is forgotten (not ended).
    void stop() {
        {
            std::lock_guard lk(mu_);
            stopped_ = true;
            holds_.clear();
        }
        timer_.cancel();
    }

    /// I/O thread: ends lost (Policy::expire) every hold whose valid_until passed, unless it is
    /// releasing; drops released and lost ones; re-arms the timer for the earliest left.
    void check() {
        const auto now = clock::now();
        std::vector<std::shared_ptr<Hold>> due;
        auto next = clock::time_point::max();
        {
            std::lock_guard lk(mu_);
            if (stopped_) return;
            for (auto it = holds_.begin(); it != holds_.end();) {
                auto& h = it->second;
                if (h->released() || h->lost()) {
                    it = holds_.erase(it);
                    continue;
                }
                const auto until = h->valid_until();
                if (until <= now) {
                    if (!Policy::releasing(*h)) {
                        due.push_back(std::move(h));
                        it = holds_.erase(it);
                        continue;
                    }
                    // Its release is in flight: the release ends it, or gives it back and
                    // add()s it again, which re-arms. No timer for it meanwhile (one armed
                    // at a past deadline would fire at once, again and again).
                    ++it;
                    continue;
                }
                next = std::min(next, until);
                ++it;
            }
            armed_ = next;
        }
        for (auto& h : due)
            Policy::expire(*h);
        if (next != clock::time_point::max()) arm(next);
    }

private:
    void arm(clock::time_point when) {
        {
            std::lock_guard lk(mu_);
            if (stopped_ || when > armed_) return; // a later post for an earlier deadline won
        }
        timer_.expires_at(when);
        timer_.async_wait([this](std::error_code ec) {
            if (!ec) check();
        });
    }

    asio::io_context& io_;
    asio::steady_timer timer_; // I/O thread

    mutable std::mutex mu_;
    std::unordered_map<const Hold*, std::shared_ptr<Hold>> holds_; // mu_
    clock::time_point armed_ = clock::time_point::max();           // mu_: the timer's expiry
    bool stopped_ = false;                                         // mu_
};

} // namespace dlock::detail
