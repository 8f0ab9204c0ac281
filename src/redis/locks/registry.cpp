// The registered lock kinds. A new kind adds one line here (and its folder).
#include "core/kinds.hpp"
#include "redis/locks/election/protocol.hpp"

#include <array>
#include <optional>
#include <vector>

namespace dlock::detail {

lock_protocol& reentrant_protocol() noexcept;
lock_protocol& simple_protocol() noexcept;
lock_protocol& fair_protocol() noexcept;
lock_protocol& read_protocol() noexcept;
lock_protocol& write_protocol() noexcept;
lock_protocol& semaphore_protocol() noexcept;

struct protocol_registry {
    std::vector<const lock_protocol*> all;
    std::vector<std::optional<lock_kind>> kind_of;          // by index
    std::array<const lock_protocol*, kind_count> by_kind{}; // by core/kinds.hpp slot
    protocol_registry() {
        add(reentrant_protocol(), lock_kind::reentrant);
        add(simple_protocol(), lock_kind::simple);
        add(fair_protocol(), lock_kind::fair);
        add(read_protocol(), lock_kind::read);
        add(write_protocol(), lock_kind::write);
        add(semaphore_protocol(), lock_kind::semaphore);
        add(election_protocol()); // campaigns only (redis/election.cpp): no lock_kind names it
    }
    std::size_t add(lock_protocol& p, std::optional<lock_kind> kind = std::nullopt) {
        p.index_ = all.size();
        all.push_back(&p);
        kind_of.push_back(kind);
        if (kind) by_kind[metrics_slot(*kind)] = &p;
        return p.index_;
    }
};

namespace {
protocol_registry& the_registry() {
    static protocol_registry r;
    return r;
}

/// The stand-in for lock kinds only other backends offer (lock_kind::shedlock, ...): keys()
/// fails with errc::unsupported before anything is built, so the rest is never called.
class not_offered final : public lock_protocol {
public:
    std::string_view name() const noexcept override { return "unsupported"; }
    bool reentrant() const noexcept override { return false; }
    bool has_fencing_token() const noexcept override { return false; }
    bool offered() const noexcept override { return false; }
    layout_info layout() const noexcept override { return {}; }
    void attempt(command&, const lock_keys&, std::string_view,
                 std::chrono::milliseconds) const override {}
    attempt_outcome read_attempt(std::error_code, const resp3::value&) const override {
        return {attempt_outcome::kind::error, 0, 1, -1, make_error_code(errc::unsupported)};
    }
    void release(command&, const lock_keys&, std::string_view, std::chrono::milliseconds,
                 pubsub::mode) const override {}
    release_outcome read_release(std::error_code, const resp3::value&) const override {
        return {release_outcome::kind::error, make_error_code(errc::unsupported), 0};
    }
    void renew(command&, std::span<const lock_holder* const>,
               std::chrono::milliseconds) const override {}
    void hold_count(command&, const lock_keys&, std::string_view) const override {}
    std::int64_t read_hold_count(const resp3::value&, std::string_view,
                                 std::error_code& ec) const override {
        ec = make_error_code(errc::unsupported);
        return 0;
    }
    void force_unlock(command&, const lock_keys&, pubsub::mode) const override {}
    pubsub::wake_rule wake_rule() const noexcept override {
        return [](std::string_view) noexcept { return pubsub::wake::none; };
    }

protected:
    std::string_view channel_prefix() const noexcept override { return {}; }
};

} // namespace

const lock_protocol& protocol_of(lock_kind kind) noexcept {
    static const not_offered stand_in;
    const auto slot = metrics_slot(kind);
    const auto* p = slot < kind_count ? the_registry().by_kind[slot] : nullptr;
    return p ? *p : stand_in;
}

std::size_t metrics_slot_of(const lock_protocol& p) noexcept {
    const auto& r = the_registry();
    const auto k = p.index() < r.kind_of.size() ? r.kind_of[p.index()] : std::nullopt;
    return k ? metrics_slot(*k) : custom_kind_slot;
}

std::vector<lock_kind> offered_kinds() {
    std::vector<lock_kind> out;
    for (const auto& k : the_registry().kind_of)
        if (k) out.push_back(*k);
    return out;
}

std::size_t register_protocol(lock_protocol& p) {
    return the_registry().add(p);
}

} // namespace dlock::detail
