// The Redis lock object of a thread-bound lock (dlock::basic_mutex): re-entries are counted
// by the server (Redisson's hash field per owner "<client id>:<thread id>"); the calling
// thread's hold lives in the client's hold registry, keyed by kind, owner and name.
#include "redis/lock_object.hpp"

#include "core/kinds.hpp"
#include "redis/acquire.hpp"
#include "redis/client.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <algorithm>
#include <mutex>

namespace dlock::detail {

resp3::value query_lock(redis_client& c, const lock_keys& k, const command& cmd,
                        std::error_code& ec) {
    auto v = c.run(c.router().for_slot(k.slot), cmd, ec);
    if (!ec) ec = reply_error(v);
    return v;
}

bool force_unlock_lock(redis_client& c, const lock_protocol& p, const lock_keys& k,
                       std::error_code& ec) {
    command cmd;
    p.force_unlock(cmd, k, c.router().for_slot(k.slot).pubsub_mode());
    const auto v = query_lock(c, k, cmd, ec);
    return !ec && v.is_integer() && v.integer == 1;
}

bool lock_is_held(redis_client& c, const lock_protocol& p, const lock_keys& k,
                  std::error_code& ec) {
    command cmd;
    p.locked_query(cmd, k);
    const auto v = query_lock(c, k, cmd, ec);
    return !ec && v.is_integer() && v.integer == 1;
}

std::optional<std::chrono::milliseconds> lock_remaining_lease(redis_client& c, const lock_keys& k,
                                                              std::error_code& ec) {
    command cmd;
    cmd.plain("PTTL").arg(k.key);
    const auto v = query_lock(c, k, cmd, ec);
    if (ec || !v.is_integer() || v.integer == -2) return std::nullopt;
    return std::chrono::milliseconds(v.integer < 0 ? 0 : v.integer);
}

namespace {

class redis_lock_object final : public lock_object {
public:
    redis_lock_object(std::shared_ptr<redis_client> c, std::string name, lock_kind kind)
        : c_(std::move(c))
        , name_(std::move(name))
        , p_(protocol_of(kind)) {
        std::error_code ec;
        keys_ = p_.keys(name_, ec);
        if (ec == errc::unsupported) throw error(ec, unsupported_kind_text("redis", kind));
        if (ec)
            throw error(errc::invalid_argument,
                        "dlock: invalid lock name (empty, over 4096 bytes, or an empty hash tag)");
    }

    /// The owner objects die: stop renewing what they still hold (the keys then expire).
    ~redis_lock_object() override {
        for (auto& [key, w] : created_) {
            auto h = w.lock();
            if (!h || h->released() || h->lost()) continue;
            c_->renewal().remove(h);
            c_->registry().erase_thread_hold(key, h.get());
        }
    }

    const std::string& name() const noexcept override { return name_; }

    std::string owner_of_this_thread() const { return thread_owner(*c_); }
    /// "<kind>\n<client-id>:<thread owner id>\n<name>", built in one allocation (every lock()
    /// and unlock() makes one).
    std::string registry_key() const {
        std::string k;
        k.reserve(p_.name().size() + c_->id().size() + owner_digits_max + name_.size() + 3);
        k.append(p_.name()).append(1, '\n');
        append_owner(k, c_->id(), this_thread_owner_id());
        k.append(1, '\n').append(name_);
        return k;
    }
    std::shared_ptr<hold> thread_hold() const override { return thread_state(); }
    std::shared_ptr<redis_hold> thread_state() const {
        return c_->registry().find_thread_hold(registry_key());
    }

    bool acquire(std::optional<std::chrono::milliseconds> wait,
                 std::optional<std::chrono::milliseconds> lease, std::error_code& ec) override {
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
        auto h = make_hold(*c_, std::move(req), res);
        reg.set_thread_hold(key, h);
        std::lock_guard lk(created_mu_);
        std::erase_if(created_, [](auto& p) { return p.second.expired(); });
        created_.emplace_back(key, h);
        return true;
    }

    void release(std::error_code& ec) override {
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
            c_->renewal().add(h); // still held: its deadline is watched again
            return;
        case release_outcome::kind::released:
            h->end_released();
            c_->renewal().remove(h);
            reg.erase_thread_hold(key, h.get());
            return;
        case release_outcome::kind::still_held:
            --h->count;
            h->releasing = false;
            c_->renewal().add(h);
            return;
        }
    }

    /// Runs a query on the lock's node; a Redis error reply becomes `ec`.
    resp3::value query(const command& cmd, std::error_code& ec) {
        return query_lock(*c_, keys_, cmd, ec);
    }

    bool force_unlock(std::error_code& ec) override {
        return force_unlock_lock(*c_, p_, keys_, ec);
    }
    bool is_locked(std::error_code& ec) override { return lock_is_held(*c_, p_, keys_, ec); }

    int hold_count(std::error_code& ec) override {
        ec.clear();
        // A reentrant kind's owner is the thread's; otherwise it is the current hold's token.
        std::string owner;
        if (p_.reentrant()) {
            owner = owner_of_this_thread();
        } else if (auto h = thread_state(); h && !h->lost() && !h->released()) {
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

    std::optional<std::chrono::milliseconds> remaining_lease(std::error_code& ec) override {
        return lock_remaining_lease(*c_, keys_, ec);
    }

private:
    std::shared_ptr<redis_client> c_;
    std::string name_;
    const lock_protocol& p_;
    lock_keys keys_;
    std::mutex created_mu_;
    std::vector<std::pair<std::string, std::weak_ptr<redis_hold>>> created_; // guarded
};

} // namespace

std::shared_ptr<lock_object> make_redis_lock_object(std::shared_ptr<redis_client> c,
                                                    std::string name, lock_kind kind) {
    return std::make_shared<redis_lock_object>(std::move(c), std::move(name), kind);
}

} // namespace dlock::detail
