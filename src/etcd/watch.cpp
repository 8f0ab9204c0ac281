#include "etcd/watch.hpp"

#include "etcd/watch_hub.hpp"

namespace dlock::detail::etcd {

key_watch::key_watch(rpc& r, std::string key, std::int64_t start_revision,
                     std::function<void(result)> done, std::string range_end)
    : hub_(r.watches())
    , key_(std::move(key))
    , range_end_(std::move(range_end))
    , start_revision_(start_revision)
    , done_(std::move(done)) {}

void key_watch::start() {
    auto hub = hub_.lock();
    if (!hub || finished_) return;
    pb::WatchCreateRequest c;
    c.set_key(key_);
    c.set_range_end(range_end_);
    c.set_start_revision(start_revision_);
    if (!changes_) c.add_filters(pb::WatchCreateRequest::NOPUT); // deletions only
    id_ = hub->add(shared_from_this(), std::move(c), probe_every_);
}

void key_watch::on_answer(const pb::WatchResponse& a) {
    if (finished_) return;
    if (a.created() && on_created_) {
        on_created_(a.header().revision());
        if (finished_) return; // cancelled by `on_created_`
    }
    if (changes_ && a.events_size() > 0) return finish(result::changed);
    if (on_delete_) {
        for (const auto& ev : a.events()) {
            if (ev.type() != mvccpb::Event::DELETE) continue;
            on_delete_(ev.kv().key(), ev.kv().mod_revision());
            if (finished_) return; // cancelled by `on_delete_`
        }
        if (a.canceled() || a.compact_revision() != 0) cancelled_by_server();
        return;
    }
    for (const auto& ev : a.events())
        if (ev.type() == mvccpb::Event::DELETE && (!range_end_.empty() || ev.kv().key() == key_))
            return finish(result::deleted);
    if (a.canceled() || a.compact_revision() != 0) cancelled_by_server();
}

void key_watch::cancelled_by_server() {
    if (auto hub = hub_.lock()) hub->count_cancelled();
    finish(result::broken);
}

void key_watch::unregister() {
    if (id_ == 0) return;
    if (auto hub = hub_.lock()) hub->remove(id_);
    id_ = 0;
}

void key_watch::finish(result r) {
    if (finished_) return;
    finished_ = true;
    unregister();
    auto done = std::move(done_);
    done_ = {};
    if (done) done(r);
}

void key_watch::cancel() {
    if (finished_) return;
    finished_ = true;
    done_ = {};
    unregister();
}

} // namespace dlock::detail::etcd
