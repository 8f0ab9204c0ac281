#include "etcd/own_watches.hpp"

namespace dlock::detail::etcd {

std::uint64_t own_watches::attach(const std::string& key, std::int64_t rev, std::int64_t from,
                                  std::function<void(key_watch::result)> f) {
    const auto now = clock::now();
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.ticket != 0) return 0;
    if (it == entries_.end()) {
        const auto watch_id = ++next_id_;
        auto w = std::make_shared<key_watch>(rpc_, key, from, [this, key, watch_id](auto r) {
            if (r != key_watch::result::deleted) on_broken(key, watch_id);
        });
        w->each_deletion([this, watch_id](const std::string& k, std::int64_t revision) {
            on_deleted(k, watch_id, revision);
        });
        it = entries_.emplace(key, entry{.w = w, .watch_id = watch_id}).first;
        w->start();
    } else {
        idle_.erase(it->second.in_idle);
    }
    auto& e = it->second;
    e.ticket = ++next_id_;
    e.after = rev;
    e.f = std::move(f);
    const auto ticket = e.ticket;
    trim(now);
    return ticket;
}

void own_watches::detach(const std::string& key, std::uint64_t ticket) {
    auto it = entries_.find(key);
    if (ticket == 0 || it == entries_.end() || it->second.ticket != ticket) return;
    auto& e = it->second;
    e.ticket = 0;
    e.f = {};
    e.idle_since = clock::now();
    e.in_idle = idle_.insert(idle_.end(), key);
    trim(e.idle_since);
}

void own_watches::on_deleted(const std::string& key, std::uint64_t watch_id,
                             std::int64_t revision) {
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.watch_id != watch_id) return;
    auto& e = it->second;
    if (e.ticket == 0 || revision <= e.after) return; // idle, or an earlier hold's deletion
    auto f = e.f;                                     // `f` may detach
    f(key_watch::result::deleted);
}

void own_watches::on_broken(const std::string& key, std::uint64_t watch_id) {
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.watch_id != watch_id) return;
    auto f = std::move(it->second.f);
    if (it->second.ticket == 0) idle_.erase(it->second.in_idle);
    entries_.erase(it);
    if (f) f(key_watch::result::broken);
}

void own_watches::trim(clock::time_point now) {
    while (!idle_.empty()) {
        auto it = entries_.find(idle_.front());
        if (idle_.size() <= max_idle_ && now - it->second.idle_since < linger_) return;
        it->second.w->cancel();
        entries_.erase(it);
        idle_.pop_front();
    }
}

void own_watches::clear() {
    for (auto& [key, e] : entries_)
        e.w->cancel();
    entries_.clear();
    idle_.clear();
}

} // namespace dlock::detail::etcd
