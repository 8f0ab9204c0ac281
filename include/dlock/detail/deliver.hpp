// dlock/detail/deliver.hpp: how async operations hand their result to the user's handler.
// Internal; public only because the async templates use it.
//
// A handler must never run before its initiating function returns, so a result that is ready
// while an initiation is still on this thread's stack (a request that failed at once) is
// posted. Any other result is dispatched: on the client's I/O thread, where replies complete,
// the handler runs at once, so a chain of async operations (acquire, release, acquire, ...)
// issues its next command while the rest of the current read is still being processed and the
// connection's early flush carries it; on another executor it is posted there as before.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace dlock::detail {

/// Initiations of dlock async operations on this thread's stack.
inline thread_local int initiations_on_stack = 0;

/// Marks the extent of an initiating function (see above).
class initiation_scope {
public:
    initiation_scope() noexcept { ++initiations_on_stack; }
    ~initiation_scope() { --initiations_on_stack; }
    initiation_scope(const initiation_scope&) = delete;
    initiation_scope& operator=(const initiation_scope&) = delete;
};

/// Runs `f` on `ex`: posted while an initiation is on this thread's stack, dispatched otherwise.
template <class Executor, class F>
void deliver(const Executor& ex, F&& f) {
    if (initiations_on_stack > 0)
        asio::post(ex, std::forward<F>(f));
    else
        asio::dispatch(ex, std::forward<F>(f));
}

/// The user's completion `handler` as a copyable callback taking `Args...`: called once, it
/// delivers the handler (see deliver) on the handler's associated executor, `fallback` when it
/// has none, and keeps that executor from running out of work until then.
template <class... Args, class Handler, class Executor>
auto completion(Handler&& handler, const Executor& fallback) {
    using H = std::decay_t<Handler>;
    auto work = asio::make_work_guard(asio::get_associated_executor(handler, fallback));
    auto shared = std::make_shared<std::pair<H, decltype(work)>>(std::forward<Handler>(handler),
                                                                 std::move(work));
    return [shared](Args... args) {
        auto ex = shared->second.get_executor();
        deliver(ex, [shared, ... a = std::move(args)]() mutable {
            std::move(shared->first)(std::move(a)...);
        });
    };
}

} // namespace dlock::detail
