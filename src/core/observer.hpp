// core/observer.hpp: what a dlock::observation (dlock/election.hpp) holds: one backend's running
// observation of an election, stopped once.
//
// Contract (every backend's observer keeps it; election.cpp relies on it): the callback runs on
// the backend's I/O thread, first with the state at the start, then after every change; once
// stop() returns no callback runs any more (stop() waits for a callback running on another
// thread, and returns at once when called from inside the callback).
//
// Thread safety: stop() from any thread, idempotent, never throws.
#pragma once

namespace dlock::detail {

class observer {
public:
    observer() = default;
    observer(const observer&) = delete;
    observer& operator=(const observer&) = delete;
    virtual ~observer() = default;

    virtual void stop() noexcept = 0;
};

} // namespace dlock::detail
