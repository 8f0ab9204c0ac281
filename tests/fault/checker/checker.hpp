#pragma once

// The history checker of reliability.md §8: derives each holder's belief window from the events
// and runs the checks of §8.3. Sans-I/O: input is a parsed `history` (and, for ORPHANS, the list
// of keys an admin SCAN found after the run); output is a verdict per check with witnesses.

#include "history.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock::fault {

/// A derived hold (§8.2): from `acquire ok` to min(final deadline, release invoke, crash, loss
/// signal).
struct hold {
    std::int64_t w = 0;
    std::int64_t op = 0;
    std::string lock;
    std::optional<std::string> token_h;
    std::optional<std::int64_t> fence;
    std::int64_t t_inv = 0;
    std::int64_t t_ok = 0;
    std::int64_t deadline = 0; // final, after extends; INT64_MAX when the event had none
    std::int64_t t_end = 0;
    bool watchdog = false;               // renewed by the client (acquire ok "watchdog":true)
    std::optional<std::int64_t> t_lost;  // the holder's first loss signal (f "lost")
    std::optional<std::int64_t> t_close; // release invoke, crash or the next acquisition
    std::int64_t renewals = 0;           // extend ok events that moved the deadline
    std::string source;
};

enum class check {
    mutex,
    extend_expired,
    deadline,
    use_within_hold,
    fence,
    resource,
    foreign_release,
    orphans,
    liveness,
    loss,
};
inline constexpr int check_count = 10;

const char* to_string(check c) noexcept;
std::optional<check> check_from_string(std::string_view name);

struct violation {
    check what = check::mutex;
    std::string kind;    // e.g. OVERLAP, FENCE_REPEATED, STALE_ACCEPTED, LOST_UPDATE
    std::string witness; // printable, multi-line
};

struct check_result {
    check what = check::mutex;
    bool violated = false;
    std::vector<violation> violations;
    std::vector<std::string> notes; // counters and reports (LIVENESS gaps, max overlap, ...)
};

struct checker_options {
    /// LIVENESS is reported; it is a violation only when a gap exceeds this bound.
    std::optional<std::int64_t> max_liveness_gap_ns;
    /// Tolerance of the deadline arithmetic (rounding).
    std::int64_t deadline_tolerance_ns = 1000;
    /// LOSS: how late after a hold's last proven deadline its loss signal may come (the
    /// client's deadline timer firing on a loaded machine), and how long after it the holder
    /// may still act (release invoke) without one.
    std::int64_t loss_tolerance_ns = 100'000'000;
};

/// dlock's clock-drift allowance: lease * 1% + 2 ms, in ns.
std::int64_t drift_ns(std::int64_t ttl_ms) noexcept;

struct report {
    std::vector<hold> holds;
    std::vector<check_result> results; // one per check, in enum order
    const check_result& operator[](check c) const { return results[static_cast<std::size_t>(c)]; }
    bool violated(check c) const { return (*this)[c].violated; }
};

/// Derives the holds of a finished history.
std::vector<hold> derive_holds(const history& h, std::vector<violation>* extend_expired = nullptr);

/// Runs every check. `leftover_keys` is what an admin SCAN found after TTL + epsilon (ORPHANS).
report run_checks(const history& h, const std::vector<std::string>& leftover_keys = {},
                  const checker_options& opts = {});

/// ORPHANS alone: every leftover key is a violation.
check_result check_orphans(const std::vector<std::string>& leftover_keys);

/// The printed verdicts and witnesses.
std::string format_report(const report& r);

} // namespace dlock::fault
