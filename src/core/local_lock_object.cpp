// make_local_lock_object(): see local_lock_object.hpp.
#include "core/local_lock_object.hpp"

#include "core/kinds.hpp"
#include "core/lock_backend.hpp"

#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace dlock::detail {
namespace {

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
class local_lock_object final : public lock_object {
public:
    local_lock_object(std::shared_ptr<lock_backend> b, std::string name, lock_kind kind)
        : b_(std::move(b))
        , name_(std::move(name))
        , kind_(kind) {
        // The backend's own rule (lock_backend::check_name), the one acquire_all applies too.
        if (const auto ec = b_->check_name(name_, kind_); ec == errc::unsupported)
            throw error(ec, unsupported_kind_text(b_->backend_name(), kind_));
        else if (ec)
            throw error(ec, "dlock: invalid lock name (empty or over 4096 bytes)");
    }

    /// The owner objects die: holds still open are released without waiting (a backend hold
    /// has no lease that would end it otherwise).
    ~local_lock_object() override {
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
        h->set_kind(kind_);
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

} // namespace

std::shared_ptr<lock_object> make_local_lock_object(std::shared_ptr<lock_backend> b,
                                                    std::string name, lock_kind kind) {
    return std::make_shared<local_lock_object>(std::move(b), std::move(name), kind);
}

} // namespace dlock::detail
