// etcd_backend::observe: one observation of an election in concurrency.Election's layout
// (election.cpp), driven by Watch streams on the backend's I/O thread, no polling; what the Go
// client's Election.Observe does.
//
// A refresh reads the range's first key by create revision (the leader). Then one watch from the
// revision after that read: on the leader's key when there is one (its proclaims are puts, its
// end a delete), on the whole range when it is vacant (the first campaign is a put). Any event,
// or the watch breaking (a member gone, compaction), runs a refresh; a refresh that fails is
// tried again a second later (the cluster may be down for longer than a request's deadline).
// The callback gets the result when it differs from the last one delivered
// (core/delivering_observer.hpp). Two proclaims between one read and the next show as the
// second only; what is delivered is in the server's order.
//
// Lifetime: the watch is dropped when the observer stops or the backend shuts down
// (at_shutdown), so no gRPC stream outlives the backend even when the observation does.
#include "core/delivering_observer.hpp"
#include "etcd/backend.hpp"
#include "etcd/backend_call.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"
#include "etcd/watch.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <thread>

namespace dlock::detail::etcd {
namespace {

constexpr std::chrono::seconds retry_every{1};

class etcd_observer final : public delivering_observer,
                            public std::enable_shared_from_this<etcd_observer> {
public:
    etcd_observer(etcd_backend& b, std::string range, lock_backend::observe_fn cb)
        : delivering_observer(std::move(cb))
        , backend_(b.weak_from_this())
        , raw_(&b)
        , range_(std::move(range)) {}

    /// On the I/O thread; `first` runs once: {} after the first delivery, or the error that
    /// prevented it.
    void start(std::function<void(std::error_code)> first) {
        io_thread_.store(std::this_thread::get_id(), std::memory_order_release);
        await_first(std::move(first));
        raw_->at_shutdown(weak_from_this(), [w = weak_from_this()] {
            if (auto self = w.lock()) self->end();
        });
        // A member older than etcd 3.4 would never answer the watch (version.hpp).
        raw_->with_server([w = weak_from_this(), gen = gen_](std::error_code ec) {
            auto self = w.lock();
            if (!self || !self->wanted(gen)) return;
            if (ec) return self->finish_first(ec);
            self->refresh();
        });
    }

    void stop() noexcept override {
        delivering_observer::stop();
        if (std::this_thread::get_id() == io_thread_.load(std::memory_order_acquire)) {
            if (live()) end();
            return;
        }
        if (auto b = backend_.lock())
            asio::post(b->executor(), [w = weak_from_this()] {
                if (auto self = w.lock()) self->end();
            });
    }

private:
    /// The backend while it lives (I/O thread: its destruction drains the loop first).
    etcd_backend* live() const noexcept { return backend_.expired() ? nullptr : raw_; }

    /// I/O thread: no more requests or watches.
    void end() {
        ended_ = true;
        ++gen_;
        if (watch_) std::exchange(watch_, nullptr)->cancel();
    }

    bool wanted(std::uint64_t gen) const noexcept {
        return !ended_ && !stopped() && gen == gen_ && live() && !raw_->shut();
    }

    void refresh() {
        if (!wanted(gen_)) return;
        if (watch_) std::exchange(watch_, nullptr)->cancel();
        raw_->client().range(by_create(range_, 1), [w = weak_from_this(), gen = ++gen_](
                                                       grpc::Status s, pb::RangeResponse&& r) {
            auto self = w.lock();
            if (self && self->wanted(gen)) self->on_read(s, std::move(r));
        });
    }

    void on_read(const grpc::Status& s, pb::RangeResponse&& r) {
        if (!s.ok()) {
            raw_->set_error("observe " + range_ + " on etcd " + raw_->url().display() + ": " +
                            s.error_message());
            if (awaiting_first()) return finish_first(to_error(s));
            return retry_later();
        }
        const auto from = r.header().revision() + 1;
        if (r.kvs().empty()) {
            deliver(std::nullopt);
            return watch(range_, range_end(range_), from);
        }
        const auto& kv = r.kvs(0);
        deliver(leader_info{kv.value(), static_cast<std::uint64_t>(kv.create_revision())});
        watch(kv.key(), {}, from);
    }

    void watch(const std::string& key, std::string end, std::int64_t from) {
        if (!wanted(gen_)) return;
        if (watch_) watch_->cancel();
        watch_ = std::make_shared<key_watch>(
            raw_->client(), key, from,
            [w = weak_from_this(), gen = gen_](key_watch::result) {
                auto self = w.lock();
                if (self && self->wanted(gen)) self->refresh(); // changed, deleted or broken
            },
            std::move(end));
        watch_->watch_changes();
        watch_->start();
    }

    void retry_later() {
        // The timer lives in its handler only: nothing of Asio outlives the backend's loop.
        auto t = std::make_shared<asio::steady_timer>(raw_->executor(), retry_every);
        t->async_wait([t, w = weak_from_this(), gen = gen_](std::error_code e) {
            auto self = w.lock();
            if (!e && self && self->wanted(gen)) self->refresh();
        });
    }

    std::weak_ptr<etcd_backend> backend_;
    etcd_backend* raw_;
    std::string range_;
    std::atomic<std::thread::id> io_thread_{}; // set by start()
    // I/O thread only:
    std::shared_ptr<key_watch> watch_{};
    std::uint64_t gen_ = 0; ///< bumped per request: stale answers and watches are ignored
    bool ended_ = false;
};

} // namespace

std::shared_ptr<observer> etcd_backend::observe(std::string_view name, observe_fn cb,
                                                std::error_code& ec) {
    ec.clear();
    auto range = range_of(name, ec);
    if (ec) return nullptr;
    if (on_io_thread() || !cb) {
        ec = errc::invalid_argument;
        return nullptr;
    }
    auto o = std::make_shared<etcd_observer>(*this, std::move(range), std::move(cb));
    ec = call<std::error_code>([o](std::function<void(std::error_code)> done) { o->start(done); },
                               make_error_code(errc::unavailable));
    if (ec) {
        o->stop();
        return nullptr;
    }
    return o;
}

} // namespace dlock::detail::etcd
