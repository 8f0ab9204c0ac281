// The reentrant lock's protocol class, shared with the fair lock (the same hash, renewal,
// hold count and reply shapes, plus a queue): Redisson's RLock layout (hash N
// {"<client-id>:<owner-id>" -> hold count}, unlock channel redisson_lock__channel:{N}, payload
// "0") plus Redisson RFencedLock's fencing counter redisson_lock_token:{N}, taken on every fresh
// acquisition.
#pragma once

#include "redis/locks/protocol.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::detail {

class reentrant_lock : public lock_protocol {
public:
    std::string_view name() const noexcept override { return "reentrant"; }
    bool reentrant() const noexcept override { return true; }
    bool has_fencing_token() const noexcept override { return true; }
    layout_info layout() const noexcept override { return {"hash"}; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        c.script(script_id::reentrant_acquire).arg("2").arg(k.key).arg(k.token_key);
        c.number(lease.count()).arg(owner);
    }

    attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const override {
        return read_counted_attempt(ec, r, /*reentry=*/true);
    }

    void release(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease, pubsub::mode m) const override {
        c.script(script_id::reentrant_release).arg("2").arg(k.key).arg(k.channel).arg("0");
        c.number(lease.count()).arg(owner).arg(pubsub::publish_command(m)).arg("0");
    }

    release_outcome read_release(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) return {release_outcome::kind::error, ec};
        if (r.is_null()) return {release_outcome::kind::not_owner, {}};
        if (release_outcome out; read_published_release(r, out)) return out;
        if (r.is_integer() && r.integer == 0) return {release_outcome::kind::still_held, {}};
        return {release_outcome::kind::error, make_error_code(errc::protocol_error)};
    }

    void renew(command& c, std::span<const lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        renew_batch(c, script_id::reentrant_renew, holds, lease);
    }

    bool has_handover() const noexcept override { return true; }
    void handover(command& c, const lock_holder& from, std::string_view to_owner,
                  std::chrono::milliseconds to_lease, bool check_others,
                  pubsub::mode m) const override {
        const auto& k = from.keys;
        c.script(script_id::reentrant_handover).arg("3").arg(k.key).arg(k.channel);
        handover_args(c.arg(k.token_key), "0", from, to_owner, to_lease, check_others, m);
    }

    handover_reading read_handover(std::error_code ec, const resp3::value& r) const override {
        return read_token_handover(ec, r);
    }

    void hold_count(command& c, const lock_keys& k, std::string_view owner) const override {
        c.plain("HGET").arg(k.key).arg(owner);
    }
    std::int64_t read_hold_count(const resp3::value& r, std::string_view,
                                 std::error_code& ec) const override {
        if (r.is_null()) return 0;
        if (r.is_integer()) return r.integer;
        std::int64_t n = 0;
        if (r.is_string()) {
            const auto* end = r.str.data() + r.str.size();
            const auto [p, err] = std::from_chars(r.str.data(), end, n);
            if (err == std::errc{} && p == end) return n;
        }
        ec = make_error_code(errc::protocol_error);
        return 0;
    }

    void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const override {
        force_unlock_script(c, k, m);
    }

    pubsub::wake_rule wake_rule() const noexcept override { return &redisson_wake_rule; }

protected:
    std::string_view channel_prefix() const noexcept override { return "redisson_lock__channel"; }
    std::string_view token_prefix() const noexcept override { return "redisson_lock_token"; }
};

} // namespace dlock::detail
