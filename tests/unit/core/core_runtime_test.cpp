// Socket-free tests of core::runtime (the I/O thread, post, the blocking bridge `call`, the
// gate, the shutdown pieces) and of one_shot and completion_flag's bounded wait. Every wait is
// bounded (ctest's TIMEOUT backs them up); nothing sleeps to synchronise.
#include "core/runtime.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::detail::completion_flag;
using dlock::detail::one_shot;
using dlock::detail::runtime;

namespace {

using complete_fn = std::function<void(int)>;
using start_fn = std::function<void(complete_fn)>;

/// Ends a started runtime the way the backends do: out of work, then joined.
void end(runtime& rt) {
    rt.release_work();
    rt.stop_after_queued();
    EXPECT_TRUE(rt.finish());
}

TEST(runtime, post_runs_the_function_on_the_io_thread_in_order) {
    runtime rt;
    rt.start();
    EXPECT_TRUE(rt.running());
    EXPECT_FALSE(rt.on_io_thread());
    auto seen = std::make_shared<std::vector<int>>();
    one_shot<bool> on_io;
    rt.post([seen] { seen->push_back(1); });
    rt.post([seen] { seen->push_back(2); });
    rt.post([&] { on_io.set(rt.on_io_thread()); });
    EXPECT_TRUE(on_io.take());
    end(rt);
    EXPECT_FALSE(rt.running());
    EXPECT_EQ(*seen, (std::vector<int>{1, 2}));
}

TEST(runtime, call_returns_the_value_completed_on_the_io_thread_and_ignores_later_ones) {
    runtime rt;
    rt.start();
    const int v = rt.call<int>(
        [&](const complete_fn& done) {
            EXPECT_TRUE(rt.on_io_thread());
            done(7);
            done(8);
        },
        -1);
    EXPECT_EQ(v, 7);
    end(rt);
}

TEST(runtime, call_may_complete_later_from_another_handler) {
    runtime rt;
    rt.start();
    const int v = rt.call<int>(
        [&](complete_fn done) { rt.post([done = std::move(done)] { done(42); }); }, -1);
    EXPECT_EQ(v, 42);
    end(rt);
}

TEST(runtime, call_on_the_io_thread_returns_the_fallback_at_once_instead_of_waiting_for_itself) {
    runtime rt;
    rt.start();
    one_shot<int> out;
    rt.post([&] { out.set(rt.call<int>([](const complete_fn& done) { done(1); }, -1)); });
    EXPECT_EQ(out.take(), -1);
    end(rt);
}

TEST(runtime, a_bounded_call_that_nobody_completes_returns_the_fallback_after_the_bound) {
    runtime rt;
    rt.start();
    auto keep = std::make_shared<complete_fn>();
    const auto t0 = std::chrono::steady_clock::now();
    const int v = rt.call<int>([keep](complete_fn done) { *keep = std::move(done); }, -1, 20ms);
    EXPECT_EQ(v, -1);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
    // Completing it afterwards is harmless (the waiter is gone, its slot is shared).
    rt.post([keep] { (*keep)(5); });
    end(rt);
}

TEST(runtime, close_runs_its_last_handler_after_the_earlier_work_and_refuses_what_comes_after) {
    runtime rt;
    rt.start();
    auto seen = std::make_shared<std::vector<std::string>>();
    EXPECT_TRUE(rt.try_post([seen] { seen->push_back("before"); }));
    EXPECT_FALSE(rt.closed());
    EXPECT_TRUE(rt.close([seen] { seen->push_back("last"); }));
    EXPECT_TRUE(rt.closed());
    EXPECT_FALSE(rt.close([seen] { seen->push_back("second close"); }));
    EXPECT_FALSE(rt.try_post([seen] { seen->push_back("after"); }));
    // A blocking call on a closed runtime does not wait: its work would never run.
    EXPECT_EQ(rt.call<int>([](const complete_fn& done) { done(1); }, -1), -1);
    end(rt);
    EXPECT_EQ(*seen, (std::vector<std::string>{"before", "last"}));
}

TEST(runtime, without_work_the_loop_returns_once_the_queued_handlers_ran) {
    runtime rt;
    rt.start();
    auto ran = std::make_shared<int>(0);
    for (int i = 0; i < 100; ++i)
        rt.post([ran] { ++*ran; });
    rt.release_work();
    EXPECT_TRUE(rt.finish()); // joins: the loop ran out of work
    EXPECT_EQ(*ran, 100);
    EXPECT_TRUE(rt.finish()); // idempotent
}

TEST(runtime, a_bounded_finish_stops_a_loop_that_does_not_run_out_of_work) {
    runtime rt;
    rt.start();
    // The work guard is kept: the loop would run for ever.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(rt.finish(20ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
    EXPECT_FALSE(rt.running());
}

TEST(runtime, finish_on_the_io_thread_detaches_and_the_loop_goes_on) {
    runtime rt;
    // Shared: the detached thread may still be leaving set() when this test returns.
    auto finished = std::make_shared<one_shot<bool>>();
    auto after = std::make_shared<one_shot<bool>>();
    rt.start([after] { after->set(true); });
    rt.post([&rt, finished] {
        finished->set(rt.finish());
        rt.release_work();
        rt.stop_after_queued();
    });
    EXPECT_FALSE(finished->take()); // detached
    EXPECT_TRUE(after->take());     // the loop returned after the handler
    EXPECT_FALSE(rt.running());
}

TEST(runtime, after_run_may_delete_the_runtime_on_its_own_thread) {
    auto* rt = new runtime;
    auto deleted = std::make_shared<one_shot<bool>>();
    rt->start([rt, deleted] {
        rt->finish(); // detaches: nobody joins a thread that deletes its owner
        delete rt;
        deleted->set(true);
    });
    // Out of work: run() returns and the thread deletes the runtime. Dropped on the I/O thread,
    // as an owner's last reference there does, so that nothing touches it afterwards.
    rt->post([rt] { rt->release_work(); });
    EXPECT_TRUE(deleted->take());
}

TEST(runtime, the_destructor_of_a_running_runtime_stops_and_joins_its_thread) {
    auto ran = std::make_shared<one_shot<bool>>();
    {
        runtime rt;
        rt.start();
        rt.post([ran] { ran->set(true); });
        EXPECT_TRUE(ran->take());
    }
    SUCCEED();
}

TEST(one_shot, the_first_value_counts) {
    one_shot<int> s;
    s.set(1);
    s.set(2);
    EXPECT_EQ(s.take(), 1);
}

TEST(one_shot, take_for_gives_up_after_the_bound_and_a_later_set_is_harmless) {
    auto s = std::make_shared<one_shot<int>>();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(s->take_for(10ms).has_value());
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 10ms);
    std::thread t([s] { s->set(3); });
    t.join();
}

TEST(one_shot, take_for_returns_a_value_set_by_another_thread) {
    auto s = std::make_shared<one_shot<std::string>>();
    std::thread t([s] { s->set("x"); });
    const auto v = s->take_for(10s);
    t.join();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, "x");
}

TEST(completion_flag, wait_for_returns_at_once_when_already_set) {
    completion_flag f;
    f.set();
    EXPECT_TRUE(f.wait_for(0ns));
    EXPECT_TRUE(f.is_set());
}

TEST(completion_flag, wait_for_times_out_when_nobody_sets_it) {
    completion_flag f;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(f.wait_for(10ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 10ms);
    f.set(); // after a timeout: wakes nobody, changes nothing
    EXPECT_TRUE(f.is_set());
}

} // namespace
