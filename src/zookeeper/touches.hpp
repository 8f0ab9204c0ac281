// zookeeper/touches.hpp: from the send times of answered requests to the latest time the
// ensemble's leader surely saw the session alive (sans-I/O; docs/design/zookeeper.md, "A follower
// cut off from its leader").
//
// The leader expires a session `timeout` after the last report of it, and a follower reports
// the sessions its clients touched in its replies to the leader's pings. A follower cut off
// from its leader goes on answering its clients for up to syncLimit x tickTime before it gives
// up, so an answer proves a report to the leader only for requests sent at least `lag`
// ((syncLimit + 1) x tickTime: the cut-off follower's window plus the leader's ping interval)
// before the answered one. So the session's lease counts from the newest answered send time at
// least `lag` older than the newest answered one; before there is one, from the session's
// creation, which the leader itself made after the client asked for it (`created`).
// With lag 0 (a standalone server, which expires its sessions itself) every answer counts at
// once, as before this rule.
//
// Memory: a send time is kept only when it is at least lag / 8 after the last one kept (a
// skipped one is replaced by an older one, which only moves the bound earlier), so at most
// about 10 are kept however many requests are answered.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

namespace dlock::detail::zk {

class touches {
public:
    using clock = std::chrono::steady_clock;

    touches(std::chrono::milliseconds lag, clock::time_point created)
        : lag_(lag)
        , proven_(created) {}

    /// A request sent at `sent` was answered: the latest time the leader surely saw the
    /// session (never earlier than a previous result).
    clock::time_point answered(clock::time_point sent) {
        if (lag_.count() <= 0) return proven_ = std::max(proven_, sent);
        if (kept_.empty() || sent - kept_.back() >= lag_ / 8) {
            if (kept_.empty() || sent > kept_.back()) kept_.push_back(sent);
        }
        const auto newest = std::max(sent, kept_.back());
        // The newest kept send time at least `lag` before the newest answer.
        while (!kept_.empty() && kept_.front() <= newest - lag_) {
            proven_ = std::max(proven_, kept_.front());
            kept_.pop_front();
        }
        return proven_;
    }

private:
    std::chrono::milliseconds lag_;
    clock::time_point proven_;
    std::deque<clock::time_point> kept_{};
};

} // namespace dlock::detail::zk
