// core/observe_queue.hpp: what observation::async_next() (dlock/election.hpp) takes states from.
// client::observe(name) without a callback gives the backend's observer a callback that puts
// each state here; async_next() takes the oldest state not yet taken, or waits for one.
//
// Coalescing: states that arrive while nobody takes them are not queued; the latest replaces the
// one waiting (a change and its undoing may be missed, never reported out of order, as with the
// callback). A state equal to the last one taken is dropped, so consecutive completions differ.
//
// Thread safety: put() from the backend's I/O thread, next() and close() from any thread; the
// handler is called outside the mutex (it delivers to the caller's executor, detail::completion).
#pragma once

#include <dlock/election.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <system_error>

namespace dlock::detail {

class observe_queue {
public:
    using state = std::optional<leader_info>;
    using handler = std::function<void(std::error_code, state)>;

    /// A new state from the backend's observer.
    void put(const state& s);
    /// Calls `h` with the next state not yet taken, now or when one comes; with
    /// errc::invalid_argument when another next() is still waiting, errc::cancelled once closed.
    void next(handler h);
    /// Ends the queue: a waiting next() completes with errc::cancelled, and so does every later
    /// one. Idempotent.
    void close();

private:
    std::mutex mutex_;
    std::optional<state> ready_; // a state not yet taken
    std::optional<state> last_;  // the last state taken
    handler waiting_;            // a next() waiting for a state
    bool closed_ = false;
};

} // namespace dlock::detail
