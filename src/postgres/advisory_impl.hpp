// postgres/advisory_impl.hpp: what advisory.cpp (acquisition), advisory_hold.cpp (the hold)
// and advisory_queries.cpp (inspect, unlock --force, list) share.
#pragma once

#include "postgres/advisory.hpp"
#include "postgres/errors.hpp"

#include <asio/steady_timer.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dlock::detail::pg {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr std::string_view app_prefix = "dlock:";

inline bool shared_kind(lock_kind k) noexcept {
    return k == lock_kind::read;
}

inline statement key_statement(std::string sql, const advisory_key& k) {
    statement s{std::move(sql), {key_param1(k)}};
    if (auto p2 = key_param2(k)) s.params.emplace_back(std::move(*p2));
    return s;
}

/// pg_advisory_unlock[_shared] of `k`.
inline statement unlock_statement_for(const advisory_key& k, lock_kind kind) {
    const char* fn =
        shared_kind(kind) ? "SELECT pg_advisory_unlock_shared" : "SELECT pg_advisory_unlock";
    return key_statement(key_call(fn, k), k);
}

inline errc error_of(const result& r, bool caller_input = false) {
    return classify_sqlstate(r.sqlstate(), caller_input);
}

/// The key as one bigint SQL expression over $1 (pg_locks coordinates are derived from it),
/// and that parameter.
inline std::pair<std::string, std::string> key_expr(const advisory_key& k) {
    if (k.server_hash) return {"hashtext($1)::bigint", k.text};
    return {"$1::bigint", std::to_string(k.value)};
}

/// FROM and WHERE of a query over this database's advisory locks (pg_locks l, with
/// pg_stat_activity a).
inline const std::string locks_sql_tail =
    " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname "
    "= current_database())";

/// The condition that a pg_locks row `l` is the advisory key whose bigint is `key_sql`.
inline std::string key_matches(const std::string& key_sql, const advisory_key& k) {
    return "l.classid = ((" + key_sql + " >> 32) & 4294967295)::oid AND l.objid = (" + key_sql +
           " & 4294967295)::oid AND l.objsubid = " + std::to_string(k.objsubid());
}

/// "dlock:<name>" cut to 63 bytes on a UTF-8 boundary (the server keeps no more): the
/// application_name of a session holding or waiting for `name`, which `dlock list` reads.
std::string app_name_for(std::string_view name);

// --- the hold -------------------------------------------------------------------------------

class holding_session;

/// The hold of one advisory key on a holding session (advisory_sessions.hpp), which proves it.
class advisory_hold final : public pg_hold {
public:
    /// `election`: the hold of an election's leader (election.hpp): its release also deletes
    /// its row of dlock_election, and proclaim_io() changes its value.
    advisory_hold(std::shared_ptr<engine> e, std::string name, advisory_key key, lock_kind kind,
                  std::optional<std::uint64_t> token, std::shared_ptr<holding_session> session,
                  bool election = false);
    ~advisory_hold() override;

    // I/O thread: the grant came in a batch sent at `sent`; called once, right after it.
    void start(std::optional<milliseconds> fixed_lease, clock::time_point sent);

    const std::string& name() const noexcept override { return name_; }
    const advisory_key& key() const noexcept { return key_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }
    void end_on_shutdown() override { lose(loss_cause::gone); }
    /// I/O thread: a leader's new value, written on its own session while it leads
    /// (errc::not_owner when it no longer does or is not a leader's hold).
    void proclaim_io(std::string value, std::function<void(std::error_code)> done);
    /// I/O thread: a check of the session sent at `until` - check_period succeeded.
    void proven(clock::time_point until);
    /// I/O thread: the session ended or went unproven (`why`: its error text); it is closed.
    void session_lost(loss_cause cause, const std::string& why);

private:
    std::shared_ptr<advisory_hold> self() {
        return std::static_pointer_cast<advisory_hold>(shared_from_this());
    }
    std::weak_ptr<advisory_hold> weak() { return self(); }

    bool ended() const noexcept { return ended_io_; }
    statement unlock_statement() const;

    void arm_lease(milliseconds lease);
    void extend_io(milliseconds lease, std::function<void(std::error_code)> done) override;
    void release_io(std::function<void(std::error_code)> done) override;
    /// The hold ends as lost; its key is unlocked on the session (which stays).
    void lose(loss_cause cause);
    void ended_as_lost(loss_cause cause);

    std::string name_;
    advisory_key key_;
    std::string id_;
    lock_kind kind_;
    std::optional<std::uint64_t> token_;
    // I/O thread only:
    std::shared_ptr<holding_session> session_;
    asio::steady_timer lease_timer_;
    std::optional<clock::time_point> lease_end_{};
    clock::time_point acquired_at_{};
    bool releasing_ = false;
    bool ended_io_ = false;
    bool election_ = false;
};

} // namespace dlock::detail::pg
