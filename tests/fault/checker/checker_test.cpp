// Tier-0 self-tests of the history checker (reliability.md §8.6): every must-fail history is
// caught by the right check with a witness, every must-pass history passes, and random valid
// schedules from a sequential lock model pass while the same schedules with one planted fault fail.

#include "checker.hpp"
#include "history.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace dlock::fault;

constexpr std::int64_t ms = 1'000'000;

std::int64_t deadline_for(std::int64_t t_start, std::int64_t ttl_ms) {
    return t_start + ttl_ms * ms - drift_ns(ttl_ms);
}

std::string serialize(const op_event& e) {
    jsonl_writer w;
    w.field("w", e.w).field("op", e.op).field("lock", e.lock).field("f", to_string(e.f));
    w.field("type", to_string(e.type)).field("t", e.t);
    if (e.token_h) w.field("token_h", *e.token_h);
    if (e.fence) w.field("fence", *e.fence);
    if (e.deadline) w.field("deadline", *e.deadline);
    if (e.ttl_ms) w.field("ttl_ms", *e.ttl_ms);
    if (e.t_start) w.field("t_start", *e.t_start);
    if (e.t_first_fwd) w.field("t_first_fwd", *e.t_first_fwd);
    if (e.deleted) w.field("deleted", *e.deleted);
    if (e.watchdog) w.field("watchdog", true);
    return w.line();
}

std::string serialize(const resource_entry& r) {
    jsonl_writer w;
    w.field("seq", r.seq).field("lock", r.lock).field("kind", r.kind);
    if (r.fence) w.field("fence", *r.fence);
    w.field("accepted", r.accepted);
    if (r.before) w.field("before", *r.before);
    if (r.after) w.field("after", *r.after);
    return w.line();
}

/// Builds a history through the writer and the parser (so every test also round-trips the format).
class builder {
public:
    builder& acquire(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_ok,
                     std::optional<std::int64_t> fence = std::nullopt, std::int64_t ttl_ms = 1000) {
        ev(w, op, op_kind::acquire, op_type::invoke, t_inv);
        op_event& e = ev(w, op, op_kind::acquire, op_type::ok, t_ok);
        e.fence = fence;
        e.ttl_ms = ttl_ms;
        e.t_start = t_inv;
        e.deadline = deadline_for(t_inv, ttl_ms);
        e.token_h = "tok" + std::to_string(w) + "_" + std::to_string(op);
        return *this;
    }
    builder& acquire_not(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_end,
                         op_type type, std::optional<std::int64_t> fence = std::nullopt) {
        ev(w, op, op_kind::acquire, op_type::invoke, t_inv);
        ev(w, op, op_kind::acquire, type, t_end).fence = fence;
        return *this;
    }
    builder& extend(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_ok,
                    std::int64_t ttl_ms = 1000) {
        ev(w, op, op_kind::extend, op_type::invoke, t_inv);
        op_event& e = ev(w, op, op_kind::extend, op_type::ok, t_ok);
        e.ttl_ms = ttl_ms;
        e.t_start = t_inv;
        e.deadline = deadline_for(t_inv, ttl_ms);
        return *this;
    }
    builder& release(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_ok,
                     std::int64_t deleted = 1) {
        ev(w, op, op_kind::release, op_type::invoke, t_inv);
        ev(w, op, op_kind::release, op_type::ok, t_ok).deleted = deleted;
        return *this;
    }
    builder& use(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_ok) {
        ev(w, op, op_kind::use, op_type::invoke, t_inv);
        ev(w, op, op_kind::use, op_type::ok, t_ok);
        return *this;
    }
    /// Events and resource entries from here on are on lock `name` (default "L").
    builder& on(std::string name) {
        lock_ = std::move(name);
        return *this;
    }
    /// An acquisition without a fixed lease: the client renews it (the worker's --watchdog).
    builder& acquire_wd(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_ok) {
        acquire(w, op, t_inv, t_ok);
        last().watchdog = true;
        return *this;
    }
    /// A watchdog renewal the holder of (w, hold_op) observed at `t_seen`: an extend ok without
    /// an invoke, its validity counted from `t_sent`.
    builder& renewal(std::int64_t w, std::int64_t op, std::int64_t hold_op, std::int64_t t_sent,
                     std::int64_t t_seen, std::int64_t ttl_ms = 1000) {
        op_event& e = ev(w, op, op_kind::extend, op_type::ok, t_seen);
        e.token_h = token(w, hold_op);
        e.ttl_ms = ttl_ms;
        e.t_start = t_sent;
        e.deadline = deadline_for(t_sent, ttl_ms);
        return *this;
    }
    /// The loss signal of the hold acquired by (w, hold_op).
    builder& lost(std::int64_t w, std::int64_t hold_op, std::int64_t t) {
        ev(w, hold_op, op_kind::lost, op_type::info, t).token_h = token(w, hold_op);
        return *this;
    }
    /// A use by the hold acquired by (w, hold_op) (its token in both events).
    builder& use_of(std::int64_t w, std::int64_t op, std::int64_t hold_op, std::int64_t t_inv,
                    std::int64_t t_ok) {
        ev(w, op, op_kind::use, op_type::invoke, t_inv).token_h = token(w, hold_op);
        ev(w, op, op_kind::use, op_type::ok, t_ok).token_h = token(w, hold_op);
        return *this;
    }
    /// An extension that did not succeed (fail or info); `deadline` is what a buggy holder
    /// might have believed it got.
    builder& extend_not(std::int64_t w, std::int64_t op, std::int64_t t_inv, std::int64_t t_end,
                        op_type type, std::int64_t deadline) {
        ev(w, op, op_kind::extend, op_type::invoke, t_inv);
        ev(w, op, op_kind::extend, type, t_end).deadline = deadline;
        return *this;
    }
    static std::string token(std::int64_t w, std::int64_t op) {
        return "tok" + std::to_string(w) + "_" + std::to_string(op);
    }
    builder& crash(std::int64_t w, std::int64_t t) {
        ev(w, -1, op_kind::crash, op_type::info, t);
        return *this;
    }
    builder& res(std::string kind, std::optional<std::int64_t> fence, bool accepted,
                 std::optional<std::int64_t> before = std::nullopt,
                 std::optional<std::int64_t> after = std::nullopt) {
        resource_entry r;
        r.seq = static_cast<std::int64_t>(resource_.size()) + 1;
        r.lock = lock_;
        r.kind = std::move(kind);
        r.fence = fence;
        r.accepted = accepted;
        r.before = before;
        r.after = after;
        resource_.push_back(r);
        return *this;
    }
    op_event& last() { return events_.back(); }
    std::vector<op_event>& events() { return events_; }
    std::vector<resource_entry>& resource() { return resource_; }

    history build() const {
        std::string workers, res;
        for (const auto& e : events_)
            workers += serialize(e);
        for (const auto& r : resource_)
            res += serialize(r);
        history h;
        auto e1 = add_jsonl(h, "workers.jsonl", workers);
        EXPECT_FALSE(e1) << e1->message;
        auto e2 = add_jsonl(h, "resource.jsonl", res);
        EXPECT_FALSE(e2) << e2->message;
        finish(h);
        return h;
    }

private:
    op_event& ev(std::int64_t w, std::int64_t op, op_kind f, op_type type, std::int64_t t) {
        op_event e;
        e.w = w;
        e.op = op;
        e.lock = lock_;
        e.f = f;
        e.type = type;
        e.t = t;
        events_.push_back(e);
        return events_.back();
    }
    std::string lock_ = "L";
    std::vector<op_event> events_;
    std::vector<resource_entry> resource_;
};

std::vector<check> violated_checks(const report& r) {
    std::vector<check> out;
    for (const auto& c : r.results)
        if (c.violated) out.push_back(c.what);
    return out;
}

bool has_kind(const report& r, check c, const std::string& kind) {
    for (const auto& v : r[c].violations)
        if (v.kind == kind && !v.witness.empty()) return true;
    return false;
}

// ---- must fail ----

TEST(checker_must_fail, overlapping_holds_are_a_mutex_violation_with_both_holds_as_witness) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).release(1, 2, 50 * ms, 51 * ms);
    b.acquire(2, 1, 2 * ms, 30 * ms).release(2, 2, 60 * ms, 61 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::mutex});
    ASSERT_EQ(r[check::mutex].violations.size(), 1u);
    const auto& wit = r[check::mutex].violations[0].witness;
    EXPECT_NE(wit.find("w=1"), std::string::npos) << wit;
    EXPECT_NE(wit.find("w=2"), std::string::npos) << wit;
    EXPECT_NE(wit.find("overlap 20000000 ns"), std::string::npos) << wit;
}

TEST(checker_must_fail, an_overlap_created_only_by_an_extend_is_caught) {
    // A's first deadline (988 ms) is before B's ok at 1200 ms; the extend at 500 ms moves it
    // to 1488 ms, so only the extend makes the holds overlap.
    auto make = [](bool with_extend) {
        builder b;
        b.acquire(1, 1, 0, 1 * ms);
        if (with_extend) b.extend(1, 2, 500 * ms, 501 * ms);
        b.acquire(2, 1, 1150 * ms, 1200 * ms).release(2, 2, 1300 * ms, 1301 * ms);
        return b.build();
    };
    EXPECT_FALSE(run_checks(make(false)).violated(check::mutex));
    auto r = run_checks(make(true));
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::mutex});
    EXPECT_TRUE(has_kind(r, check::mutex, "OVERLAP"));
}

TEST(checker_must_fail, a_witness_names_the_nemesis_events_active_at_the_violation) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).release(1, 2, 50 * ms, 51 * ms);
    b.acquire(2, 1, 2 * ms, 30 * ms).release(2, 2, 60 * ms, 61 * ms);
    history h = b.build();
    ASSERT_FALSE(
        add_jsonl(h, "nemesis.jsonl",
                  "{\"nemesis\":\"pause\",\"target\":\"w1\",\"value\":\"SIGSTOP\",\"t\":10}\n"
                  "{\"nemesis\":\"skew\",\"target\":\"redis-1\",\"value\":\"2.0\",\"t\":"
                  "40000000}\n"
                  "{\"nemesis\":\"heal\",\"target\":\"all\",\"value\":\"\",\"t\":90000000}\n"));
    finish(h);
    auto r = run_checks(h);
    ASSERT_TRUE(r.violated(check::mutex));
    const auto& wit = r[check::mutex].violations[0].witness;
    EXPECT_NE(wit.find("(active before) pause"), std::string::npos) << wit;
    EXPECT_NE(wit.find("skew target=redis-1"), std::string::npos) << wit;
    EXPECT_EQ(wit.find("heal"), std::string::npos) << wit;
}

TEST(checker_must_fail, an_extend_invoked_after_expiry_that_returns_ok_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).extend(1, 2, 990 * ms, 991 * ms); // deadline 988 ms
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::extend_expired});
    EXPECT_TRUE(has_kind(r, check::extend_expired, "EXTEND_EXPIRED"));
}

TEST(checker_must_fail, equal_fences_are_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 7).release(1, 2, 2 * ms, 3 * ms);
    b.acquire(2, 1, 4 * ms, 5 * ms, 7).release(2, 2, 6 * ms, 7 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::fence});
    EXPECT_TRUE(has_kind(r, check::fence, "FENCE_REPEATED"));
}

TEST(checker_must_fail, a_fence_lower_than_one_completed_before_the_invoke_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 9).release(1, 2, 2 * ms, 3 * ms);
    b.acquire(2, 1, 4 * ms, 5 * ms, 8).release(2, 2, 6 * ms, 7 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::fence});
    EXPECT_TRUE(has_kind(r, check::fence, "FENCE_BACKWARDS"));
    EXPECT_NE(r[check::fence].violations[0].witness.find("fence=9"), std::string::npos);
}

TEST(checker_must_fail, a_stale_write_accepted_by_the_resource_is_caught) {
    builder b;
    b.res("open", 1, true).res("open", 2, true);
    b.res("write", 2, true, 0, 1).res("write", 1, true, 1, 2); // fence 1 after fence 2
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::resource});
    EXPECT_TRUE(has_kind(r, check::resource, "STALE_ACCEPTED"));
}

TEST(checker_must_fail,
     a_lost_update_on_a_resource_that_ratchets_on_write_but_not_on_open_is_caught) {
    // A (fence 1) and B (fence 2) both read 0; A writes first (accepted: no write above 1 yet),
    // then B writes 0 -> 1 (accepted: 2 > 1). A's increment is lost.
    builder b;
    b.res("open", 1, true).res("open", 2, true);
    b.res("write", 1, true, 0, 1)
        .res("write", 2, true, 0, 1)
        .res("final", std::nullopt, true, std::nullopt, 1);
    auto r = run_checks(b.build());
    EXPECT_TRUE(r.violated(check::resource));
    EXPECT_TRUE(has_kind(r, check::resource, "LOST_UPDATE"));
    EXPECT_TRUE(has_kind(r, check::resource, "FINAL_VALUE"));
}

TEST(checker_must_fail, a_lost_update_on_an_unfenced_resource_is_caught) {
    builder b;
    b.res("write", std::nullopt, true, 0, 1).res("write", std::nullopt, true, 0, 1);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::resource});
    EXPECT_TRUE(has_kind(r, check::resource, "LOST_UPDATE"));
}

TEST(checker_must_fail, a_deadline_that_is_not_start_plus_ttl_minus_drift_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms);
    b.last().deadline = 1000 * ms; // forgot the drift (12 ms)
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "WRONG_DEADLINE"));
}

TEST(checker_must_fail, a_start_stamp_later_than_the_first_proxy_forward_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 2 * ms);
    b.last().t_start = 1 * ms;
    b.last().deadline = deadline_for(1 * ms, 1000);
    b.last().t_first_fwd = ms / 2;
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "START_AFTER_SEND"));
}

TEST(checker_must_fail, a_start_stamp_before_the_invoke_is_caught) {
    builder b;
    b.acquire(1, 1, 5 * ms, 6 * ms);
    b.last().t_start = 4 * ms;
    b.last().deadline = deadline_for(4 * ms, 1000);
    auto r = run_checks(b.build());
    EXPECT_TRUE(has_kind(r, check::deadline, "START_BEFORE_INVOKE"));
}

TEST(checker_must_fail, an_extend_whose_deadline_ignores_the_drift_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).extend(1, 2, 100 * ms, 101 * ms);
    b.last().deadline = 1100 * ms;
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "WRONG_DEADLINE"));
    EXPECT_NE(r[check::deadline].violations[0].witness.find("extend ok"), std::string::npos);
}

TEST(checker_must_fail, an_acquire_that_returns_at_or_after_its_deadline_is_caught) {
    builder b;
    b.acquire(1, 1, 0, deadline_for(0, 1000));
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "EXPIRED_ON_ARRIVAL"));
}

TEST(checker_must_fail, an_acquire_returning_late_is_a_deadline_violation_not_an_overlap) {
    // w1's reply came 500 ms after its deadline, while w2 held the lock: an empty window.
    builder b;
    b.acquire(1, 1, 0, deadline_for(0, 1000) + 500 * ms);
    b.acquire(2, 1, 1100 * ms, 1200 * ms).release(2, 2, 1600 * ms, 1601 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "EXPIRED_ON_ARRIVAL"));
}

TEST(checker_must_fail, a_release_deleting_the_key_while_another_holds_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms);               // deadline 988 ms
    b.acquire(2, 1, 500 * ms, 990 * ms);      // takes over after expiry
    b.release(1, 2, 1000 * ms, 1001 * ms, 1); // deletes B's key
    b.release(2, 2, 1200 * ms, 1201 * ms, 0);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::foreign_release});
    EXPECT_TRUE(has_kind(r, check::foreign_release, "FOREIGN_RELEASE"));
}

TEST(checker_must_fail, an_orphan_key_is_reported) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).release(1, 2, 2 * ms, 3 * ms);
    auto r = run_checks(b.build(), {"dlock:L"});
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::orphans});
    EXPECT_NE(r[check::orphans].violations[0].witness.find("dlock:L"), std::string::npos);
    EXPECT_FALSE(check_orphans({}).violated);
}

TEST(checker_must_fail, a_use_outside_the_hold_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).use(1, 2, 2 * ms, 3 * ms).release(1, 3, 4 * ms, 5 * ms);
    b.use(1, 4, 6 * ms, 7 * ms); // careless user: after its release
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::use_within_hold});
    EXPECT_EQ(r[check::use_within_hold].violations.size(), 2u); // invoke and ok
}

TEST(checker_must_fail, an_unavailability_gap_above_the_bound_is_caught_when_a_bound_is_given) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).release(1, 2, 2 * ms, 3 * ms);
    b.acquire(2, 1, 2 * ms, 500 * ms).release(2, 2, 600 * ms, 601 * ms);
    auto h = b.build();
    EXPECT_FALSE(run_checks(h).violated(check::liveness));
    checker_options o;
    o.max_liveness_gap_ns = 100 * ms;
    auto r = run_checks(h, {}, o);
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::liveness});
    EXPECT_NE(r[check::liveness].violations[0].witness.find("498000000 ns"), std::string::npos);
}

// ---- the audit's missing plants (fault-suite review §1) ----

TEST(checker_must_fail, a_stale_open_accepted_by_the_resource_is_caught) {
    builder b;
    b.res("open", 2, true).res("open", 1, true); // fence 1 opened after fence 2 was seen
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::resource});
    EXPECT_TRUE(has_kind(r, check::resource, "STALE_OPEN_ACCEPTED"));
}

TEST(checker_must_pass, two_lock_names_are_kept_apart) {
    // The same windows and fences on two names: no overlap, no stale fence, no lost update.
    builder b;
    b.on("A").acquire(1, 1, 0, 1 * ms, 5).res("open", 5, true).res("write", 5, true, 0, 1);
    b.on("B").acquire(2, 1, 2 * ms, 3 * ms, 1).res("open", 1, true).res("write", 1, true, 0, 1);
    b.on("A").release(1, 2, 50 * ms, 51 * ms);
    b.on("B").release(2, 2, 60 * ms, 61 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_fail, the_same_windows_on_one_lock_name_overlap) {
    builder b;
    b.on("A").acquire(1, 1, 0, 1 * ms, 5).acquire(2, 1, 2 * ms, 3 * ms, 6);
    b.release(1, 2, 50 * ms, 51 * ms).release(2, 2, 60 * ms, 61 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::mutex});
    EXPECT_NE(r[check::mutex].violations[0].witness.find("lock A"), std::string::npos);
}

TEST(checker_must_fail, a_use_with_another_holds_token_is_outside_the_hold) {
    // w1 holds (token tok1_1) and uses it with the token of an older hold of its own.
    builder b;
    b.acquire(1, 1, 0, 1 * ms).use_of(1, 2, 1, 2 * ms, 3 * ms).release(1, 3, 4 * ms, 5 * ms);
    b.acquire(1, 4, 6 * ms, 7 * ms).use_of(1, 5, 1, 8 * ms, 9 * ms).release(1, 6, 10 * ms, 11 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::use_within_hold});
    EXPECT_EQ(r[check::use_within_hold].violations.size(), 2u); // invoke and ok of op 5
}

TEST(checker_must_fail, a_failed_or_unknown_extend_does_not_move_the_deadline) {
    for (op_type type : {op_type::fail, op_type::info}) {
        SCOPED_TRACE(to_string(type));
        // deadline 988 ms; the extend did not succeed, whatever deadline its event carries;
        // w2 takes the lock after 988 ms: no overlap; w1's use at 990 ms is outside its hold.
        builder b;
        b.acquire(1, 1, 0, 1 * ms).extend_not(1, 2, 500 * ms, 501 * ms, type, 1500 * ms);
        b.use(1, 3, 990 * ms, 991 * ms).release(1, 4, 992 * ms, 993 * ms, 0);
        b.acquire(2, 1, 900 * ms, 989 * ms).release(2, 2, 1100 * ms, 1101 * ms);
        auto r = run_checks(b.build());
        EXPECT_EQ(r.holds[0].deadline, deadline_for(0, 1000));
        EXPECT_EQ(violated_checks(r), std::vector<check>{check::use_within_hold})
            << format_report(r);
    }
}

TEST(checker_must_fail, an_acquisition_reported_without_its_deadline_is_caught) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms).release(1, 2, 2 * ms, 3 * ms);
    b.events()[1].deadline.reset();
    b.events()[1].t_start.reset();
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::deadline});
    EXPECT_TRUE(has_kind(r, check::deadline, "NO_DEADLINE"));
}

// ---- LOSS: watchdog leases and their loss signal ----

TEST(checker_must_pass, a_renewed_hold_released_in_time_passes) {
    // Renewals sent at 330 and 660 ms, seen at 340 and 700 ms: deadline 1648 ms; released at
    // 1200 ms; w2 gets the lock at 1300 ms.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).use_of(1, 2, 1, 100 * ms, 300 * ms);
    b.renewal(1, 3, 1, 330 * ms, 340 * ms).use_of(1, 4, 1, 400 * ms, 650 * ms);
    b.renewal(1, 5, 1, 660 * ms, 700 * ms).use_of(1, 6, 1, 900 * ms, 1150 * ms);
    b.release(1, 7, 1200 * ms, 1201 * ms);
    b.acquire(2, 1, 500 * ms, 1300 * ms).release(2, 2, 1400 * ms, 1401 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
    EXPECT_EQ(r.holds[0].renewals, 2);
    EXPECT_EQ(r.holds[0].deadline, deadline_for(660 * ms, 1000));
}

TEST(checker_must_pass, a_loss_signalled_at_the_deadline_then_a_failed_release_passes) {
    // Renewal at 330 ms (deadline 1318 ms), then the partition: lost at 1320 ms; the release
    // after it says not_owner; w2 takes the lock after the server's key expired.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).renewal(1, 2, 1, 330 * ms, 350 * ms);
    b.use_of(1, 3, 1, 400 * ms, 600 * ms).lost(1, 1, 1320 * ms);
    b.release(1, 4, 1400 * ms, 1401 * ms, 0);
    b.acquire(2, 1, 1000 * ms, 1340 * ms).release(2, 2, 1500 * ms, 1501 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
    EXPECT_NE(r[check::loss].notes[0].find("lost 1"), std::string::npos) << r[check::loss].notes[0];
}

TEST(checker_must_pass, a_loss_signal_logged_after_the_release_invoke_still_counts) {
    // The client's thread logs the loss 5 ms after the holder began its release.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).release(1, 2, 990 * ms, 995 * ms, 0).lost(1, 1, 995 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_fail, a_loss_signalled_late_is_caught) {
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).lost(1, 1, 1300 * ms); // deadline 988 ms: 312 ms late
    b.release(1, 2, 1310 * ms, 1311 * ms, 0);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::loss}) << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOST_LATE"));
    checker_options o;
    o.loss_tolerance_ns = 400 * ms; // the tolerance is what decides
    EXPECT_FALSE(run_checks(b.build(), {}, o).violated(check::loss));
}

TEST(checker_must_fail, a_belief_used_after_its_last_deadline_without_a_loss_signal_is_caught) {
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).renewal(1, 2, 1, 330 * ms, 340 * ms); // deadline 1318 ms
    b.use_of(1, 3, 1, 1400 * ms, 1500 * ms).release(1, 4, 1510 * ms, 1511 * ms, 0);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), (std::vector<check>{check::use_within_hold, check::loss}))
        << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOSS_UNSIGNALLED"));
}

TEST(checker_must_fail, a_release_long_after_the_deadline_without_a_loss_signal_is_caught) {
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).release(1, 2, 1500 * ms, 1501 * ms, 0);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::loss}) << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOSS_UNSIGNALLED"));
}

TEST(checker_must_fail, a_belief_resting_on_an_extend_that_was_never_ok_is_caught) {
    // The holder counted on an extension that timed out (info) and went on using the lock past
    // its only proven deadline (988 ms), unsignalled; w2 got the lock in between.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).extend_not(1, 2, 300 * ms, 800 * ms, op_type::info, 1288 * ms);
    b.use_of(1, 3, 1, 1000 * ms, 1200 * ms).release(1, 4, 1250 * ms, 1251 * ms, 0);
    b.acquire(2, 1, 900 * ms, 1100 * ms).release(2, 2, 1300 * ms, 1301 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(r.holds[0].deadline, deadline_for(0, 1000));
    EXPECT_EQ(violated_checks(r), (std::vector<check>{check::use_within_hold, check::loss}))
        << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOSS_UNSIGNALLED"));
}

TEST(checker_must_fail, a_renewal_sent_after_the_deadline_is_caught) {
    // A renewal counted from 1000 ms, after the deadline of 988 ms: the belief had a gap.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).renewal(1, 2, 1, 1000 * ms, 1005 * ms);
    b.release(1, 3, 1100 * ms, 1101 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(has_kind(r, check::extend_expired, "EXTEND_EXPIRED")) << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOSS_UNSIGNALLED")) << format_report(r);
}

TEST(checker_must_fail, a_use_after_the_loss_signal_is_outside_the_hold) {
    // Told "not yours" at 500 ms (before its deadline); used the lock at 600 ms anyway.
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).lost(1, 1, 500 * ms).use_of(1, 2, 1, 600 * ms, 700 * ms);
    b.release(1, 3, 710 * ms, 711 * ms, 0);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::use_within_hold}) << format_report(r);
    EXPECT_EQ(r.holds[0].t_end, 500 * ms);
}

TEST(checker_must_fail, a_second_holder_before_the_loss_signal_overlaps_and_after_it_does_not) {
    for (std::int64_t t2 : {400 * ms, 600 * ms}) {
        builder b;
        b.acquire_wd(1, 1, 0, 1 * ms).lost(1, 1, 500 * ms).release(1, 2, 550 * ms, 551 * ms, 0);
        b.acquire(2, 1, 300 * ms, t2).release(2, 2, 900 * ms, 901 * ms);
        auto r = run_checks(b.build());
        EXPECT_EQ(r.violated(check::mutex), t2 < 500 * ms) << format_report(r);
    }
}

TEST(checker_must_fail, a_loss_signal_for_no_hold_is_caught) {
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).release(1, 2, 100 * ms, 101 * ms).lost(1, 9, 200 * ms);
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), std::vector<check>{check::loss}) << format_report(r);
    EXPECT_TRUE(has_kind(r, check::loss, "LOST_WITHOUT_HOLD"));
}

TEST(checker_must_fail, a_watchdog_hold_without_a_deadline_is_caught_by_loss_too) {
    builder b;
    b.acquire_wd(1, 1, 0, 1 * ms).release(1, 2, 100 * ms, 101 * ms);
    b.events()[1].deadline.reset();
    b.events()[1].t_start.reset();
    auto r = run_checks(b.build());
    EXPECT_EQ(violated_checks(r), (std::vector<check>{check::deadline, check::loss}));
    EXPECT_TRUE(has_kind(r, check::loss, "NO_DEADLINE"));
}

// ---- must pass ----

TEST(checker_must_pass, touching_intervals_are_not_an_overlap) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 1).release(1, 2, 5 * ms, 6 * ms);
    b.acquire(2, 1, 2 * ms, 5 * ms, 2).release(2, 2, 7 * ms, 8 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_pass, concurrent_acquisitions_may_have_swapped_fences) {
    // A invokes first and completes last with the lower fence: allowed, neither completed
    // before the other was invoked.
    builder b;
    b.acquire(2, 1, 1 * ms, 2 * ms, 2).release(2, 2, 3 * ms, 4 * ms);
    b.acquire(1, 1, 0, 4 * ms, 1).release(1, 2, 5 * ms, 6 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_pass, ambiguous_acquisitions_with_burned_fences_leave_gaps_that_are_allowed) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 1).release(1, 2, 2 * ms, 3 * ms);
    b.acquire_not(2, 1, 4 * ms, 5 * ms, op_type::info, 2);
    b.acquire_not(3, 1, 4 * ms, 5 * ms, op_type::fail);
    b.acquire(2, 2, 6 * ms, 7 * ms, 5).release(2, 3, 8 * ms, 9 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_pass, a_crash_with_no_release_ends_the_hold_at_the_crash) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 1).crash(1, 10 * ms);
    b.acquire(2, 1, 5 * ms, 990 * ms, 2).release(2, 2, 991 * ms, 992 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
    ASSERT_EQ(r.holds.size(), 2u);
    EXPECT_EQ(r.holds[0].t_end, 10 * ms);
}

TEST(checker_must_pass, a_hold_that_expires_without_release_hands_over_at_its_deadline) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 1);
    b.acquire(2, 1, 5 * ms, deadline_for(0, 1000), 2).release(2, 2, 991 * ms, 992 * ms);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

TEST(checker_must_pass, a_fenced_read_modify_write_history_passes_with_the_right_final_value) {
    builder b;
    b.acquire(1, 1, 0, 1 * ms, 1).use(1, 2, 2 * ms, 3 * ms).release(1, 3, 4 * ms, 5 * ms);
    b.acquire(2, 1, 2 * ms, 4 * ms, 2).use(2, 2, 5 * ms, 6 * ms).release(2, 3, 7 * ms, 8 * ms);
    b.res("open", 1, true).res("write", 1, true, 0, 1).res("open", 2, true);
    b.res("write", 2, true, 1, 2)
        .res("write", 1, false, 2, 3)
        .res("final", std::nullopt, true, std::nullopt, 2);
    auto r = run_checks(b.build());
    EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
}

// ---- the format ----

TEST(history_format, the_writer_round_trips_escapes_integers_and_bools) {
    jsonl_writer w;
    std::string line = w.field("s", "a\"b\\c\nd\x01")
                           .field("i", std::int64_t{-9223372036854775807LL})
                           .field("b", true)
                           .line();
    std::string err;
    auto o = parse_flat_json(std::string_view(line).substr(0, line.size() - 1), err);
    ASSERT_TRUE(o) << err;
    EXPECT_EQ(std::get<std::string>(o->at("s")), "a\"b\\c\nd\x01");
    EXPECT_EQ(std::get<std::int64_t>(o->at("i")), -9223372036854775807LL);
    EXPECT_EQ(std::get<bool>(o->at("b")), true);
}

TEST(history_format,
     the_parser_rejects_anything_but_flat_string_integer_and_bool_fields_naming_the_line) {
    const char* bad[] = {
        R"({"w":1,"x":null})",
        R"({"w":1.5})",
        R"({"w":{"a":1}})",
        R"({"w":[1]})",
        R"({"w":1,"w":2})",
        R"({"w":1)",
        R"({"w":1} x)",
        R"({"w":99999999999999999999})",
        R"(["w"])",
        R"({"w":1,"op":1,"lock":"L","f":"acquire","type":"maybe","t":1})",
        R"({"w":1,"op":1,"lock":"L","f":"acquire","type":"ok","t":"1"})",
        R"({"seq":1,"lock":"L","kind":"open","accepted":1})",
    };
    for (const char* line : bad) {
        history h;
        std::string text = std::string(R"({"nemesis":"pause","t":1})") + "\n" + line + "\n";
        auto err = add_jsonl(h, "w.jsonl", text);
        ASSERT_TRUE(err) << line;
        EXPECT_EQ(err->message.rfind("w.jsonl:2: ", 0), 0u) << err->message;
    }
}

TEST(history_format,
     worker_logs_are_merged_by_time_with_invokes_before_completions_at_equal_times) {
    history h;
    ASSERT_FALSE(add_jsonl(h, "a", R"({"w":1,"op":1,"lock":"L","f":"acquire","type":"ok","t":5})"));
    ASSERT_FALSE(add_jsonl(
        h, "b",
        "\n{\"w\":2,\"op\":1,\"lock\":\"L\",\"f\":\"acquire\",\"type\":\"invoke\",\"t\":5}\n"
        R"({"w":2,"op":0,"lock":"L","f":"acquire","type":"invoke","t":1})"));
    finish(h);
    ASSERT_EQ(h.events.size(), 3u);
    EXPECT_EQ(h.events[0].t, 1);
    EXPECT_EQ(h.events[1].type, op_type::invoke);
    EXPECT_EQ(h.events[2].type, op_type::ok);
    EXPECT_EQ(h.events[1].source, "b:2");
}

// ---- property: random schedules of a sequential lock model ----

struct schedule {
    builder b;
    std::int64_t workers = 0;
};

/// A sequential lock: one hold at a time; contenders wait or fail; some acquisitions are
/// ambiguous and burn a fence; holders release, let expire, or crash; each hold does one fenced
/// read-modify-write on the resource; some holders extend.
schedule generate(std::uint64_t seed, int holds) {
    std::mt19937_64 rng(seed);
    auto uni = [&](std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    schedule s;
    s.workers = 5;
    std::vector<std::int64_t> next_op(static_cast<std::size_t>(s.workers) + 1, 1);
    auto op = [&](std::int64_t w) { return next_op[static_cast<std::size_t>(w)]++; };
    builder& b = s.b;
    std::int64_t fence = 0, value = 0;
    std::int64_t w = 1, t_inv = 1 * ms, free_at = 0;
    const std::int64_t ttls[] = {100, 500, 1000};
    for (int i = 0; i < holds; ++i) {
        std::int64_t ttl = ttls[uni(0, 2)];
        std::int64_t t_start = t_inv + uni(0, 50'000);
        std::int64_t t_ok = std::max(t_start + uni(100'000, 2 * ms), free_at + uni(1, 500'000));
        std::int64_t f = ++fence;
        b.acquire(w, op(w), t_inv, t_ok, f, ttl);
        b.last().t_start = t_start;
        b.last().deadline = deadline_for(t_start, ttl);
        b.last().t_first_fwd = t_start + uni(0, 20'000);
        std::int64_t deadline = deadline_for(t_start, ttl);
        std::int64_t len = uni(1 * ms, 50 * ms);
        // a failing or ambiguous contender during the hold
        if (uni(0, 9) < 4) {
            std::int64_t c = 1 + (w + uni(0, s.workers - 2)) % s.workers;
            bool burn = uni(0, 3) == 0;
            b.acquire_not(c, op(c), t_ok + 1000, t_ok + len / 2,
                          burn ? op_type::info : op_type::fail,
                          burn ? std::optional<std::int64_t>(++fence) : std::nullopt);
        }
        std::int64_t uop = op(w);
        b.use(w, uop, t_ok + len / 4, t_ok + len / 2);
        b.res("open", f, true).res("write", f, true, value, value + 1);
        ++value;
        if (uni(0, 4) == 0) {
            std::int64_t ext = t_ok + len * 2 / 3;
            b.extend(w, op(w), ext, ext + 100'000, ttl);
            deadline = deadline_for(ext, ttl);
        }
        std::int64_t end = t_ok + len;
        int how = static_cast<int>(uni(0, 19));
        std::int64_t next_w = 1 + uni(0, s.workers - 1);
        if (how == 0) { // crash: the key lives until the deadline
            b.crash(w, end);
            free_at = deadline;
            t_inv = std::max(end, deadline - uni(0, 20 * ms)) + 1;
            if (next_w == w) next_w = w % s.workers + 1;
        } else if (how <= 2) { // let it expire
            free_at = deadline;
            t_inv = deadline + uni(0, 5 * ms);
        } else {
            b.release(w, op(w), end, end + uni(50'000, 300'000));
            free_at = end;
            t_inv = next_w == w ? end + 400'000 : end - uni(0, len / 2);
        }
        w = next_w;
    }
    b.res("final", std::nullopt, true, std::nullopt, value);
    return s;
}

const std::uint64_t seeds[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597};

TEST(checker_property, random_valid_schedules_from_a_sequential_lock_model_pass) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        auto s = generate(seed, 200);
        auto r = run_checks(s.b.build());
        EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
        EXPECT_EQ(r.holds.size(), 200u);
    }
}

TEST(checker_property, the_same_schedules_with_one_planted_overlap_fail_mutex) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        auto s = generate(seed, 200);
        auto h0 = s.b.build();
        std::mt19937_64 rng(seed * 7 + 1);
        const auto& hs = run_checks(h0).holds;
        const hold& victim = hs[std::uniform_int_distribution<std::size_t>(0, hs.size() - 1)(rng)];
        std::int64_t intruder = s.workers + 1;
        s.b.acquire(intruder, 1, victim.t_ok + 1000, victim.t_ok + 2000);
        s.b.release(intruder, 2, victim.t_ok + 3000, victim.t_ok + 4000);
        auto r = run_checks(s.b.build());
        EXPECT_TRUE(has_kind(r, check::mutex, "OVERLAP")) << format_report(r);
    }
}

TEST(checker_property, the_same_schedules_with_one_repeated_fence_fail_fence) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        auto s = generate(seed, 200);
        std::vector<op_event*> oks;
        for (auto& e : s.b.events())
            if (e.f == op_kind::acquire && e.type == op_type::ok) oks.push_back(&e);
        std::mt19937_64 rng(seed * 7 + 2);
        std::size_t k = std::uniform_int_distribution<std::size_t>(1, oks.size() - 1)(rng);
        oks[k]->fence = oks[k - 1]->fence;
        auto r = run_checks(s.b.build());
        EXPECT_EQ(violated_checks(r), std::vector<check>{check::fence}) << format_report(r);
        EXPECT_TRUE(has_kind(r, check::fence, "FENCE_REPEATED"));
    }
}

TEST(checker_property, the_same_schedules_with_one_stale_write_fail_resource) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        auto s = generate(seed, 200);
        auto& res = s.b.resource();
        std::mt19937_64 rng(seed * 7 + 3);
        // after the open of a fence >= 2, a write with the previous fence is accepted
        std::size_t p = 0;
        do {
            p = std::uniform_int_distribution<std::size_t>(0, res.size() - 2)(rng);
        } while (res[p].kind != "open" || res[p].fence.value_or(0) < 2);
        resource_entry stale = res[p];
        stale.kind = "write";
        stale.fence = *res[p].fence - 1;
        stale.before = res[p + 1].before;
        stale.after = res[p + 1].before;
        res.insert(res.begin() + static_cast<std::ptrdiff_t>(p) + 1, stale);
        for (std::size_t i = 0; i < res.size(); ++i)
            res[i].seq = static_cast<std::int64_t>(i) + 1;
        auto r = run_checks(s.b.build());
        EXPECT_EQ(violated_checks(r), std::vector<check>{check::resource}) << format_report(r);
        EXPECT_TRUE(has_kind(r, check::resource, "STALE_ACCEPTED"));
    }
}

/// A sequential lock held with watchdog leases: renewals every TTL/3 (each seen by its holder a
/// little later), uses between them; a hold ends by release before its deadline or by a loss
/// (the renewals stop): signalled within 5 ms of the last renewed deadline, the holder releases
/// 120-200 ms after (not_owner), and the next holder gets the lock after the server's expiry.
/// The first hold always ends by a loss. `lost_holds` lists (worker, acquire op) of the losses.
struct wd_schedule {
    builder b;
    std::vector<std::pair<std::int64_t, std::int64_t>> lost_holds;
};

wd_schedule generate_watchdog(std::uint64_t seed, int holds) {
    std::mt19937_64 rng(seed);
    auto uni = [&](std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    wd_schedule s;
    const std::int64_t workers = 4;
    std::vector<std::int64_t> next_op(workers + 1, 1);
    auto op = [&](std::int64_t w) { return next_op[static_cast<std::size_t>(w)]++; };
    // A worker is sequential: it tries again only after its last release returned.
    std::vector<std::int64_t> busy(workers + 1, 0);
    builder& b = s.b;
    std::int64_t w = 1, t_inv = 1 * ms, free_at = 0;
    const std::int64_t ttls[] = {300, 1000};
    for (int i = 0; i < holds; ++i) {
        t_inv = std::max(t_inv, busy[static_cast<std::size_t>(w)] + 1000);
        const std::int64_t ttl = ttls[uni(0, 1)];
        const std::int64_t period = ttl * ms / 3;
        std::int64_t t_start = std::max(t_inv, free_at) + uni(0, 50'000);
        std::int64_t t_ok = t_start + uni(100'000, 2 * ms);
        const std::int64_t hop = op(w);
        b.acquire_wd(w, hop, t_inv, t_ok);
        b.last().t_start = t_start;
        b.last().ttl_ms = ttl;
        b.last().deadline = deadline_for(t_start, ttl);
        std::int64_t deadline = deadline_for(t_start, ttl);
        std::int64_t seen = t_ok;
        const std::int64_t renewals = uni(0, 3);
        for (std::int64_t k = 1; k <= renewals; ++k) {
            std::int64_t u0 = seen + uni(100'000, period / 4);
            b.use_of(w, op(w), hop, u0, u0 + uni(100'000, period / 4));
            std::int64_t sent = t_start + k * period;
            seen = sent + uni(10'000, period / 10);
            b.renewal(w, op(w), hop, sent, seen, ttl);
            deadline = deadline_for(sent, ttl);
        }
        std::int64_t u0 = seen + uni(100'000, period / 4);
        std::int64_t u1 = u0 + uni(100'000, period / 4);
        b.use_of(w, op(w), hop, u0, u1);
        std::int64_t next_w = 1 + uni(0, workers - 1);
        if (i == 0 || uni(0, 3) == 0) { // the renewals stop: a loss at the deadline
            std::int64_t lost = deadline + uni(0, 5 * ms);
            b.lost(w, hop, lost);
            std::int64_t rel = lost + uni(120 * ms, 200 * ms);
            b.release(w, op(w), rel, rel + 100'000, 0);
            busy[static_cast<std::size_t>(w)] = rel + 100'000;
            s.lost_holds.emplace_back(w, hop);
            free_at = deadline + drift_ns(ttl) + uni(1, 2 * ms);
            t_inv = free_at - uni(0, 20 * ms);
            if (next_w == w) next_w = w % workers + 1;
        } else {
            std::int64_t end = u1 + uni(100'000, 5 * ms);
            b.release(w, op(w), end, end + 50'000);
            busy[static_cast<std::size_t>(w)] = end + 50'000;
            free_at = end;
            t_inv = end - uni(0, 2 * ms);
        }
        w = next_w;
    }
    return s;
}

TEST(checker_property, random_valid_watchdog_schedules_pass) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        auto s = generate_watchdog(seed, 200);
        auto r = run_checks(s.b.build());
        EXPECT_TRUE(violated_checks(r).empty()) << format_report(r);
        EXPECT_EQ(r.holds.size(), 200u);
    }
}

TEST(checker_property, the_same_watchdog_schedules_with_one_late_or_missing_loss_fail_loss) {
    for (auto seed : seeds) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        for (bool remove : {false, true}) {
            auto s = generate_watchdog(seed, 200);
            std::mt19937_64 rng(seed * 7 + 4);
            auto [lw, lop] = s.lost_holds[std::uniform_int_distribution<std::size_t>(
                0, s.lost_holds.size() - 1)(rng)];
            auto& evs = s.b.events();
            auto it = std::find_if(evs.begin(), evs.end(), [&](const op_event& e) {
                return e.f == op_kind::lost && e.w == lw && e.op == lop;
            });
            ASSERT_NE(it, evs.end());
            if (remove)
                evs.erase(it); // the holder released 120-200 ms past its deadline, untold
            else
                it->t += 150 * ms; // signalled 150-155 ms after the deadline
            auto r = run_checks(s.b.build());
            EXPECT_EQ(violated_checks(r), std::vector<check>{check::loss}) << format_report(r);
            EXPECT_TRUE(has_kind(r, check::loss, remove ? "LOSS_UNSIGNALLED" : "LOST_LATE"));
            EXPECT_EQ(r[check::loss].violations.size(), 1u);
        }
    }
}

} // namespace
