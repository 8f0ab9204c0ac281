#include "core/observe_queue.hpp"

#include <dlock/error.hpp>

#include <utility>

namespace dlock::detail {

void observe_queue::put(const state& s) {
    handler h;
    {
        std::lock_guard lk(mutex_);
        if (closed_) return;
        if (last_ && *last_ == s) { // back to what was last taken: nothing new to report
            ready_.reset();
            return;
        }
        if (!waiting_) {
            ready_ = s;
            return;
        }
        h = std::exchange(waiting_, nullptr);
        last_ = s;
    }
    h({}, s);
}

void observe_queue::next(handler h) {
    std::error_code ec;
    state s;
    {
        std::lock_guard lk(mutex_);
        if (closed_) {
            ec = make_error_code(errc::cancelled);
        } else if (waiting_) {
            ec = make_error_code(errc::invalid_argument);
        } else if (ready_) {
            s = std::move(*ready_);
            ready_.reset();
            last_ = s;
        } else {
            waiting_ = std::move(h);
            return;
        }
    }
    h(ec, std::move(s));
}

void observe_queue::close() {
    handler h;
    {
        std::lock_guard lk(mutex_);
        if (closed_) return;
        closed_ = true;
        ready_.reset();
        h = std::exchange(waiting_, nullptr);
    }
    if (h) h(make_error_code(errc::cancelled), std::nullopt);
}

} // namespace dlock::detail
