// The read-write lock: Redisson's RReadWriteLock layout, as two kinds that share one hash N.
//   N (HASH)  mode = read|write, "<owner>" -> read count, "<owner>:write" -> write count
//   {N}:<owner>:rwlock_timeout:<k>   one STRING per read hold k with its PX lease; N's TTL is
//                                    kept at the longest of them (crashed readers expire)
//   redisson_rwlock:{N}              the channel of both sides: a read unlock publishes "0"
//                                    (wake one), a write unlock "1" (wake all)
// dlock adds two companion keys in N's slot that Redisson neither reads nor writes:
//   dlock_rwlock_token:{N}   the writers' fencing counter (a name of our own: Redisson's
//                            RReadWriteLock has none, and redisson_lock_token:{N} belongs to an
//                            RFencedLock of the same name, a different lock)
//   dlock_rwlock_writer:{N}  the intent marker of a waiting dlock writer (PX 2 s, renewed by the
//                            waiter every second at most, withdrawn when it gives up): dlock
//                            readers that do not hold yet wait behind it, so a stream of
//                            readers cannot starve a writer.
// A hold's owner is "<client-id>:<owner-id>" on both sides; the write side derives its field
// "<owner>:write" in its scripts and queries, so lock_holder and the shared paths are the same as
// for every other kind.
#include "redis/locks/protocol.hpp"

#include "redis/locks/names.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::detail {
namespace {

constexpr std::string_view channel_prefix_name = "redisson_rwlock";
/// How long a waiting writer's announcement lasts; the writer comes back within half of it.
constexpr std::int64_t writer_marker_ms = 2000;

attempt_outcome failed(errc e) {
    attempt_outcome out;
    out.ec = make_error_code(e);
    return out;
}

/// "{N}" (N when it has a hash tag): the channel without its prefix, Redisson's key prefix.
std::string_view key_prefix(const lock_keys& k) {
    return std::string_view(k.channel).substr(channel_prefix_name.size() + 1);
}
/// "{N}:<owner>:rwlock_timeout", Redisson's getReadWriteTimeoutNamePrefix.
std::string timeout_prefix(const lock_keys& k, std::string_view owner) {
    std::string s(key_prefix(k));
    s.append(1, ':').append(owner).append(":rwlock_timeout");
    return s;
}
std::string writer_marker(const lock_keys& k) {
    return prefix_name("dlock_rwlock_writer", k.key);
}

/// What both sides share: layout, channel, replies of the same shape.
class rw_side : public lock_protocol {
public:
    bool reentrant() const noexcept override { return true; }
    /// The scripts keep N's TTL at the longest lease of its holds (Redisson's read side; its
    /// write side adds a re-entry's lease to the PTTL, ours keeps the longer).
    bool reentry_keeps_longest_lease() const noexcept override { return true; }
    layout_info layout() const noexcept override { return {"hash"}; }
    pubsub::wake_rule wake_rule() const noexcept override { return &redisson_wake_rule; }
    std::string intent_key(const lock_keys& k) const override { return writer_marker(k); }

    release_outcome read_release(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) return {release_outcome::kind::error, ec};
        if (r.is_null()) return {release_outcome::kind::not_owner, {}};
        // 1 for a read release; 1 + n for the write side's final release (n connections got the
        // message; a polite release gives other clients' waiting writers and readers a head
        // start).
        if (release_outcome out; read_published_release(r, out)) return out;
        if (r.is_integer() && r.integer == 0) return {release_outcome::kind::still_held, {}};
        return {release_outcome::kind::error, make_error_code(errc::protocol_error)};
    }

    std::int64_t read_hold_count(const resp3::value& r, std::string_view,
                                 std::error_code& ec) const override {
        if (r.is_null()) return 0;
        if (r.is_integer() && r.integer >= 0) return r.integer;
        std::int64_t n = 0;
        if (r.is_string()) {
            const auto* end = r.str.data() + r.str.size();
            const auto [p, err] = std::from_chars(r.str.data(), end, n);
            if (err == std::errc{} && p == end && n >= 0) return n;
        }
        ec = make_error_code(errc::protocol_error);
        return 0;
    }

    /// Any mode, and every waiter wakes ("1"); timeout keys of readers expire on their own.
    void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const override {
        c.script(script_id::common_force_unlock).arg("2").arg(k.key).arg(k.channel).arg("1");
        c.arg(pubsub::publish_command(m));
    }

protected:
    std::string_view channel_prefix() const noexcept override { return channel_prefix_name; }

    /// {status, value} with an integer status in `allowed` and an integer value.
    static bool pair(const resp3::value& r) {
        return r.kind == resp3::type::array && r.elements.size() == 2 &&
               r.elements[0].is_integer() && r.elements[1].is_integer();
    }
    static attempt_outcome held(std::int64_t ttl) {
        attempt_outcome out;
        out.what = attempt_outcome::kind::held;
        out.ttl_ms = ttl;
        return out;
    }
    static attempt_outcome reentered(std::int64_t count) {
        if (count < 2) return failed(errc::protocol_error);
        attempt_outcome out;
        out.what = attempt_outcome::kind::reentered;
        out.count = count;
        return out;
    }
};

class read_side final : public rw_side {
public:
    std::string_view name() const noexcept override { return "read"; }
    bool has_fencing_token() const noexcept override { return false; }
    bool shared_holds() const noexcept override { return true; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        c.script(script_id::rwlock_read_acquire).arg("3").arg(k.key);
        c.own(timeout_prefix(k, owner)).own(writer_marker(k));
        c.number(lease.count()).arg(owner);
    }

    attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) {
            attempt_outcome out;
            out.ec = ec;
            return out;
        }
        if (!pair(r)) return failed(errc::protocol_error);
        const auto value = r.elements[1].integer;
        switch (r.elements[0].integer) {
        case 1: // {1, 0}: the owner's first read hold; readers have no token
            if (value != 0) return failed(errc::protocol_error);
            {
                attempt_outcome out;
                out.what = attempt_outcome::kind::acquired;
                return out;
            }
        case 2:
            return reentered(value);
        case 0:
            return held(value);
        default:
            return failed(errc::protocol_error);
        }
    }

    void release(command& c, const lock_keys& k, std::string_view owner, std::chrono::milliseconds,
                 pubsub::mode m) const override {
        c.script(script_id::rwlock_read_release).arg("5").arg(k.key).arg(k.channel);
        c.own(timeout_prefix(k, owner)).arg(key_prefix(k)).own(writer_marker(k));
        c.arg("0").arg(owner).arg(pubsub::publish_command(m));
    }

    void renew(command& c, std::span<const lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        c.script(script_id::rwlock_read_renew).number(2 * static_cast<std::int64_t>(holds.size()));
        for (const auto* h : holds)
            c.arg(h->keys.key).arg(key_prefix(h->keys));
        c.number(lease.count());
        for (const auto* h : holds)
            c.arg(h->owner);
    }

    void hold_count(command& c, const lock_keys& k, std::string_view owner) const override {
        c.plain("HGET").arg(k.key).arg(owner);
    }

    void locked_query(command& c, const lock_keys& k) const override {
        c.script(script_id::rwlock_is_locked).arg("1").arg(k.key).arg("read");
    }
};

class write_side final : public rw_side {
public:
    std::string_view name() const noexcept override { return "write"; }
    bool has_fencing_token() const noexcept override { return true; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        build_attempt(c, k, owner, lease, false);
    }
    void waiting_attempt(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease,
                         std::chrono::milliseconds /*place_timeout*/) const override {
        build_attempt(c, k, owner, lease, true);
    }

    attempt_outcome read_attempt(std::error_code ec, const resp3::value& r) const override {
        if (!ec) ec = reply_error(r);
        if (ec) {
            attempt_outcome out;
            out.ec = ec;
            return out;
        }
        if (!pair(r)) return failed(errc::protocol_error);
        const auto value = r.elements[1].integer;
        switch (r.elements[0].integer) {
        case 1: { // {1, token}
            if (value < 1) return failed(errc::protocol_error);
            attempt_outcome out;
            out.what = attempt_outcome::kind::acquired;
            out.token = static_cast<std::uint64_t>(value);
            return out;
        }
        case 2:
            return reentered(value);
        case 3: // the owner holds read only: an upgrade would wait for itself
            return value == 0 ? failed(errc::invalid_argument) : failed(errc::protocol_error);
        case 0:
            return held(value);
        default:
            return failed(errc::protocol_error);
        }
    }

    void release(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease, pubsub::mode m) const override {
        c.script(script_id::rwlock_write_release).arg("2").arg(k.key).arg(k.channel).arg("1");
        c.number(lease.count()).arg(owner).arg(pubsub::publish_command(m));
    }

    void renew(command& c, std::span<const lock_holder* const> holds,
               std::chrono::milliseconds lease) const override {
        renew_batch(c, script_id::rwlock_write_renew, holds, lease);
    }

    /// A final write release hands the write hold to a waiting writer of this client
    /// (write_handover.lua); a reader of this client waits for the published release.
    bool has_handover() const noexcept override { return true; }
    void handover(command& c, const lock_holder& from, std::string_view to_owner,
                  std::chrono::milliseconds to_lease, bool check_others,
                  pubsub::mode m) const override {
        const auto& k = from.keys;
        c.script(script_id::rwlock_write_handover).arg("4").arg(k.key).arg(k.channel);
        c.arg(k.token_key).own(writer_marker(k));
        handover_args(c, "1", from, to_owner, to_lease, check_others, m);
    }
    handover_reading read_handover(std::error_code ec, const resp3::value& r) const override {
        return read_token_handover(ec, r);
    }

    bool abandon(command& c, const lock_keys& k, std::string_view owner,
                 pubsub::mode m) const override {
        c.script(script_id::rwlock_abandon).arg("2").own(writer_marker(k)).arg(k.channel);
        c.arg(owner).arg(pubsub::publish_command(m));
        return true;
    }

    void hold_count(command& c, const lock_keys& k, std::string_view owner) const override {
        std::string field(owner);
        field.append(":write");
        c.plain("HGET").arg(k.key).own(std::move(field));
    }

    void locked_query(command& c, const lock_keys& k) const override {
        c.script(script_id::rwlock_is_locked).arg("1").arg(k.key).arg("write");
    }

protected:
    std::string_view token_prefix() const noexcept override { return "dlock_rwlock_token"; }

private:
    void build_attempt(command& c, const lock_keys& k, std::string_view owner,
                       std::chrono::milliseconds lease, bool announce) const {
        c.script(script_id::rwlock_write_acquire).arg("3").arg(k.key).arg(k.token_key);
        c.own(writer_marker(k)).number(lease.count()).arg(owner);
        c.number(announce ? writer_marker_ms : 0);
    }
};

} // namespace

lock_protocol& read_protocol() noexcept {
    static read_side p;
    return p;
}

lock_protocol& write_protocol() noexcept {
    static write_side p;
    return p;
}

} // namespace dlock::detail
