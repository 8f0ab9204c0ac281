// dlock::basic_mutex: thread-bound TimedLockable locks over the acquisition front-end. The
// calling thread's hold lives in the client's hold registry, keyed by kind, owner and name.
#include "redis/acquire.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <algorithm>

namespace dlock {
namespace detail {

class lock_object {
public:
    lock_object(std::shared_ptr<client_impl> c, std::string name, lock_kind kind)
        : c_(std::move(c))
        , name_(std::move(name))
        , p_(protocol_of(kind)) {
        std::error_code ec;
        keys_ = p_.keys(name_, ec);
        if (ec)
            throw error(errc::invalid_argument,
                        "dlock: invalid lock name (empty, over 4096 bytes, or an empty hash tag)");
    }

    /// The owner objects die: stop renewing what they still hold (the keys then expire).
    ~lock_object() {
        for (auto& [key, w] : created_) {
            auto h = w.lock();
            if (!h || h->released() || h->lost()) continue;
            c_->renewal().remove(h);
            c_->registry().erase_thread_hold(key, h.get());
        }
    }

    const std::string& name() const noexcept { return name_; }

    std::string owner_of_this_thread() const {
        return c_->id() + ':' + std::to_string(this_thread_owner_id());
    }
    std::string registry_key() const {
        const auto owner = owner_of_this_thread();
        std::string k;
        k.reserve(p_.name().size() + owner.size() + name_.size() + 2);
        k.append(p_.name()).append(1, '\n').append(owner).append(1, '\n').append(name_);
        return k;
    }
    std::shared_ptr<hold_state> thread_hold() const {
        return c_->registry().find_thread_hold(registry_key());
    }
    /// The calling thread's live hold, or null.
    std::shared_ptr<hold_state> current() const {
        auto h = thread_hold();
        return h && !h->lost() && !h->released() ? h : nullptr;
    }

    bool acquire(std::optional<std::chrono::milliseconds> wait,
                 std::optional<std::chrono::milliseconds> lease, std::error_code& ec) {
        ec.clear();
        if (c_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return false;
        }
        const auto key = registry_key();
        auto& reg = c_->registry();
        auto existing = reg.find_thread_hold(key);
        if (existing && (existing->lost() || existing->released())) {
            reg.erase_thread_hold(key, existing.get());
            existing.reset();
        }
        if (existing && !p_.reentrant()) {
            ec = make_error_code(errc::invalid_argument); // not reentrant: would self-deadlock
            return false;
        }
        acquire_request req;
        const acquire_options opts{.wait = wait, .lease = lease};
        if ((ec = prepare(*c_, p_, keys_, opts, new_owner(*c_, p_, true), req))) return false;
        req.fresh_owner = !existing;
        const auto res = acquire_blocking(*c_, req, ec);
        if (ec || !res.acquired) return false;

        if (existing && res.reentered) {
            existing->count = static_cast<int>(res.count);
            if (lease) {
                auto until = res.sent_at + *lease - drift_for(*lease);
                if (p_.reentry_keeps_longest_lease())
                    until = std::max(until, existing->valid_until());
                existing->set_valid_until(until);
            }
            return true;
        }
        auto h = make_hold(*c_, req, res);
        reg.set_thread_hold(key, h);
        std::lock_guard lk(created_mu_);
        std::erase_if(created_, [](auto& p) { return p.second.expired(); });
        created_.emplace_back(key, h);
        return true;
    }

    void release(std::error_code& ec) {
        ec.clear();
        if (c_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return;
        }
        const auto key = registry_key();
        auto& reg = c_->registry();
        auto h = reg.find_thread_hold(key);
        if (!h || h->released()) {
            ec = make_error_code(errc::not_owner);
            return;
        }
        if (h->lost()) {
            reg.erase_thread_hold(key, h.get());
            ec = make_error_code(errc::not_owner);
            return;
        }
        if (h->count <= 1) h->releasing = true;
        const auto out = release_blocking(*c_, h);
        switch (out.what) {
        case release_outcome::kind::not_owner:
            ec = make_error_code(errc::not_owner);
            c_->renewal().remove(h);
            reg.erase_thread_hold(key, h.get());
            h->end_lost();
            return;
        case release_outcome::kind::error:
            ec = out.ec;
            h->releasing = false;
            return;
        case release_outcome::kind::released:
            h->end_released();
            c_->renewal().remove(h);
            reg.erase_thread_hold(key, h.get());
            return;
        case release_outcome::kind::still_held:
            --h->count;
            h->releasing = false;
            return;
        }
    }

    /// Runs a query on the lock's node; a Redis error reply becomes `ec`.
    resp3::value query(const command& cmd, std::error_code& ec) {
        auto v = c_->run(c_->router().for_slot(keys_.slot), cmd, ec);
        if (!ec) ec = reply_error(v);
        return v;
    }

    bool force_unlock(std::error_code& ec) {
        command cmd;
        p_.force_unlock(cmd, keys_, c_->router().for_slot(keys_.slot).pubsub_mode());
        const auto v = query(cmd, ec);
        return !ec && v.is_integer() && v.integer == 1;
    }

    bool is_locked(std::error_code& ec) {
        command cmd;
        p_.locked_query(cmd, keys_);
        const auto v = query(cmd, ec);
        return !ec && v.is_integer() && v.integer == 1;
    }

    int hold_count(std::error_code& ec) {
        ec.clear();
        // A reentrant kind's owner is the thread's; otherwise it is the current hold's token.
        std::string owner;
        if (p_.reentrant()) {
            owner = owner_of_this_thread();
        } else if (auto h = current()) {
            owner = h->owner;
        } else {
            return 0;
        }
        command cmd;
        p_.hold_count(cmd, keys_, owner);
        const auto v = query(cmd, ec);
        if (ec) return 0;
        const auto n = p_.read_hold_count(v, owner, ec);
        return ec ? 0 : static_cast<int>(n);
    }

    std::optional<std::chrono::milliseconds> remaining_lease(std::error_code& ec) {
        command cmd;
        cmd.plain("PTTL").arg(keys_.key);
        const auto v = query(cmd, ec);
        if (ec || !v.is_integer() || v.integer == -2) return std::nullopt;
        return std::chrono::milliseconds(v.integer < 0 ? 0 : v.integer);
    }

private:
    std::shared_ptr<client_impl> c_;
    std::string name_;
    const lock_protocol& p_;
    lock_keys keys_;
    std::mutex created_mu_;
    std::vector<std::pair<std::string, std::weak_ptr<hold_state>>> created_; // guarded
};

} // namespace detail

namespace {
/// The throwing form of a call that takes an error_code.
template <class F>
auto or_throw(F&& f) {
    std::error_code ec;
    auto r = f(ec);
    throw_if(ec);
    return r;
}
} // namespace

basic_mutex::basic_mutex(client& c, std::string name, lock_kind kind)
    : obj_(std::make_shared<detail::lock_object>(detail::access::impl(c), std::move(name), kind)) {}
basic_mutex::basic_mutex(basic_mutex&&) noexcept = default;
basic_mutex& basic_mutex::operator=(basic_mutex&&) noexcept = default;
basic_mutex::~basic_mutex() = default;

void basic_mutex::lock() {
    std::error_code ec;
    lock(ec);
    throw_if(ec);
}
void basic_mutex::lock(fixed_lease lease) {
    std::error_code ec;
    lock(lease, ec);
    throw_if(ec);
}
void basic_mutex::lock(std::error_code& ec) {
    obj_->acquire(std::nullopt, std::nullopt, ec);
}
void basic_mutex::lock(fixed_lease lease, std::error_code& ec) {
    obj_->acquire(std::nullopt, lease.duration, ec);
}

bool basic_mutex::try_lock() {
    return try_lock_impl(milliseconds(0), std::nullopt);
}
bool basic_mutex::try_lock(std::error_code& ec) {
    return obj_->acquire(milliseconds(0), std::nullopt, ec);
}
bool basic_mutex::try_lock_for(milliseconds wait, std::error_code& ec) {
    return obj_->acquire(std::max(wait, milliseconds(0)), std::nullopt, ec);
}
bool basic_mutex::try_lock_for(milliseconds wait, fixed_lease lease, std::error_code& ec) {
    return obj_->acquire(std::max(wait, milliseconds(0)), lease.duration, ec);
}
bool basic_mutex::try_lock_impl(milliseconds wait, std::optional<milliseconds> lease) {
    return or_throw([&](std::error_code& ec) {
        return obj_->acquire(std::max(wait, milliseconds(0)), lease, ec);
    });
}

void basic_mutex::unlock() {
    std::error_code ec;
    unlock(ec);
    throw_if(ec);
}
void basic_mutex::unlock(std::error_code& ec) {
    obj_->release(ec);
}

bool basic_mutex::force_unlock() {
    return or_throw([&](std::error_code& ec) { return force_unlock(ec); });
}
bool basic_mutex::force_unlock(std::error_code& ec) {
    return obj_->force_unlock(ec);
}
bool basic_mutex::is_locked() {
    return or_throw([&](std::error_code& ec) { return is_locked(ec); });
}
bool basic_mutex::is_locked(std::error_code& ec) {
    return obj_->is_locked(ec);
}
bool basic_mutex::is_held_by_this_thread() {
    return or_throw([&](std::error_code& ec) { return is_held_by_this_thread(ec); });
}
bool basic_mutex::is_held_by_this_thread(std::error_code& ec) {
    return obj_->hold_count(ec) > 0;
}
int basic_mutex::hold_count() {
    return or_throw([&](std::error_code& ec) { return hold_count(ec); });
}
int basic_mutex::hold_count(std::error_code& ec) {
    return obj_->hold_count(ec);
}
std::optional<std::chrono::milliseconds> basic_mutex::remaining_lease() {
    return or_throw([&](std::error_code& ec) { return remaining_lease(ec); });
}
std::optional<std::chrono::milliseconds> basic_mutex::remaining_lease(std::error_code& ec) {
    return obj_->remaining_lease(ec);
}

std::optional<std::uint64_t> basic_mutex::fencing_token() const {
    auto h = obj_->current();
    return h ? h->token : std::nullopt;
}

std::stop_token basic_mutex::stop_token() const {
    auto h = obj_->thread_hold();
    return h ? h->stop_token() : std::stop_token{};
}

std::chrono::steady_clock::time_point basic_mutex::valid_until() const {
    auto h = obj_->current();
    return h ? h->valid_until() : std::chrono::steady_clock::time_point{};
}

void basic_mutex::on_lost(std::function<void()> cb) {
    if (auto h = obj_->thread_hold()) h->on_lost(std::move(cb));
}

const std::string& basic_mutex::name() const noexcept {
    return obj_->name();
}

} // namespace dlock
