// postgres/advisory_sessions.hpp: the holding sessions of advisory locks (docs/design/postgres.md,
// "Many advisory locks per session"). A holding session holds any number of DISTINCT keys:
// session locks stack, so one session must never take the same key twice (two owners would share
// one lock, and the first unlock would not free it). A key reserved by a try in flight, held, or
// being unlocked counts as on the session; the kind (shared or not) does not matter.
//
// One `SELECT 1` every check_period / 2 proves every hold on the session: valid_until = its send
// time + check_period. A session that ends, misses a check or fails an unlock loses every hold on
// it at once, each with its loss signal. A session that holds nothing leaves the set and goes back
// to the engine's idle pool.
//
// The choice of a session for a try (choose_session) and the names (key_id, holding_app_name)
// are sans-I/O, unit-tested in tests/unit/postgres/postgres_advisory_sessions_test.cpp.
#pragma once

#include "core/hold.hpp"
#include "postgres/advisory_key.hpp"
#include "postgres/connection.hpp"

#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace dlock::detail::pg {

class engine;
class advisory_hold;

// --- sans-I/O -------------------------------------------------------------------------------

/// What choose_session() knows of one holding session.
struct session_load {
    bool has_key = false;      ///< the key is held, reserved or being unlocked there
    bool exclusive = false;    ///< takes no try (a hashtext key's or a leader's session)
    std::size_t in_flight = 0; ///< batches sent and not answered
    std::size_t keys = 0;      ///< keys on it
};

/// Where a try for a key goes.
struct session_choice {
    enum class action {
        use,  ///< the session `index`
        open, ///< another session
        wait, ///< in line until a session finishes a batch (engine::waiting_tries)
    };
    action what = action::open;
    std::size_t index = 0;
    bool operator==(const session_choice&) const = default;
};

/// How many batches a try may be sent behind on a holding session.
inline constexpr std::size_t max_batches_ahead = 1;

/// The session a try for a key goes to: among those without the key and not exclusive, the
/// least loaded (fewest batches in flight, then fewest keys, then the first) when it has
/// nothing in flight. Otherwise another session while fewer than `pool` are open or opening
/// (`opening`); else the least loaded if at most max_batches_ahead are in flight there;
/// another session when no session may take the key and none is being opened; else wait (a
/// session frees up after a batch). A try never joins a long pipeline: a server backend with
/// a queue of batches stays runnable and shares its CPU with the others by the scheduler's
/// time slices (milliseconds each), while one batch ahead keeps the backend busy without
/// that (B's p99, BENCHMARKS.md, docs/design/postgres.md).
session_choice choose_session(const std::vector<session_load>& sessions, std::size_t pool,
                              std::size_t opening);

/// The identity of a key on a session: the form and value (the hashtext name for server-hashed
/// keys), never the kind.
std::string key_id(const advisory_key& k);

/// application_name of a holding session that will hold `count` keys, the last one `name`:
/// "dlock:<name>" (cut as app_name_for) when it is the only one, else "dlock<count>".
std::string holding_app_name(std::string_view name, std::size_t count);

// --- the holding session --------------------------------------------------------------------

class holding_session : public std::enable_shared_from_this<holding_session> {
public:
    /// `exclusive`: takes no try (holds one key only).
    holding_session(engine& e, std::shared_ptr<connection> c, bool exclusive);
    holding_session(const holding_session&) = delete;
    holding_session& operator=(const holding_session&) = delete;

    connection& conn() noexcept { return *conn_; }
    bool exclusive() const noexcept { return exclusive_; }
    bool left() const noexcept { return left_; }
    bool checking() const noexcept { return checking_; }
    std::size_t keys() const noexcept { return keys_.size(); }
    bool has(const std::string& id) const { return keys_.count(id) != 0; }
    session_load load(const std::string& id) const;

    /// A try for `id` is about to be sent here.
    void reserve(const std::string& id);
    /// The try was not granted (or its key is unlocked): the key leaves; the session leaves the
    /// set when it holds nothing.
    void remove(const std::string& id);
    /// The try (or wait) for `id` was granted `h`, in a batch sent at `sent` (which proves the
    /// session as a check would).
    void add(const std::string& id, const std::shared_ptr<advisory_hold>& h,
             std::chrono::steady_clock::time_point sent);
    /// Unlocks `id` (a hold dropped or lost without release) and removes it.
    void drop(const std::string& id, statement unlock);
    /// One `SELECT 1` now (extend()); done: clear when it proved the session.
    void check(std::function<void(std::error_code)> done);
    /// The session is gone or unproven: every hold on it is lost, the session closed.
    void fail_all(loss_cause cause);
    /// Name and key of every hold here whose key is known on the client (list).
    void
    names(std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::string>& out) const;

private:
    struct entry {
        std::weak_ptr<advisory_hold> hold{}; ///< empty while reserved
        std::string name{};
        advisory_key key{};
    };
    void arm_tick(std::chrono::steady_clock::duration after);
    void on_tick();
    void leave_if_empty();

    engine& e_;
    std::shared_ptr<connection> conn_;
    std::map<std::string, entry> keys_{};
    asio::steady_timer tick_;
    std::chrono::steady_clock::time_point valid_until_{};
    bool exclusive_;
    bool ticking_ = false;
    bool checking_ = false;
    bool left_ = false;
};

/// I/O thread: where a try of key `id` goes (choose_session over the engine's holding set):
/// `session` set (use it), or `wait`, or neither (open another).
struct session_pick {
    std::shared_ptr<holding_session> session{};
    bool wait = false;
};
session_pick pick_session(engine& e, const std::string& id);
/// I/O thread: a new holding session on `c`, in the engine's set.
std::shared_ptr<holding_session> join_session(engine& e, std::shared_ptr<connection> c,
                                              bool exclusive);

} // namespace dlock::detail::pg
