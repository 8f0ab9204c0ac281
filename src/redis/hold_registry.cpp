#include "redis/hold_registry.hpp"

#include "redis/hold.hpp"

#include <algorithm>
#include <functional>

namespace dlock::detail {

std::shared_ptr<redis_hold> hold_registry::find_thread_hold(const std::string& key) {
    std::lock_guard lk(thread_holds_mu_);
    auto it = thread_holds_.find(key);
    return it == thread_holds_.end() ? nullptr : it->second;
}

void hold_registry::set_thread_hold(const std::string& key, std::shared_ptr<redis_hold> h) {
    std::lock_guard lk(thread_holds_mu_);
    thread_holds_[key] = std::move(h);
}

void hold_registry::erase_thread_hold(const std::string& key, const redis_hold* h) {
    std::lock_guard lk(thread_holds_mu_);
    auto it = thread_holds_.find(key);
    if (it != thread_holds_.end() && it->second.get() == h) thread_holds_.erase(it);
}

std::size_t hold_registry::local_key(const lock_protocol& p, const std::string& key) noexcept {
    return std::hash<std::string>{}(key) ^ (p.index() * 0x9e3779b97f4a7c15ULL);
}

void hold_registry::local_begin(const lock_protocol& p, const std::string& key,
                                std::chrono::milliseconds lease) {
    std::lock_guard lk(local_mu_);
    auto& e = local_holds_[local_key(p, key)];
    ++e.count;
    e.longest_lease = std::max(e.longest_lease, lease);
}

void hold_registry::local_end(const lock_protocol& p, const std::string& key) noexcept {
    std::lock_guard lk(local_mu_);
    auto it = local_holds_.find(local_key(p, key));
    if (it != local_holds_.end() && --it->second.count <= 0) local_holds_.erase(it);
}

std::optional<std::chrono::milliseconds> hold_registry::held_here(const lock_protocol& p,
                                                                  const std::string& key) {
    std::lock_guard lk(local_mu_);
    if (local_holds_.empty()) return std::nullopt;
    auto it = local_holds_.find(local_key(p, key));
    if (it == local_holds_.end()) return std::nullopt;
    return it->second.longest_lease;
}

void hold_registry::track(std::weak_ptr<cancellable> op) {
    std::lock_guard lk(ops_mu_);
    std::erase_if(ops_, [](const std::weak_ptr<cancellable>& w) { return w.expired(); });
    ops_.push_back(std::move(op));
}

std::vector<std::weak_ptr<cancellable>> hold_registry::take_tracked() {
    std::lock_guard lk(ops_mu_);
    std::vector<std::weak_ptr<cancellable>> out;
    out.swap(ops_);
    return out;
}

void hold_registry::polite_begin(const lock_protocol& p, const std::string& key,
                                 std::chrono::steady_clock::time_point until) {
    std::lock_guard lk(local_mu_);
    if (polite_.size() >= 1024)
        std::erase_if(polite_, [&](const auto& e) { return e.second < until; });
    polite_[local_key(p, key)] = until;
}

std::optional<std::chrono::steady_clock::time_point>
hold_registry::polite_until(const lock_protocol& p, const std::string& key,
                            std::chrono::steady_clock::time_point now) {
    std::lock_guard lk(local_mu_);
    if (polite_.empty()) return std::nullopt;
    auto it = polite_.find(local_key(p, key));
    if (it == polite_.end()) return std::nullopt;
    if (it->second <= now) {
        polite_.erase(it);
        return std::nullopt;
    }
    return it->second;
}

} // namespace dlock::detail
