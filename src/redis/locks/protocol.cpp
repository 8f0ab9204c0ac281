#include "redis/locks/protocol.hpp"

#include "redis/locks/names.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {

command& command::script(script_id id) {
    clear();
    reserve();
    const auto& s = get_script(id);
    args_.push_back("EVALSHA");
    args_.push_back(s.sha);
    fallback_ = s.text;
    return *this;
}

command& command::plain(std::string_view name) {
    clear();
    reserve();
    args_.push_back(name);
    return *this;
}

command& command::own(std::string s) {
    // Four are enough for every single-lock command of every kind (numbers: leases, counts;
    // the fair lock's queue and deadline keys, derived from N); a semaphore's renewal batch
    // keeps each permit's key and id.
    if (owned_count_ < owned_.size()) {
        auto& slot = owned_[owned_count_++];
        slot = std::move(s);
        args_.push_back(slot);
    } else {
        more_.push_back(std::make_unique<std::string>(std::move(s)));
        args_.push_back(*more_.back());
    }
    return *this;
}

lock_keys lock_protocol::keys(std::string_view name, std::error_code& ec) const {
    ec.clear();
    lock_keys k;
    if (!offered()) {
        ec = make_error_code(errc::unsupported);
        return k;
    }
    if (name.empty() || name.size() > 4096) {
        ec = make_error_code(errc::invalid_argument);
        return k;
    }
    k.key.assign(name);
    k.channel = prefix_name(channel_prefix(), name);
    if (!token_prefix().empty()) k.token_key = prefix_name(token_prefix(), name);
    k.slot = key_slot(k.key);
    for (const auto* other : {&k.channel, &k.token_key})
        if (!other->empty() && key_slot(*other) != k.slot)
            ec = make_error_code(errc::invalid_argument);
    for (const auto prefix : {queue_prefix(), deadline_prefix()})
        if (!prefix.empty() && key_slot(prefix_name(prefix, name)) != k.slot)
            ec = make_error_code(errc::invalid_argument);
    return k;
}

std::string lock_protocol::queue_key(const lock_keys& k) const {
    return queue_prefix().empty() ? std::string() : prefix_name(queue_prefix(), k.key);
}

std::string lock_protocol::timeout_key(const lock_keys& k) const {
    return deadline_prefix().empty() ? std::string() : prefix_name(deadline_prefix(), k.key);
}

void lock_protocol::ttl_query(command& c, const lock_keys& k) const {
    c.plain("PTTL").arg(k.key);
}

void lock_protocol::locked_query(command& c, const lock_keys& k) const {
    c.plain("EXISTS").arg(k.key);
}

std::int64_t lock_protocol::read_ttl(std::error_code ec, const resp3::value& r) noexcept {
    return !ec && r.is_integer() ? r.integer : -1;
}

bool lock_protocol::read_renew(std::error_code ec, const resp3::value& r, std::size_t n,
                               std::vector<char>& ok) {
    ok.assign(n, 0);
    if (ec || r.kind != resp3::type::array || r.elements.size() != n) return false;
    for (std::size_t i = 0; i < n; ++i)
        ok[i] = r.elements[i].is_integer() && r.elements[i].integer == 1 ? 1 : 0;
    return true;
}

void lock_protocol::renew_batch(command& c, script_id id, std::span<const lock_holder* const> holds,
                                std::chrono::milliseconds lease) {
    c.script(id).number(static_cast<std::int64_t>(holds.size()));
    for (const auto* h : holds)
        c.arg(h->keys.key);
    c.number(lease.count());
    for (const auto* h : holds)
        c.arg(h->owner);
}

bool lock_protocol::handover_failed(std::error_code ec, const resp3::value& r,
                                    handover_reading& h) {
    if (!ec) ec = reply_error(r);
    if (!ec) return false;
    h.releaser = {release_outcome::kind::error, ec};
    h.waiter = ec == errc::ambiguous ? handover_result::ambiguous : handover_result::unknown;
    return true;
}

void lock_protocol::handover_args(command& c, std::string_view message, const lock_holder& from,
                                  std::string_view to_owner, std::chrono::milliseconds to_lease,
                                  bool check_others, pubsub::mode m) {
    c.arg(message).arg(from.owner).arg(pubsub::publish_command(m));
    c.arg(check_others ? pubsub::numsub_command(m) : "").arg(to_owner).number(to_lease.count());
}

handover_reading lock_protocol::read_token_handover(std::error_code ec, const resp3::value& r) {
    handover_reading h;
    if (handover_failed(ec, r, h)) return h;
    if (r.kind == resp3::type::array && r.elements.size() == 2 && r.elements[0].is_integer() &&
        r.elements[0].integer == 2 && r.elements[1].is_integer() && r.elements[1].integer > 0)
        return released_with(handover_result::handed_over,
                             static_cast<std::uint64_t>(r.elements[1].integer));
    if (r.is_integer() && r.integer == 1) // another client waits: released, published
        return released_with(handover_result::published);
    if (r.is_null())
        h.releaser = {release_outcome::kind::not_owner, {}};
    else
        h.releaser = {release_outcome::kind::error, make_error_code(errc::protocol_error)};
    return h;
}

void lock_protocol::force_unlock_script(command& c, const lock_keys& k, pubsub::mode m) {
    c.script(script_id::common_force_unlock).arg("2").arg(k.key).arg(k.channel).arg("0");
    c.arg(pubsub::publish_command(m));
}

void lock_protocol::handover(command&, const lock_holder&, std::string_view,
                             std::chrono::milliseconds, bool, pubsub::mode) const {}

handover_reading lock_protocol::read_handover(std::error_code, const resp3::value&) const {
    return {};
}

std::error_code reply_error(const resp3::value& v) noexcept {
    if (!v.is_error()) return {};
    return make_error_code(classify_server_error(v.str));
}

attempt_outcome read_counted_attempt(std::error_code ec, const resp3::value& r,
                                     bool reentry) noexcept {
    attempt_outcome out;
    if (!ec) ec = reply_error(r);
    if (ec) {
        out.ec = ec;
        return out;
    }
    const bool pair = r.kind == resp3::type::array && r.elements.size() == 2 &&
                      r.elements[0].is_integer() && r.elements[1].is_integer();
    const auto tag = pair ? r.elements[0].integer : -1;
    const auto value = pair ? r.elements[1].integer : 0;
    if (tag == 1 && value >= 1) { // acquired fresh, with its fencing token
        out.what = attempt_outcome::kind::acquired;
        out.token = static_cast<std::uint64_t>(value);
    } else if (tag == 2 && reentry && value >= 2) { // re-entered: the new hold count
        out.what = attempt_outcome::kind::reentered;
        out.count = value;
    } else if (tag == 0) { // held: ms until it may free
        out.what = attempt_outcome::kind::held;
        out.ttl_ms = value;
    } else {
        out.ec = make_error_code(errc::protocol_error);
    }
    return out;
}

bool read_published_release(const resp3::value& r, release_outcome& out) noexcept {
    if (!r.is_integer() || r.integer < 1) return false;
    out = {release_outcome::kind::released, {}, r.integer - 1};
    return true;
}

pubsub::wake redisson_wake_rule(std::string_view payload) noexcept {
    return payload == "1" ? pubsub::wake::all : pubsub::wake::one;
}

} // namespace dlock::detail
