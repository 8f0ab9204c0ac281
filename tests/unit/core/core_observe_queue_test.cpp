// core::observe_queue: what observation::async_next() takes states from (core/observe_queue.hpp).
#include "core/observe_queue.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <system_error>
#include <vector>

namespace {

using dlock::errc;
using dlock::leader_info;
using dlock::detail::observe_queue;
using state = observe_queue::state;

struct taken {
    std::vector<std::error_code> errors;
    std::vector<state> states;
    observe_queue::handler handler() {
        return [this](std::error_code ec, state s) {
            errors.push_back(ec);
            states.push_back(std::move(s));
        };
    }
};

const state vacant = std::nullopt;
state leader(const char* value, std::uint64_t epoch) {
    return leader_info{value, epoch};
}

TEST(observe_queue, a_state_put_before_next_is_taken_at_once) {
    observe_queue q;
    taken t;
    q.put(vacant);
    q.next(t.handler());
    ASSERT_EQ(t.states.size(), 1u);
    EXPECT_FALSE(t.errors[0]);
    EXPECT_EQ(t.states[0], vacant);
}

TEST(observe_queue, a_waiting_next_completes_with_the_next_state) {
    observe_queue q;
    taken t;
    q.next(t.handler());
    EXPECT_TRUE(t.states.empty());
    q.put(leader("a", 1));
    ASSERT_EQ(t.states.size(), 1u);
    EXPECT_EQ(t.states[0], leader("a", 1));
}

TEST(observe_queue, states_not_taken_in_time_are_coalesced_to_the_latest) {
    observe_queue q;
    taken t;
    q.put(vacant);
    q.put(leader("a", 1));
    q.put(leader("a2", 1));
    q.next(t.handler());
    q.next(t.handler()); // nothing new: waits
    ASSERT_EQ(t.states.size(), 1u);
    EXPECT_EQ(t.states[0], leader("a2", 1));
}

TEST(observe_queue, consecutive_results_always_differ) {
    observe_queue q;
    taken t;
    q.put(leader("a", 1));
    q.next(t.handler());
    q.put(vacant);
    q.put(leader("a", 1)); // a change and its undoing, not taken in between: nothing to report
    q.next(t.handler());
    ASSERT_EQ(t.states.size(), 1u) << "the second next() waits";
    q.put(leader("b", 2));
    ASSERT_EQ(t.states.size(), 2u);
    EXPECT_EQ(t.states[1], leader("b", 2));
}

TEST(observe_queue, one_next_at_a_time) {
    observe_queue q;
    taken first, second;
    q.next(first.handler());
    q.next(second.handler());
    ASSERT_EQ(second.errors.size(), 1u);
    EXPECT_EQ(second.errors[0], errc::invalid_argument);
    EXPECT_TRUE(first.errors.empty()) << "the first still waits";
    q.put(vacant);
    ASSERT_EQ(first.errors.size(), 1u);
    EXPECT_FALSE(first.errors[0]);
}

TEST(observe_queue, close_cancels_a_waiting_next_and_every_later_one) {
    observe_queue q;
    taken t;
    q.next(t.handler());
    q.close();
    q.close(); // idempotent
    q.put(vacant);
    q.next(t.handler());
    ASSERT_EQ(t.errors.size(), 2u);
    EXPECT_EQ(t.errors[0], errc::cancelled);
    EXPECT_EQ(t.errors[1], errc::cancelled);
}

} // namespace
