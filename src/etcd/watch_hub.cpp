#include "etcd/watch_hub.hpp"

#include "etcd/watch.hpp"

#include <asio/steady_timer.hpp>

#include <algorithm>
#include <utility>

namespace dlock::detail::etcd {

watch_hub::watch_hub(rpc& r, asio::any_io_executor ex)
    : rpc_(r)
    , ex_(std::move(ex)) {}

std::int64_t watch_hub::add(const std::shared_ptr<key_watch>& w, pb::WatchCreateRequest c,
                            std::chrono::milliseconds probe) {
    const auto id = ++next_id_; // never reused: a late answer of a cancelled id is dropped
    c.set_watch_id(id);
    watches_.emplace(id, entry{w, probe.count() > 0});
    if (probe.count() > 0) {
        ++probing_;
        if (probe_every_.count() == 0 || probe < probe_every_) probe_every_ = probe;
    }
    pb::WatchRequest r;
    *r.mutable_create_request() = std::move(c);
    send(std::move(r));
    arm_probe(); // after send(): a stream that never opens is found too
    return id;
}

void watch_hub::remove(std::int64_t id) {
    const auto it = watches_.find(id);
    if (it == watches_.end()) return; // its stream failed already
    if (it->second.probe && probing_ > 0 && --probing_ == 0) stop_probe();
    watches_.erase(it);
    const auto p = std::find_if(pending_.begin(), pending_.end(), [id](const auto& r) {
        return r.has_create_request() && r.create_request().watch_id() == id;
    });
    if (p != pending_.end()) { // not sent yet: never send it
        pending_.erase(p);
        return;
    }
    std::shared_ptr<watch_stream> s;
    {
        std::lock_guard lk(mu_);
        s = stream_;
    }
    if (!s) return;
    pb::WatchRequest r;
    r.mutable_cancel_request()->set_watch_id(id);
    s->write(std::move(r));
}

void watch_hub::close() {
    std::shared_ptr<watch_stream> s;
    {
        std::lock_guard lk(mu_);
        closed_ = true;
        s = std::exchange(stream_, nullptr);
    }
    if (s) s->cancel();
}

void watch_hub::send(pb::WatchRequest r) {
    std::shared_ptr<watch_stream> s;
    {
        std::lock_guard lk(mu_);
        if (closed_) return; // shutting down: the callers are being cancelled
        s = stream_;
    }
    if (s) return s->write(std::move(r));
    pending_.push_back(std::move(r));
    if (!opening_) open();
}

void watch_hub::open() {
    opening_ = true;
    const auto gen = ++gen_;
    std::weak_ptr<watch_hub> h = weak_from_this();
    rpc_.open_watch(
        [h, gen](pb::WatchResponse&& a) {
            if (auto self = h.lock()) self->on_answer(gen, a);
        },
        [h, gen](const grpc::Status&) {
            if (auto self = h.lock()) self->fail(gen);
        },
        [h, gen](const std::shared_ptr<watch_stream>& s) {
            if (!s) return; // the authentication failed: fail() ran
            auto self = h.lock();
            if (!self || gen != self->gen_) return s->cancel();
            self->opening_ = false;
            {
                std::lock_guard lk(self->mu_);
                if (self->closed_) return s->cancel();
                self->stream_ = s;
            }
            for (auto& r : std::exchange(self->pending_, {}))
                s->write(std::move(r));
        });
}

void watch_hub::on_answer(std::uint64_t gen, const pb::WatchResponse& a) {
    if (gen != gen_) return; // a stream given up
    answered_ = true;
    const auto it = watches_.find(a.watch_id());
    if (it == watches_.end()) return; // a progress answer (id -1), or a watch removed since
    auto w = it->second.w.lock();
    if (!w) return remove(a.watch_id()); // its owner dropped it without cancelling
    w->on_answer(a);
}

void watch_hub::fail(std::uint64_t gen) {
    if (gen != gen_) return;
    ++gen_; // what the old stream still delivers is dropped
    opening_ = false;
    std::shared_ptr<watch_stream> s;
    bool closing = false;
    {
        std::lock_guard lk(mu_);
        s = std::exchange(stream_, nullptr);
        closing = closed_;
    }
    if (s) s->cancel();
    if (!closing) streams_broken_.fetch_add(1, std::memory_order_relaxed);
    pending_.clear();
    probing_ = 0;
    stop_probe();
    probe_every_ = std::chrono::milliseconds(0);
    // Swapped out first: the callers watch again from their handlers, on a new stream.
    for (auto& [id, e] : std::exchange(watches_, {}))
        if (auto w = e.w.lock()) w->stream_broken();
}

void watch_hub::arm_probe() {
    if (probe_armed_ || probing_ == 0) return;
    probe_armed_ = true;
    answered_ = false;
    if (!probe_timer_) probe_timer_ = std::make_shared<asio::steady_timer>(ex_);
    probe_timer_->expires_after(probe_every_);
    // The handler holds the timer, not the hub: nothing of Asio outlives the backend's loop.
    probe_timer_->async_wait(
        [t = probe_timer_, h = weak_from_this(), gen = gen_](std::error_code ec) {
            auto self = h.lock();
            if (ec || !self) return; // cancelled (stop_probe, or armed again)
            self->probe_armed_ = false;
            self->on_probe(gen);
        });
}

void watch_hub::stop_probe() {
    probe_armed_ = false;
    if (probe_timer_) probe_timer_->cancel();
}

void watch_hub::on_probe(std::uint64_t gen) {
    if (probing_ == 0) return;
    if (gen != gen_) return arm_probe(); // another stream since: count afresh
    if (!answered_) return fail(gen);    // nothing at all since the last ask: silent
    std::shared_ptr<watch_stream> s;
    {
        std::lock_guard lk(mu_);
        s = stream_;
    }
    if (s) {
        pb::WatchRequest r;
        r.mutable_progress_request();
        s->write(std::move(r));
    }
    arm_probe();
}

} // namespace dlock::detail::etcd
