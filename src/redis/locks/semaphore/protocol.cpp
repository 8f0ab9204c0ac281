// The semaphore on Redis: Redisson RPermitExpirableSemaphore's layout, so Redisson and dlock
// share one semaphore (docs/design/semaphore.md). N is a STRING of the available permits,
// {N}:timeout a ZSET of the permits out (16-byte random id -> expiry in epoch ms), and
// redisson_sc:{N} the channel where permits coming back publish the available count. dlock
// scores permits on the server's clock (TIME in the scripts), renews each held permit from the
// watchdog by re-scoring it (Redisson's updateLeaseTime, which Redisson itself never calls), and
// gives each permit a fencing token from its own counter dlock_semaphore_token:{N}. An expired
// permit is reclaimed by the next acquire. A semaphore is never re-entered: every acquisition
// is a new permit with a fresh random id.
#include "redis/locks/protocol.hpp"

#include "redis/locks/names.hpp"

#include <charconv>

namespace dlock::detail {
namespace {

/// The 16 bytes of a 32-hex-character owner token (the permit id on the wire, as Redisson
/// sends its ids); another owner string goes as it is.
std::string permit_id(std::string_view owner) {
    if (owner.size() != 32) return std::string(owner);
    std::string id(16, '\0');
    for (std::size_t i = 0; i < 16; ++i) {
        unsigned v = 0;
        const auto* p = owner.data() + 2 * i;
        if (std::from_chars(p, p + 2, v, 16).ptr != p + 2) return std::string(owner);
        id[i] = static_cast<char>(v);
    }
    return id;
}

class semaphore_kind final : public lock_protocol {
public:
    std::string_view name() const noexcept override { return "semaphore"; }
    bool reentrant() const noexcept override { return false; }
    bool has_fencing_token() const noexcept override { return true; }
    layout_info layout() const noexcept override { return {"string"}; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        payload_attempt(c, k, owner, lease, "1", pubsub::mode::classic);
    }
    void payload_attempt(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease, std::string_view permits,
                         pubsub::mode m) const override {
        c.script(script_id::semaphore_acquire).arg("4").arg(k.key).own(timeout_key(k));
        c.arg(k.channel).arg(k.token_key).arg(permits).number(lease.count());
        c.own(permit_id(owner)).arg(pubsub::publish_command(m));
    }

    /// {1, token} a permit, {0, ms until the earliest permit expires} full.
    attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const override {
        return read_counted_attempt(ec, r, /*reentry=*/false);
    }

    void release(command& c, const lock_keys& k, std::string_view owner, std::chrono::milliseconds,
                 pubsub::mode m) const override {
        c.script(script_id::semaphore_release).arg("3").arg(k.key).arg(k.channel);
        c.own(timeout_key(k)).own(permit_id(owner)).arg(pubsub::publish_command(m));
    }

    release_outcome read_release(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) return {release_outcome::kind::error, ec};
        if (r.is_null()) return {release_outcome::kind::not_owner, {}};
        if (release_outcome out; read_published_release(r, out)) return out;
        return {release_outcome::kind::error, make_error_code(errc::protocol_error)};
    }

    void renew(command& c, std::span<const lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        c.script(script_id::semaphore_renew).number(static_cast<std::int64_t>(holds.size()));
        for (const auto* h : holds)
            c.own(timeout_key(h->keys));
        c.number(lease.count());
        for (const auto* h : holds)
            c.own(permit_id(h->owner));
    }

    void hold_count(command& c, const lock_keys& k, std::string_view owner) const override {
        c.plain("ZSCORE").own(timeout_key(k)).own(permit_id(owner));
    }
    std::int64_t read_hold_count(const resp3::value& r, std::string_view,
                                 std::error_code& ec) const override {
        if (r.is_null()) return 0;
        if (r.is_string() || r.kind == resp3::type::double_type) return 1;
        ec = make_error_code(errc::protocol_error);
        return 0;
    }

    /// Held: some permit is out.
    void locked_query(command& c, const lock_keys& k) const override {
        c.plain("EXISTS").own(timeout_key(k));
    }

    void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const override {
        c.script(script_id::semaphore_force_unlock).arg("3").arg(k.key).arg(k.channel);
        c.own(timeout_key(k)).arg(pubsub::publish_command(m));
    }

    /// The message is the available count: one permit wakes one waiter per client, more wake
    /// every waiter (the losers sleep again), none wakes nobody.
    pubsub::wake_rule wake_rule() const noexcept override {
        return [](std::string_view payload) noexcept {
            long long n = 0;
            const auto* end = payload.data() + payload.size();
            if (std::from_chars(payload.data(), end, n).ptr != end) return pubsub::wake::one;
            return n <= 0 ? pubsub::wake::none : n == 1 ? pubsub::wake::one : pubsub::wake::all;
        };
    }

    /// Redisson's suffixName(N, "timeout"): "{N}:timeout", or "N:timeout" when N has a '{'
    /// (the same hash tag as the channel's, so the same slot).
    std::string timeout_key(const lock_keys& k) const override {
        if (k.key.find('{') != std::string::npos) return k.key + ":timeout";
        return "{" + k.key + "}:timeout";
    }

protected:
    std::string_view channel_prefix() const noexcept override { return "redisson_sc"; }
    std::string_view token_prefix() const noexcept override { return "dlock_semaphore_token"; }
};

} // namespace

lock_protocol& semaphore_protocol() noexcept {
    static semaphore_kind p;
    return p;
}

} // namespace dlock::detail
