// dlock::basic_mutex (thread-bound TimedLockable locks) on top of client_impl.
#include "redis/client_impl.hpp"
#include "redis/renewal.hpp"

#include <dlock/mutex.hpp>

namespace dlock {
namespace detail {

class lock_object {
public:
    lock_object(std::shared_ptr<client_impl> c, std::string name, lock_kind kind)
        : c_(std::move(c))
        , name_(std::move(name))
        , kind_(kind) {
        std::error_code ec;
        keys_ = make_keys(name_, kind_, ec);
        if (ec)
            throw error(errc::invalid_argument,
                        "dlock: invalid lock name (empty, over 4096 bytes, or an empty hash tag)");
    }

    const std::string& name() const noexcept { return name_; }

    std::string owner_of_this_thread() const {
        return c_->id() + ':' + std::to_string(this_thread_owner_id());
    }
    std::string registry_key() const {
        return std::string(kind_ == lock_kind::reentrant ? "r\n" : "s\n") + owner_of_this_thread() +
               '\n' + name_;
    }

    std::shared_ptr<hold_state> current() const {
        auto h = c_->find_thread_hold(registry_key());
        return h && !h->lost() && !h->released() ? h : nullptr;
    }

    bool acquire(std::optional<std::chrono::milliseconds> wait,
                 std::optional<std::chrono::milliseconds> lease, std::error_code& ec) {
        ec.clear();
        if (c_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return false;
        }
        if (lease && lease->count() < 1) {
            ec = make_error_code(errc::invalid_argument);
            return false;
        }
        const auto key = registry_key();
        auto existing = c_->find_thread_hold(key);
        if (existing && (existing->lost() || existing->released())) {
            c_->erase_thread_hold(key, existing.get());
            existing.reset();
        }
        if (existing && kind_ == lock_kind::simple) {
            ec = make_error_code(errc::invalid_argument); // not reentrant: would self-deadlock
            return false;
        }
        acquire_request req;
        req.kind = kind_;
        req.keys = keys_;
        req.owner = kind_ == lock_kind::reentrant ? owner_of_this_thread() : random_token_();
        req.wait = wait;
        req.lease = lease ? *lease : c_->options().watchdog_lease;
        req.fresh_owner = !existing;

        acquire_result res;
        // Uncontended: decided by one round trip on the calling thread (sync lane). Refused or
        // busy: the acquire operation on the I/O thread (subscribe, last attempt, sleep).
        if (c_->try_first_attempt(req, res, ec) != client_impl::first_attempt::finished) {
            completion_flag done;
            c_->async_acquire(req, [&](std::error_code e, acquire_result r) {
                ec = e;
                res = r;
                done.set();
            });
            done.wait();
        }
        if (ec || !res.acquired) return false;

        if (existing && res.reentered) {
            existing->count = static_cast<int>(res.count);
            if (lease) {
                existing->set_valid_until(res.sent_at + *lease - drift_for(*lease));
            }
            return true;
        }
        auto h = c_->make_hold(req, res, !lease);
        c_->set_thread_hold(key, h);
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
        auto h = c_->find_thread_hold(key);
        if (!h || h->released()) {
            ec = make_error_code(errc::not_owner);
            return;
        }
        if (h->lost()) {
            c_->erase_thread_hold(key, h.get());
            ec = make_error_code(errc::not_owner);
            return;
        }
        const bool last = h->count <= 1;
        if (last) h->releasing = true;
        const bool fully = c_->release(h, ec);
        if (ec == errc::not_owner) {
            c_->renewal().remove(h);
            c_->erase_thread_hold(key, h.get());
            h->mark_lost();
            return;
        }
        if (ec) {
            h->releasing = false;
            return;
        }
        if (fully) {
            h->mark_released();
            c_->renewal().remove(h);
            c_->erase_thread_hold(key, h.get());
        } else {
            --h->count;
            h->releasing = false;
        }
    }

    resp3::value run_checked(std::initializer_list<std::string_view> args) {
        std::error_code ec;
        auto v = c_->run(std::span<const std::string_view>(args.begin(), args.size()), ec);
        throw_if(ec);
        throw_if(reply_error(v));
        return v;
    }

    bool force_unlock() {
        std::error_code ec;
        const std::string_view a[] = {"2", keys_.key, keys_.channel, "0", c_->publish_cmd()};
        auto v = c_->run_script(script_id::reentrant_force_unlock, a, ec);
        throw_if(ec);
        throw_if(reply_error(v));
        return v.is_integer() && v.integer == 1;
    }

    std::shared_ptr<client_impl> c_;
    std::string name_;
    lock_kind kind_;
    lock_keys keys_;
    std::mutex created_mu_;
    std::vector<std::pair<std::string, std::weak_ptr<hold_state>>> created_; // guarded

    /// The owner object dies: stop renewing what it still holds (the keys then expire).
    ~lock_object() {
        for (auto& [key, w] : created_) {
            auto h = w.lock();
            if (!h || h->released() || h->lost()) continue;
            c_->renewal().remove(h);
            c_->erase_thread_hold(key, h.get());
        }
    }

private:
    static std::string random_token_();
};

} // namespace detail
} // namespace dlock

#include "core/random.hpp"

namespace dlock {
namespace detail {
std::string lock_object::random_token_() {
    return random_token();
}

std::shared_ptr<hold_state> client_impl::find_thread_hold(const std::string& key) {
    std::lock_guard lk(thread_holds_mu_);
    auto it = thread_holds_.find(key);
    return it == thread_holds_.end() ? nullptr : it->second;
}
void client_impl::set_thread_hold(const std::string& key, std::shared_ptr<hold_state> h) {
    std::lock_guard lk(thread_holds_mu_);
    thread_holds_[key] = std::move(h);
}
void client_impl::erase_thread_hold(const std::string& key, const hold_state* h) {
    std::lock_guard lk(thread_holds_mu_);
    auto it = thread_holds_.find(key);
    if (it != thread_holds_.end() && it->second.get() == h) thread_holds_.erase(it);
}
} // namespace detail

basic_mutex::basic_mutex(client& c, std::string name, lock_kind kind)
    : obj_(std::make_shared<detail::lock_object>(c.impl(), std::move(name), kind)) {}
basic_mutex::basic_mutex(basic_mutex&&) noexcept = default;
basic_mutex& basic_mutex::operator=(basic_mutex&&) noexcept = default;
basic_mutex::~basic_mutex() = default;

void basic_mutex::lock() {
    std::error_code ec;
    lock(ec);
    throw_if(ec);
}
void basic_mutex::lock(milliseconds lease) {
    std::error_code ec;
    obj_->acquire(std::nullopt, lease, ec);
    throw_if(ec);
}
void basic_mutex::lock(std::error_code& ec) {
    obj_->acquire(std::nullopt, std::nullopt, ec);
}

bool basic_mutex::try_lock() {
    return try_lock_impl(milliseconds(0), std::nullopt);
}
bool basic_mutex::try_lock(std::error_code& ec) {
    return obj_->acquire(milliseconds(0), std::nullopt, ec);
}
bool basic_mutex::try_lock_for(milliseconds wait, std::optional<milliseconds> lease,
                               std::error_code& ec) {
    if (wait.count() < 0) wait = milliseconds(0);
    return obj_->acquire(wait, lease, ec);
}
bool basic_mutex::try_lock_impl(milliseconds wait, std::optional<milliseconds> lease) {
    std::error_code ec;
    const bool ok = try_lock_for(wait, lease, ec);
    throw_if(ec);
    return ok;
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
    return obj_->force_unlock();
}

bool basic_mutex::is_locked() {
    auto v = obj_->run_checked({"EXISTS", obj_->keys_.key});
    return v.is_integer() && v.integer == 1;
}

bool basic_mutex::is_held_by_this_thread() {
    if (obj_->kind_ == lock_kind::reentrant) {
        const auto owner = obj_->owner_of_this_thread();
        auto v = obj_->run_checked({"HEXISTS", obj_->keys_.key, owner});
        return v.is_integer() && v.integer == 1;
    }
    auto h = obj_->current();
    if (!h) return false;
    auto v = obj_->run_checked({"GET", obj_->keys_.key});
    return v.is_string() && v.str == h->owner;
}

int basic_mutex::hold_count() {
    if (obj_->kind_ == lock_kind::simple) return is_held_by_this_thread() ? 1 : 0;
    const auto owner = obj_->owner_of_this_thread();
    auto v = obj_->run_checked({"HGET", obj_->keys_.key, owner});
    if (v.is_null()) return 0;
    if (v.is_integer()) return static_cast<int>(v.integer);
    if (v.is_string()) return std::stoi(v.str);
    throw error(errc::protocol_error);
}

std::optional<std::chrono::milliseconds> basic_mutex::remaining_lease() {
    auto v = obj_->run_checked({"PTTL", obj_->keys_.key});
    if (!v.is_integer() || v.integer == -2) return std::nullopt;
    return milliseconds(v.integer < 0 ? 0 : v.integer);
}

std::optional<std::uint64_t> basic_mutex::fencing_token() const {
    auto h = obj_->current();
    return h ? h->token : std::nullopt;
}

std::stop_token basic_mutex::stop_token() const {
    auto h = obj_->c_->find_thread_hold(obj_->registry_key());
    return h ? h->stop_token() : std::stop_token{};
}

std::chrono::steady_clock::time_point basic_mutex::valid_until() const {
    auto h = obj_->current();
    return h ? h->valid_until() : std::chrono::steady_clock::time_point{};
}

void basic_mutex::on_lost(std::function<void()> cb) {
    auto h = obj_->c_->find_thread_hold(obj_->registry_key());
    if (h) h->on_lost(std::move(cb));
}

const std::string& basic_mutex::name() const noexcept {
    return obj_->name();
}

} // namespace dlock
