// dlock::basic_mutex: thread-bound TimedLockable locks. On Redis they run over the acquisition
// front-end and the calling thread's hold lives in the client's hold registry, keyed by kind,
// owner and name (redis_lock_object). On any other backend (core/lock_backend.hpp) the thread's
// hold and its re-entry count live here, and the backend sees one acquisition per first hold
// (backend_lock_object), as Curator counts re-entries of its InterProcessMutex.
#include "core/lock_backend.hpp"
#include "redis/acquire.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <algorithm>
#include <map>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace dlock {
namespace detail {

/// What basic_mutex asks of its lock, on any backend.
class lock_object {
public:
    lock_object() = default;
    lock_object(const lock_object&) = delete;
    lock_object& operator=(const lock_object&) = delete;
    virtual ~lock_object() = default;

    virtual const std::string& name() const noexcept = 0;
    virtual bool acquire(std::optional<std::chrono::milliseconds> wait,
                         std::optional<std::chrono::milliseconds> lease, std::error_code& ec) = 0;
    virtual void release(std::error_code& ec) = 0;
    virtual bool force_unlock(std::error_code& ec) = 0;
    virtual bool is_locked(std::error_code& ec) = 0;
    virtual int hold_count(std::error_code& ec) = 0;
    virtual std::optional<std::chrono::milliseconds> remaining_lease(std::error_code& ec) = 0;
    /// The calling thread's hold (also when lost, for its stop token), or null.
    virtual std::shared_ptr<hold> thread_hold() const = 0;
    /// The calling thread's live hold, or null.
    std::shared_ptr<hold> current() const {
        auto h = thread_hold();
        return h && !h->lost() && !h->released() ? h : nullptr;
    }
};

class redis_lock_object final : public lock_object {
public:
    redis_lock_object(std::shared_ptr<client_impl> c, std::string name, lock_kind kind)
        : c_(std::move(c))
        , name_(std::move(name))
        , p_(protocol_of(kind)) {
        std::error_code ec;
        keys_ = p_.keys(name_, ec);
        if (ec == errc::unsupported)
            throw error(ec, "dlock: this lock kind is not offered on Redis (a kind of another "
                            "backend, such as PostgreSQL's lease rows)");
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
    std::shared_ptr<hold> thread_hold() const override { return thread_state(); }
    std::shared_ptr<hold_state> thread_state() const {
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
        auto h = make_hold(*c_, req, res);
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

    bool force_unlock(std::error_code& ec) override {
        command cmd;
        p_.force_unlock(cmd, keys_, c_->router().for_slot(keys_.slot).pubsub_mode());
        const auto v = query(cmd, ec);
        return !ec && v.is_integer() && v.integer == 1;
    }

    bool is_locked(std::error_code& ec) override {
        command cmd;
        p_.locked_query(cmd, keys_);
        const auto v = query(cmd, ec);
        return !ec && v.is_integer() && v.integer == 1;
    }

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

/// The write holds of the backend lock objects by (backend, lock name, thread), so that the
/// read side of the same lock can tell that the calling thread holds the write side and take
/// its read hold as a downgrade (lock_backend::acquire_read_under). Expired entries are
/// ignored (a hold outlives no backend address reuse: it is a weak reference).
class write_hold_registry {
public:
    static write_hold_registry& instance() {
        static write_hold_registry r;
        return r;
    }
    void put(const lock_backend* b, const std::string& name, const std::shared_ptr<hold>& h) {
        std::lock_guard lk(mu_);
        holds_[key(b, name)] = h;
    }
    void erase(const lock_backend* b, const std::string& name) {
        std::lock_guard lk(mu_);
        holds_.erase(key(b, name));
    }
    /// The calling thread's live write hold of `name` on `b`, or null.
    std::shared_ptr<hold> find(const lock_backend* b, const std::string& name) const {
        std::lock_guard lk(mu_);
        const auto it = holds_.find(key(b, name));
        auto h = it == holds_.end() ? nullptr : it->second.lock();
        return h && !h->lost() && !h->released() ? h : nullptr;
    }

private:
    using key_type = std::tuple<const lock_backend*, std::string, std::thread::id>;
    static key_type key(const lock_backend* b, const std::string& name) {
        return {b, name, std::this_thread::get_id()};
    }
    mutable std::mutex mu_;
    std::map<key_type, std::weak_ptr<hold>> holds_; // guarded by mu_
};

/// A thread-bound lock on a backend other than Redis: one backend acquisition per first hold
/// of a thread, re-entries counted here. A read lock taken by the thread that holds the write
/// lock of the same name is a downgrade where the backend offers one.
class backend_lock_object final : public lock_object {
public:
    backend_lock_object(std::shared_ptr<lock_backend> b, std::string name, lock_kind kind)
        : b_(std::move(b))
        , name_(std::move(name))
        , kind_(kind) {
        if (name_.empty() || name_.size() > 4096)
            throw error(errc::invalid_argument,
                        "dlock: invalid lock name (empty or over 4096 bytes)");
        if (!b_->supports(kind_))
            throw error(errc::unsupported, "dlock: the " + std::string(b_->backend_name()) +
                                               " backend does not offer this lock kind");
    }

    /// The owner objects die: holds still open are released without waiting (a backend hold
    /// has no lease that would end it otherwise).
    ~backend_lock_object() override {
        for (auto& [id, e] : holds_)
            if (!e.h->lost() && !e.h->released()) e.h->release_async([](std::error_code) {});
    }

    const std::string& name() const noexcept override { return name_; }

    bool acquire(std::optional<std::chrono::milliseconds> wait,
                 std::optional<std::chrono::milliseconds> lease, std::error_code& ec) override {
        ec.clear();
        if (b_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return false;
        }
        {
            std::lock_guard lk(mu_);
            if (auto it = holds_.find(std::this_thread::get_id()); it != holds_.end()) {
                if (it->second.h->lost() || it->second.h->released()) {
                    holds_.erase(it);
                } else if (!b_->reentrant(kind_)) {
                    ec = make_error_code(errc::invalid_argument); // would wait for itself
                    return false;
                } else {
                    ++it->second.count; // a re-entry keeps the first hold's lease
                    return true;
                }
            }
        }
        std::shared_ptr<hold> h;
        if (kind_ == lock_kind::read)
            if (const auto w = write_hold_registry::instance().find(b_.get(), name_)) {
                h = b_->acquire_read_under(*w, ec);
                if (ec == errc::unsupported) ec.clear();
                if (ec) return false;
            }
        if (!h) h = b_->acquire(name_, {.wait = wait, .lease = lease, .kind = kind_}, ec);
        if (ec || !h) return false;
        if (kind_ == lock_kind::write) write_hold_registry::instance().put(b_.get(), name_, h);
        std::lock_guard lk(mu_);
        holds_[std::this_thread::get_id()] = {std::move(h), 1};
        return true;
    }

    void release(std::error_code& ec) override {
        ec.clear();
        if (b_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return;
        }
        std::shared_ptr<hold> h;
        {
            std::lock_guard lk(mu_);
            const auto it = holds_.find(std::this_thread::get_id());
            if (it == holds_.end() || it->second.h->released()) {
                ec = make_error_code(errc::not_owner);
                return;
            }
            if (it->second.h->lost()) {
                holds_.erase(it);
                ec = make_error_code(errc::not_owner);
                return;
            }
            if (it->second.count > 1) {
                --it->second.count;
                return;
            }
            h = it->second.h;
        }
        h->release_blocking(ec);
        if (ec && ec != errc::not_owner) return; // still ours: unlock() may be called again
        if (kind_ == lock_kind::write) write_hold_registry::instance().erase(b_.get(), name_);
        std::lock_guard lk(mu_);
        if (auto it = holds_.find(std::this_thread::get_id());
            it != holds_.end() && it->second.h == h)
            holds_.erase(it);
    }

    bool force_unlock(std::error_code& ec) override { return b_->force_unlock(name_, kind_, ec); }
    bool is_locked(std::error_code& ec) override { return b_->is_locked(name_, kind_, ec); }
    int hold_count(std::error_code& ec) override {
        ec.clear();
        std::lock_guard lk(mu_);
        const auto it = holds_.find(std::this_thread::get_id());
        if (it == holds_.end() || it->second.h->lost() || it->second.h->released()) return 0;
        return it->second.count;
    }
    std::optional<std::chrono::milliseconds> remaining_lease(std::error_code& ec) override {
        return b_->remaining_lease(name_, kind_, ec);
    }
    std::shared_ptr<hold> thread_hold() const override {
        std::lock_guard lk(mu_);
        const auto it = holds_.find(std::this_thread::get_id());
        return it == holds_.end() ? nullptr : it->second.h;
    }

private:
    struct entry {
        std::shared_ptr<hold> h;
        int count = 0;
    };
    std::shared_ptr<lock_backend> b_;
    std::string name_;
    lock_kind kind_;
    mutable std::mutex mu_;
    std::unordered_map<std::thread::id, entry> holds_; // guarded by mu_
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

namespace {
std::shared_ptr<detail::lock_object> make_lock_object(client& c, std::string name, lock_kind kind) {
    if (const auto& b = detail::access::backend(c))
        return std::make_shared<detail::backend_lock_object>(b, std::move(name), kind);
    return std::make_shared<detail::redis_lock_object>(detail::access::impl(c), std::move(name),
                                                       kind);
}
} // namespace

basic_mutex::basic_mutex(client& c, std::string name, lock_kind kind)
    : obj_(make_lock_object(c, std::move(name), kind)) {}
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
    return h ? h->fencing_token() : std::nullopt;
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
