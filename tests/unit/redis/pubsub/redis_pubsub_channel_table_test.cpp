// Socket-free tests of pubsub::channel_table: reference counts and linger, confirmation,
// wake rules, permits, hand-over candidates and reconnects, driven by hand with fake waiters
// and a fake time.
#include "redis/pubsub/channel_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;
using dlock::pubsub::wake;

namespace {

struct fake_waiter {
    explicit fake_waiter(int i, bool takes = true)
        : id(i)
        , takes_handover(takes) {}
    int id;
    bool takes_handover;
};

using table = dlock::pubsub::channel_table<fake_waiter>;
using time_point = table::clock::time_point;
using waiters = std::vector<fake_waiter*>;

const time_point t0 = time_point{} + 1000h;
const std::string ch = "redisson_lock__channel:{orders}";

wake wake_one(std::string_view) noexcept {
    return wake::one;
}
wake wake_all(std::string_view) noexcept {
    return wake::all;
}
wake wake_none(std::string_view) noexcept {
    return wake::none;
}
/// Like the read-write lock's: "1" (a read unlock) wakes every reader, anything else one.
wake by_payload(std::string_view payload) noexcept {
    return payload == "1" ? wake::all : wake::one;
}

/// The waiters `confirmed` asks to notify.
waiters confirm(table& t, const std::string& channel, time_point now, waiters* woken = nullptr) {
    waiters notify, wake_now;
    t.confirmed(channel, now, notify, wake_now);
    if (woken) *woken = wake_now;
    return notify;
}
waiters message(table& t, const std::string& channel, std::string_view payload = "0") {
    waiters wake_now;
    t.message(channel, payload, wake_now);
    return wake_now;
}
std::vector<std::string> sweep(table& t, time_point now, bool& more) {
    std::vector<std::string> gone;
    more = t.sweep(now, gone);
    return gone;
}
std::vector<std::string> channels(const table& t) {
    std::vector<std::string> names;
    t.for_each_channel([&](const std::string& name) { names.push_back(name); });
    std::sort(names.begin(), names.end());
    return names;
}
bool accept_all(const fake_waiter&) {
    return true;
}
bool accept_takers(const fake_waiter& w) {
    return w.takes_handover;
}

} // namespace

// --- reference counts and confirmation -----------------------------------------------------

TEST(channel_table, the_first_waiter_asks_for_subscribe_and_the_second_does_not) {
    table t;
    fake_waiter a{1}, b{2};
    auto r = t.add(ch, &a, wake_one);
    EXPECT_TRUE(r.subscribe);
    EXPECT_FALSE(r.notify_now);
    r = t.add(ch, &b, wake_one);
    EXPECT_FALSE(r.subscribe);
    EXPECT_FALSE(r.notify_now); // not confirmed yet: the confirmation will tell it
    EXPECT_TRUE(t.registered(ch, &a));
    EXPECT_TRUE(t.registered(ch, &b));
    EXPECT_EQ(t.channel_count(), 1u);
    EXPECT_FALSE(t.active_since(ch, t0 + 1h));
}

TEST(channel_table, a_waiter_joining_an_active_channel_is_told_at_once) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    const auto r = t.add(ch, &b, wake_one);
    EXPECT_FALSE(r.subscribe);
    EXPECT_TRUE(r.notify_now);
}

TEST(channel_table, the_confirmation_notifies_every_waiter_and_wakes_nobody_the_first_time) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    waiters woken{&a};
    EXPECT_EQ(confirm(t, ch, t0, &woken), (waiters{&a, &b}));
    EXPECT_TRUE(woken.empty());
    EXPECT_TRUE(t.active_since(ch, t0));
}

TEST(channel_table, a_confirmation_of_an_unknown_channel_returns_nobody) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    waiters woken{&a};
    EXPECT_TRUE(confirm(t, "other", t0, &woken).empty());
    EXPECT_TRUE(woken.empty());
    EXPECT_FALSE(t.active_since("other", t0));
}

TEST(channel_table, after_a_reconnect_the_confirmation_wakes_the_sleepers) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    t.add(ch, &c, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_FALSE(t.sleep(ch, &a));
    t.disconnected();
    EXPECT_FALSE(t.active_since(ch, t0 + 1h));
    EXPECT_EQ(channels(t), std::vector<std::string>{ch}); // to subscribe again
    waiters woken;
    // Messages may have been lost while down: every sleeper tries again.
    EXPECT_EQ(confirm(t, ch, t0 + 5s, &woken), (waiters{&a, &b, &c}));
    EXPECT_EQ(woken, (waiters{&b, &a}));
    EXPECT_EQ(t.sleeping_count(ch), 0u);
    EXPECT_FALSE(t.active_since(ch, t0 + 1s)); // confirmed again, later
    EXPECT_TRUE(t.active_since(ch, t0 + 5s));
}

TEST(channel_table, after_a_reconnect_without_sleepers_the_confirmation_wakes_nobody) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    t.disconnected();
    waiters woken{&a};
    EXPECT_EQ(confirm(t, ch, t0 + 1s, &woken), waiters{&a});
    EXPECT_TRUE(woken.empty());
}

TEST(channel_table, a_repeated_confirmation_of_an_active_channel_wakes_nobody) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    waiters woken{&a};
    EXPECT_EQ(confirm(t, ch, t0 + 1s, &woken), waiters{&a});
    EXPECT_TRUE(woken.empty());
    EXPECT_EQ(t.sleeping_count(ch), 1u);
    EXPECT_TRUE(t.active_since(ch, t0)); // the first confirmation time stands
}

TEST(channel_table, active_since_compares_against_the_confirmation_time) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    EXPECT_FALSE(t.active_since(ch, t0));
    confirm(t, ch, t0);
    EXPECT_FALSE(t.active_since(ch, t0 - 1ms)); // sent before the SUBSCRIBE was processed
    EXPECT_TRUE(t.active_since(ch, t0));
    EXPECT_TRUE(t.active_since(ch, t0 + 1ms));
    EXPECT_FALSE(t.active_since("unknown", t0 + 1ms));
}

// --- wake rules and permits ----------------------------------------------------------------

TEST(channel_table, a_wake_one_message_wakes_the_longest_sleeper_only) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    t.add(ch, &c, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &c));
    EXPECT_EQ(message(t, ch), waiters{&b});
    EXPECT_EQ(t.sleeping_count(ch), 2u);
    EXPECT_EQ(message(t, ch), waiters{&a});
    EXPECT_EQ(message(t, ch), waiters{&c});
    EXPECT_EQ(t.sleeping_count(ch), 0u);
    EXPECT_TRUE(t.registered(ch, &b)); // woken, still waiting for the lock
}

TEST(channel_table, a_wake_all_message_wakes_every_sleeper_and_leaves_permits_for_the_others) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add(ch, &a, wake_all);
    t.add(ch, &b, wake_all);
    t.add(ch, &c, wake_all);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_EQ(message(t, ch), (waiters{&a, &b}));
    EXPECT_EQ(t.sleeping_count(ch), 0u);
    // c had an attempt in flight when the message came: its sleep finds the permit.
    EXPECT_TRUE(t.sleep(ch, &c));
    // One permit only (three waiters, two woken).
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_EQ(t.sleeping_count(ch), 1u);
}

TEST(channel_table, a_wake_none_message_wakes_nobody_and_leaves_no_permit) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_none);
    t.add(ch, &b, wake_none);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_TRUE(message(t, ch).empty());
    EXPECT_EQ(t.sleeping_count(ch), 1u);
    EXPECT_FALSE(t.sleep(ch, &b)); // no permit was stored
    EXPECT_EQ(t.sleeping_count(ch), 2u);
}

TEST(channel_table, the_wake_rule_reads_the_payload) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add(ch, &a, by_payload);
    t.add(ch, &b, by_payload);
    t.add(ch, &c, by_payload);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_FALSE(t.sleep(ch, &c));
    EXPECT_EQ(message(t, ch, "0"), waiters{&a});
    EXPECT_EQ(message(t, ch, "1"), (waiters{&b, &c}));
}

TEST(channel_table, a_channel_without_a_rule_wakes_one) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, nullptr);
    t.add(ch, &b, nullptr);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_EQ(message(t, ch, "1"), waiters{&a});
}

TEST(channel_table, a_message_without_a_sleeper_becomes_a_permit_capped_at_the_waiters) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    confirm(t, ch, t0);
    for (int i = 0; i < 5; ++i)
        EXPECT_TRUE(message(t, ch).empty());
    // Two permits (two waiters), each consumed by the next sleep.
    EXPECT_TRUE(t.sleep(ch, &a));
    EXPECT_TRUE(t.sleep(ch, &b));
    EXPECT_EQ(t.sleeping_count(ch), 0u);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_EQ(t.sleeping_count(ch), 1u);
}

TEST(channel_table, a_wake_all_message_without_sleepers_leaves_a_permit_per_waiter) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_all);
    t.add(ch, &b, wake_all);
    confirm(t, ch, t0);
    EXPECT_TRUE(message(t, ch).empty());
    EXPECT_TRUE(t.sleep(ch, &a));
    EXPECT_TRUE(t.sleep(ch, &b));
    EXPECT_FALSE(t.sleep(ch, &a));
}

TEST(channel_table, removing_a_waiter_caps_the_permits_at_the_remaining_waiters) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    confirm(t, ch, t0);
    message(t, ch);
    message(t, ch); // two permits
    t.remove(ch, &b, t0);
    EXPECT_TRUE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &a));
}

TEST(channel_table, a_waiter_woken_by_its_timer_is_no_longer_a_sleeper) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &b));
    t.awake(ch, &a);
    EXPECT_EQ(t.sleeping_count(ch), 1u);
    EXPECT_EQ(message(t, ch), waiters{&b});
    t.awake("unknown", &a); // harmless
}

TEST(channel_table, a_message_on_an_unknown_channel_wakes_nobody) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_all);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_TRUE(message(t, "other").empty());
    EXPECT_EQ(t.sleeping_count(ch), 1u);
    EXPECT_EQ(t.sleeping_count("other"), 0u);
    EXPECT_FALSE(t.sleep("other", &a)); // not registered there: no permit, no sleeper
    EXPECT_EQ(t.sleeping_count("other"), 0u);
}

// --- leaving, linger and sweep -------------------------------------------------------------

TEST(channel_table, the_last_waiter_of_an_active_channel_leaves_it_lingering) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    const auto r = t.remove(ch, &a, t0 + 1s);
    EXPECT_FALSE(r.unsubscribe);
    EXPECT_TRUE(r.linger);
    EXPECT_FALSE(t.registered(ch, &a));
    EXPECT_EQ(t.channel_count(), 1u);
    EXPECT_TRUE(t.active_since(ch, t0)); // still subscribed
}

TEST(channel_table, the_last_waiter_of_a_never_confirmed_channel_unsubscribes_at_once) {
    table t;
    fake_waiter a{1};
    t.add(ch, &a, wake_one);
    const auto r = t.remove(ch, &a, t0);
    EXPECT_TRUE(r.unsubscribe);
    EXPECT_FALSE(r.linger);
    EXPECT_EQ(t.channel_count(), 0u);
    EXPECT_TRUE(channels(t).empty());
}

TEST(channel_table, a_waiter_that_is_not_the_last_leaves_the_channel_as_it_is) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    const auto r = t.remove(ch, &a, t0);
    EXPECT_FALSE(r.unsubscribe);
    EXPECT_FALSE(r.linger);
    EXPECT_FALSE(t.registered(ch, &a));
    EXPECT_EQ(t.sleeping_count(ch), 0u); // no longer a sleeper either
    EXPECT_TRUE(t.registered(ch, &b));
}

TEST(channel_table, removing_an_unknown_waiter_or_channel_is_harmless) {
    table t;
    fake_waiter a{1}, b{2};
    auto r = t.remove(ch, &a, t0);
    EXPECT_FALSE(r.unsubscribe);
    EXPECT_FALSE(r.linger);
    t.add(ch, &a, wake_one);
    r = t.remove(ch, &b, t0);
    EXPECT_FALSE(r.unsubscribe);
    EXPECT_FALSE(r.linger);
    EXPECT_TRUE(t.registered(ch, &a));
    EXPECT_FALSE(t.registered("other", &a));
}

TEST(channel_table, sweep_drops_channels_idle_for_the_linger_time_and_keeps_younger_ones) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add("x", &a, wake_one);
    t.add("y", &b, wake_one);
    t.add("z", &c, wake_one);
    confirm(t, "x", t0);
    confirm(t, "y", t0);
    confirm(t, "z", t0);
    EXPECT_TRUE(t.remove("x", &a, t0).linger);
    EXPECT_TRUE(t.remove("y", &b, t0 + 50ms).linger);
    bool more = false;
    EXPECT_TRUE(sweep(t, t0 + table::linger - 1ms, more).empty());
    EXPECT_TRUE(more);
    EXPECT_EQ(sweep(t, t0 + table::linger, more), std::vector<std::string>{"x"});
    EXPECT_TRUE(more); // y is younger
    EXPECT_EQ(channels(t), (std::vector<std::string>{"y", "z"}));
    EXPECT_EQ(sweep(t, t0 + 50ms + table::linger, more), std::vector<std::string>{"y"});
    EXPECT_FALSE(more);
    EXPECT_EQ(channels(t), std::vector<std::string>{"z"}); // z has a waiter
    EXPECT_TRUE(sweep(t, t0 + 1h, more).empty());
    EXPECT_FALSE(more);
}

TEST(channel_table, a_lingering_channel_contended_again_is_reused_without_subscribe) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    EXPECT_TRUE(t.remove(ch, &a, t0).linger);
    const auto r = t.add(ch, &b, wake_one);
    EXPECT_FALSE(r.subscribe);
    EXPECT_TRUE(r.notify_now);
    bool more = true;
    EXPECT_TRUE(sweep(t, t0 + 1h, more).empty());
    EXPECT_FALSE(more);
    EXPECT_EQ(t.channel_count(), 1u);
}

// --- hand-over candidates ------------------------------------------------------------------

TEST(channel_table, take_sleeping_returns_the_longest_sleeper_the_predicate_accepts) {
    table t;
    fake_waiter a{1, false}, b{2}, c{3};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    t.add(ch, &c, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    EXPECT_FALSE(t.sleep(ch, &b));
    EXPECT_FALSE(t.sleep(ch, &c));
    EXPECT_EQ(t.take_sleeping(ch, accept_takers), &b); // a is skipped
    EXPECT_EQ(t.sleeping_count(ch), 2u);
    EXPECT_TRUE(t.registered(ch, &b)); // taken from the sleepers only
    EXPECT_EQ(t.take_sleeping(ch, accept_takers), &c);
    EXPECT_EQ(t.take_sleeping(ch, accept_takers), nullptr);
    EXPECT_EQ(message(t, ch), waiters{&a}); // a still sleeps
}

TEST(channel_table, take_sleeping_on_an_inactive_channel_takes_nobody) {
    table t;
    fake_waiter a{1}, b{2};
    t.add("pending", &b, wake_one);
    EXPECT_FALSE(t.sleep("pending", &b)); // not confirmed yet
    EXPECT_EQ(t.take_sleeping("pending", accept_all), nullptr);
    EXPECT_EQ(t.take_sleeping("unknown", accept_all), nullptr);
    t.add(ch, &a, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a));
    t.disconnected(); // waiting for the resubscription
    EXPECT_EQ(t.take_sleeping(ch, accept_all), nullptr);
    EXPECT_EQ(t.sleeping_count(ch), 1u);
    confirm(t, ch, t0 + 1s); // wakes a (see after_a_reconnect_...)
    EXPECT_EQ(t.take_sleeping(ch, accept_all), nullptr);
}

// --- reconnects ----------------------------------------------------------------------------

TEST(channel_table, a_disconnect_drops_lingering_channels_and_deactivates_the_others) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    t.add("lingering", &a, wake_one);
    t.add("used", &b, wake_one);
    t.add("pending", &c, wake_one);
    confirm(t, "lingering", t0);
    confirm(t, "used", t0);
    EXPECT_TRUE(t.remove("lingering", &a, t0).linger);
    t.disconnected();
    EXPECT_EQ(channels(t), (std::vector<std::string>{"pending", "used"}));
    EXPECT_EQ(t.channel_count(), 2u);
    EXPECT_FALSE(t.active_since("used", t0 + 1h));
    fake_waiter d{4};
    const auto r = t.add("used", &d, wake_one);
    EXPECT_FALSE(r.subscribe);  // resubscribed with the others
    EXPECT_FALSE(r.notify_now); // the new confirmation will tell it
    EXPECT_EQ(confirm(t, "used", t0 + 1s), (waiters{&b, &d}));
    // A channel that lost its last waiter before the resubscription was confirmed goes at once.
    const auto gone = t.remove("pending", &c, t0 + 1s);
    EXPECT_TRUE(gone.unsubscribe);
    EXPECT_FALSE(gone.linger);
    EXPECT_EQ(channels(t), std::vector<std::string>{"used"});
}

TEST(channel_table, a_message_on_a_lingering_channel_wakes_a_waiter_whose_attempt_it_followed) {
    // A waiter's attempt was covered by the lingering subscription (confirmed before it was
    // sent), and the holder's release overtook the attempt's reply: the message finds no
    // waiter at all. The waiter joins afterwards; its sleep must not miss that message. A
    // waiter whose attempt was sent after the message already saw that release: it sleeps.
    for (const auto rule : {wake_one, wake_all}) {
        table t;
        fake_waiter a{1}, b{2};
        t.add(ch, &a, rule);
        confirm(t, ch, t0);
        t.remove(ch, &a, t0 + 1ms); // lingers
        waiters wake_now;
        t.message(ch, "0", wake_now, t0 + 5ms);
        EXPECT_TRUE(wake_now.empty());
        t.add(ch, &a, rule);
        EXPECT_TRUE(t.sleep(ch, &a, t0 + 4ms)); // attempt sent before the message: try again
        t.add(ch, &b, rule);
        EXPECT_FALSE(t.sleep(ch, &b, t0 + 6ms)); // sent after it: sleep
        EXPECT_EQ(t.sleeping_count(ch), 1u);
    }
}

TEST(channel_table, a_channel_the_server_dropped_is_forgotten_and_its_waiters_returned_in_order) {
    table t;
    fake_waiter a{1}, b{2};
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    confirm(t, ch, t0);
    EXPECT_FALSE(t.sleep(ch, &a, t0 + 1s));
    EXPECT_TRUE(t.registered_any(ch));
    EXPECT_EQ(t.dropped(ch), (waiters{&a, &b}));
    EXPECT_FALSE(t.registered_any(ch));
    EXPECT_FALSE(t.registered(ch, &a));
    EXPECT_EQ(t.channel_count(), 0u);
    // Joining again (on this or another node) starts from scratch: SUBSCRIBE is sent anew.
    EXPECT_TRUE(t.add(ch, &a, wake_one).subscribe);
    EXPECT_TRUE(t.dropped("redisson_lock__channel:{other}").empty());
}

TEST(channel_table, a_refused_subscription_forgets_every_unconfirmed_channel_with_waiters) {
    table t;
    fake_waiter a{1}, b{2}, c{3};
    const std::string other = "redisson_lock__channel:{other}";
    t.add(ch, &a, wake_one);
    t.add(ch, &b, wake_one);
    t.add(other, &c, wake_one); // confirmed: an error cannot be its answer
    confirm(t, other, t0);
    auto refused = t.unconfirmed();
    std::sort(refused.begin(), refused.end(), [](auto* x, auto* y) { return x->id < y->id; });
    EXPECT_EQ(refused, (waiters{&a, &b}));
    EXPECT_FALSE(t.registered_any(ch));
    EXPECT_TRUE(t.registered(other, &c));
    EXPECT_EQ(channels(t), (std::vector<std::string>{other}));
    // Joining again sends SUBSCRIBE anew; nothing is unconfirmed twice.
    EXPECT_TRUE(t.add(ch, &a, wake_one).subscribe);
    EXPECT_EQ(t.unconfirmed(), (waiters{&a}));
    EXPECT_TRUE(t.unconfirmed().empty());
}
