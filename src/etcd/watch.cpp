#include "etcd/watch.hpp"

namespace dlock::detail::etcd {

key_watch::key_watch(rpc& r, std::string key, std::int64_t start_revision,
                     std::function<void(result)> done, std::string range_end)
    : rpc_(r)
    , key_(std::move(key))
    , range_end_(std::move(range_end))
    , start_revision_(start_revision)
    , done_(std::move(done)) {}

void key_watch::probe(asio::any_io_executor ex, std::chrono::milliseconds every) {
    probe_timer_ = std::make_unique<asio::steady_timer>(std::move(ex));
    probe_every_ = every;
}

void key_watch::arm_probe() {
    if (!probe_timer_ || finished_) return;
    probe_timer_->expires_after(probe_every_);
    probe_timer_->async_wait([w = weak_from_this()](std::error_code ec) {
        auto self = w.lock();
        if (ec || !self || self->finished_) return;
        if (!std::exchange(self->answered_, false)) return self->finish(result::broken);
        if (self->stream_) {
            pb::WatchRequest req;
            req.mutable_progress_request();
            self->stream_->write(std::move(req));
        }
        self->arm_probe();
    });
}

void key_watch::start() {
    arm_probe(); // an open that never completes is found too
    std::weak_ptr<key_watch> w = weak_from_this();
    rpc_.open_watch(
        [w](pb::WatchResponse&& a) {
            if (auto self = w.lock()) self->on_answer(a);
        },
        [w](grpc::Status) {
            if (auto self = w.lock()) self->finish(result::broken);
        },
        [w](std::shared_ptr<watch_stream> s) {
            auto self = w.lock();
            if (!s) return;
            if (!self || self->finished_) return s->cancel();
            self->stream_ = s;
            pb::WatchRequest req;
            auto* c = req.mutable_create_request();
            c->set_key(self->key_);
            c->set_range_end(self->range_end_);
            c->set_start_revision(self->start_revision_);
            if (!self->changes_) c->add_filters(pb::WatchCreateRequest::NOPUT); // deletions only
            s->write(std::move(req));
        });
}

void key_watch::on_answer(const pb::WatchResponse& a) {
    answered_ = true;
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
        if (a.canceled() || a.compact_revision() != 0) finish(result::broken);
        return;
    }
    for (const auto& ev : a.events())
        if (ev.type() == mvccpb::Event::DELETE && (!range_end_.empty() || ev.kv().key() == key_))
            return finish(result::deleted);
    if (a.canceled() || a.compact_revision() != 0) finish(result::broken);
}

void key_watch::finish(result r) {
    if (finished_) return;
    finished_ = true;
    if (probe_timer_) probe_timer_->cancel();
    if (stream_) std::exchange(stream_, nullptr)->cancel();
    auto done = std::move(done_);
    done_ = {};
    if (done) done(r);
}

void key_watch::cancel() {
    if (finished_) return;
    finished_ = true;
    done_ = {};
    if (probe_timer_) probe_timer_->cancel();
    if (stream_) std::exchange(stream_, nullptr)->cancel();
}

} // namespace dlock::detail::etcd
