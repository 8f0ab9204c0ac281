// The simple lock: redis-py's Lock layout (string N = a 128-bit random token, SET NX PX),
// released by compare-and-delete. Our release also publishes on dlock_simple__channel:{N} so
// dlock waiters wake; a redis-py release does not, and our waiters then retry after the
// holder's PTTL. No fencing token (the layout has no counter).
#include "redis/locks/protocol.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {
namespace {

class simple_lock final : public lock_protocol {
public:
    std::string_view name() const noexcept override { return "simple"; }
    bool reentrant() const noexcept override { return false; }
    bool has_fencing_token() const noexcept override { return false; }
    layout_info layout() const noexcept override { return {"string"}; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        c.plain("SET").arg(k.key).arg(owner).arg("NX").arg("PX").number(lease.count());
    }

    attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const override {
        attempt_outcome out;
        if (!ec) ec = reply_error(r);
        if (ec) {
            out.ec = ec;
        } else if (r.is_ok()) {
            out.what = attempt_outcome::kind::acquired;
        } else if (r.is_null()) {
            out.what = attempt_outcome::kind::held; // PTTL asked separately (ttl_after_refusal)
        } else {
            out.ec = make_error_code(errc::protocol_error);
        }
        return out;
    }
    /// The uncontended path is the single SET; the PTTL is asked only after a refusal.
    bool ttl_after_refusal() const noexcept override { return true; }

    void release(command& c, const lock_keys& k, std::string_view owner, std::chrono::milliseconds,
                 pubsub::mode m) const override {
        c.script(script_id::simple_release).arg("2").arg(k.key).arg(k.channel).arg(owner);
        c.arg(pubsub::publish_command(m));
    }

    release_outcome read_release(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) return {release_outcome::kind::error, ec};
        if (release_outcome out; read_published_release(r, out)) return out;
        if (r.is_integer() && r.integer == 0) return {release_outcome::kind::not_owner, {}};
        return {release_outcome::kind::error, make_error_code(errc::protocol_error)};
    }

    void renew(command& c, std::span<const lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        renew_batch(c, script_id::simple_renew, holds, lease);
    }

    bool has_handover() const noexcept override { return true; }
    void handover(command& c, const lock_holder& from, std::string_view to_owner,
                  std::chrono::milliseconds to_lease, bool check_others,
                  pubsub::mode m) const override {
        const auto& k = from.keys;
        c.script(script_id::simple_handover).arg("2").arg(k.key).arg(k.channel).arg(from.owner);
        c.arg(to_owner).number(to_lease.count()).arg(pubsub::publish_command(m));
        c.arg(check_others ? pubsub::numsub_command(m) : "");
    }

    handover_reading read_handover(std::error_code ec, const resp3::value& r) const override {
        handover_reading h;
        if (handover_failed(ec, r, h)) return h;
        if (r.is_integer() && r.integer == 2) return released_with(handover_result::handed_over);
        if (r.is_integer() && r.integer == 1) // another client waits: released, published
            return released_with(handover_result::published);
        h.releaser = read_release({}, r); // 0: not the owner; anything else: malformed
        if (h.releaser.what == release_outcome::kind::released)
            h.releaser = {release_outcome::kind::error, make_error_code(errc::protocol_error)};
        return h;
    }

    void hold_count(command& c, const lock_keys& k, std::string_view) const override {
        c.plain("GET").arg(k.key);
    }
    std::int64_t read_hold_count(const resp3::value& r, std::string_view owner,
                                 std::error_code& ec) const override {
        if (r.is_null()) return 0;
        if (!r.is_string()) {
            ec = make_error_code(errc::protocol_error);
            return 0;
        }
        return r.str == owner ? 1 : 0;
    }

    void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const override {
        force_unlock_script(c, k, m);
    }

    pubsub::wake_rule wake_rule() const noexcept override { return &redisson_wake_rule; }

protected:
    std::string_view channel_prefix() const noexcept override { return "dlock_simple__channel"; }
};

} // namespace

lock_protocol& simple_protocol() noexcept {
    static simple_lock p;
    return p;
}

} // namespace dlock::detail
