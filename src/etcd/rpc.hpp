// etcd/rpc.hpp: etcd's v3 API over gRPC (stubs generated at build time from proto/*.proto),
// asynchronous, every answer delivered on the backend's I/O loop.
//
// Transport: one gRPC channel over every endpoint of the URL, resolved once when the backend is
// made (an address per endpoint; an endpoint that does not resolve is skipped), with gRPC's
// round_robin policy: requests and streams go to the members that are connected, a dead member
// is skipped and tried again in the background (reconnect backoff 100 ms .. 1 s). Any member
// serves any request (a follower forwards writes to the leader), so a leader change shows as
// a failed request at most, which the callers retry. Streams carry etcd's "hasleader"
// metadata: a member cut off from the quorum ends them instead of keeping them silent.
//
// Authentication (user:password@): Auth.Authenticate gives a token that every request carries
// in its "token" metadata; an expired token ("invalid auth token") is renewed once per request.
// TLS (etcds://): gRPC's SSL credentials with the URL's cacert, cert and key.
//
// Fork: gRPC's fork support is switched off before gRPC starts (GRPC_ENABLE_FORK_SUPPORT=false
// unless the environment sets it): with it, a fork while calls are in flight aborts the
// process (`dlock exec` forks its command).
//
// Threads: every call and stream runs on gRPC's completion-queue API, on one queue shared by
// every etcd client of the process (completion_queue()); one thread waits on it without a
// deadline and only posts to the I/O loop (`delivery`), which is closed before the backend
// goes: later answers are dropped. Every member of `rpc` is called on the I/O thread, except
// close(), stream::write() and stream::cancel(). (gRPC's callback API, used before, polls its
// queue from two threads that wake about twice a second each, idle or not.)
#pragma once

#include "etcd/url.hpp"
#include "rpc.grpc.pb.h" // generated from proto/rpc.proto

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <grpcpp/grpcpp.h>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail::etcd {

namespace pb = ::etcdserverpb;

/// The dlock::errc of a failed gRPC status: unavailable (no member answered, the deadline
/// passed, no leader), auth_failed (a wrong password, an invalid token, a server certificate
/// the CA does not verify or a TLS handshake the server refused), permission_denied
/// (RBAC), invalid_argument, unsupported (a method the server lacks: not a v3 server),
/// cancelled, server_busy (too many requests), server_error otherwise. Clear for OK.
std::error_code to_error(const grpc::Status& s);
/// Whether a failed request may succeed when repeated (no member reachable, a deadline), and
/// not a TLS handshake that failed on a certificate, which repeats the same way.
bool transient(const grpc::Status& s);

/// Where gRPC's callbacks deliver: the I/O loop while the backend lives, nowhere after close().
class delivery {
public:
    explicit delivery(asio::any_io_executor ex)
        : ex_(std::move(ex)) {}
    /// Any thread: runs `f` on the I/O loop, or drops it after close().
    template <class F>
    void post(F&& f) {
        std::lock_guard lk(mu_);
        if (ex_) asio::post(ex_, std::forward<F>(f));
    }
    void close() {
        std::lock_guard lk(mu_);
        ex_ = {};
    }

private:
    std::mutex mu_;
    asio::any_io_executor ex_; // guarded by mu_
};

/// What the completion thread runs when gRPC finishes an operation: each operation's tag is
/// one of these (rpc.cpp).
struct completion {
    virtual void completed(bool ok) = 0;

protected:
    completion() = default;
    ~completion() = default;
    completion(const completion&) = default;
    completion& operator=(const completion&) = default;
};

/// gRPC's completion queue of every etcd client in the process: one thread waits on it without
/// a deadline and runs each operation's completion, which only posts to a backend's I/O loop.
/// Started at the first call, kept for the process's life (rpc.cpp says why).
grpc::CompletionQueue& completion_queue();

/// One bidirectional stream (Watch, LeaseKeepAlive) on the completion queue: writes queued in
/// order, every answer and the end delivered on the I/O loop. It keeps itself alive until gRPC
/// has finished every operation it started. One read and one write are outstanding at most
/// (gRPC's rule); Finish is asked for once, when a read fails (the server ended the stream, or
/// cancel()), and no write starts after that.
template <class Req, class Resp>
class stream final {
public:
    using read_fn = std::function<void(Resp&&)>;
    using end_fn = std::function<void(grpc::Status)>;
    using call_ptr = std::unique_ptr<grpc::ClientAsyncReaderWriter<Req, Resp>>;

    stream(std::shared_ptr<delivery> d, read_fn on_read, end_fn on_end)
        : d_(std::move(d))
        , on_read_(std::move(on_read))
        , on_end_(std::move(on_end)) {}

    grpc::ClientContext& context() noexcept { return ctx_; }
    /// Starts `call` (the stub's PrepareAsync on this context and the completion queue); the
    /// first read follows its start.
    void begin(std::shared_ptr<stream> self, call_ptr call) {
        std::lock_guard lk(mu_);
        self_ = std::move(self);
        call_ = std::move(call);
        ++pending_;
        call_->StartCall(&start_);
    }
    /// Any thread: sends `r` after what is queued (dropped once the stream ended).
    void write(Req r) {
        std::lock_guard lk(mu_);
        if (ended_) return;
        out_.push_back(std::move(r));
        write_next();
    }
    /// Any thread: ends the stream (its end is still delivered).
    void cancel() {
        {
            std::lock_guard lk(mu_);
            ended_ = true;
        }
        ctx_.TryCancel();
    }

private:
    /// A tag: runs one member of the stream when gRPC completes that operation.
    struct op final : completion {
        op(stream* s, void (stream::*f)(bool))
            : s_(s)
            , f_(f) {}
        void completed(bool ok) override { (s_->*f_)(ok); }

    private:
        stream* s_;
        void (stream::*f_)(bool);
    };

    // The completion thread (one at a time; write() and cancel() take mu_ too).
    void started(bool ok) {
        std::unique_lock lk(mu_);
        --pending_;
        if (!ok) return finish(lk);
        started_ = true;
        ++pending_;
        call_->Read(&in_, &read_);
        write_next();
    }
    void wrote(bool ok) {
        std::unique_lock lk(mu_);
        --pending_;
        writing_ = false;
        out_.pop_front();
        if (!ok) ended_ = true; // the call is over: its read fails next
        write_next();
        release_if_done(lk);
    }
    void read(bool ok) {
        std::unique_lock lk(mu_);
        --pending_;
        if (!ok) return finish(lk); // the server ended the stream, or cancel()
        d_->post([f = on_read_, r = std::move(in_)]() mutable { f(std::move(r)); });
        in_ = Resp{};
        ++pending_;
        call_->Read(&in_, &read_);
    }
    void finished(bool /*ok: always true for Finish*/) {
        std::unique_lock lk(mu_);
        --pending_;
        finished_ = true;
        d_->post([f = std::move(on_end_), s = status_] { f(s); });
        on_read_ = {};
        release_if_done(lk);
    }
    /// Under mu_: the next queued write, unless one is outstanding or the stream ended.
    void write_next() {
        if (!started_ || writing_ || ended_ || out_.empty()) {
            if (ended_) out_.erase(out_.begin() + (writing_ ? 1 : 0), out_.end());
            return;
        }
        writing_ = true;
        ++pending_;
        call_->Write(out_.front(), &write_);
    }
    void finish(std::unique_lock<std::mutex>& lk) {
        ended_ = true;
        ++pending_;
        call_->Finish(&status_, &finish_);
        release_if_done(lk);
    }
    /// The last operation completed after the end: drop the stream's hold on itself (outside
    /// the lock; it may be the last reference).
    void release_if_done(std::unique_lock<std::mutex>& lk) {
        if (!finished_ || pending_ != 0) return;
        auto self = std::move(self_);
        lk.unlock();
    }

    std::shared_ptr<delivery> d_;
    read_fn on_read_;
    end_fn on_end_;
    grpc::ClientContext ctx_;
    call_ptr call_{};
    Resp in_{};
    grpc::Status status_{};
    op start_{this, &stream::started};
    op read_{this, &stream::read};
    op write_{this, &stream::wrote};
    op finish_{this, &stream::finished};
    std::mutex mu_;
    std::deque<Req> out_{}; // guarded by mu_; the front is being written while writing_
    int pending_ = 0;       // guarded by mu_: operations started and not completed
    bool started_ = false;  // guarded by mu_
    bool writing_ = false;  // guarded by mu_
    bool ended_ = false;    // guarded by mu_: no write starts any more
    bool finished_ = false; // guarded by mu_: Finish's status is in
    std::shared_ptr<stream> self_{};
};

using watch_stream = stream<pb::WatchRequest, pb::WatchResponse>;
using keepalive_stream = stream<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>;

class watch_hub;

class rpc {
public:
    template <class Resp>
    using done_fn = std::function<void(grpc::Status, Resp&&)>;

    /// Builds the channel (resolves the endpoints; connects lazily). Errors: errc::unavailable
    /// when no endpoint resolves, configuration_error when a TLS file cannot be read; `why`.
    rpc(const etcd_url& url, asio::any_io_executor ex, std::error_code& ec, std::string& why);
    ~rpc();
    rpc(const rpc&) = delete;
    rpc& operator=(const rpc&) = delete;

    void range(pb::RangeRequest r, done_fn<pb::RangeResponse> done);
    void txn(pb::TxnRequest r, done_fn<pb::TxnResponse> done);
    void delete_range(pb::DeleteRangeRequest r, done_fn<pb::DeleteRangeResponse> done);
    void lease_grant(pb::LeaseGrantRequest r, done_fn<pb::LeaseGrantResponse> done);
    void lease_revoke(pb::LeaseRevokeRequest r, done_fn<pb::LeaseRevokeResponse> done);
    void lease_ttl(pb::LeaseTimeToLiveRequest r, done_fn<pb::LeaseTimeToLiveResponse> done);
    /// Maintenance.Status of the member that serves it (its version: etcd_backend::with_server).
    void status(pb::StatusRequest r, done_fn<pb::StatusResponse> done);

    /// Opens a Watch stream: `opened` gets it (on_read then runs per answer, on_end once), or
    /// nullptr after `on_end` got the status of a failed authentication.
    void open_watch(watch_stream::read_fn on_read, watch_stream::end_fn on_end,
                    std::function<void(std::shared_ptr<watch_stream>)> opened);
    void open_keepalive(keepalive_stream::read_fn on_read, keepalive_stream::end_fn on_end,
                        std::function<void(std::shared_ptr<keepalive_stream>)> opened);

    /// The client's one Watch stream, shared by all its watches (watch_hub.hpp).
    const std::shared_ptr<watch_hub>& watches() const noexcept { return hub_; }

    /// Any thread: answers after this are dropped; the watch stream ends.
    void close();
    const std::shared_ptr<delivery>& deliver() const noexcept { return d_; }
    /// Requests sent (metrics' `commands`).
    std::uint64_t requests() const noexcept { return requests_.load(std::memory_order_relaxed); }

private:
    template <class Req, class Resp, class Invoke>
    void unary(Req req, Invoke invoke, done_fn<Resp> done, bool retried = false);
    template <class S, class Open>
    void open_stream(typename S::read_fn on_read, typename S::end_fn on_end, Open open,
                     std::function<void(std::shared_ptr<S>)> opened);
    /// Runs `then` once a token is at hand (at once without credentials), with the status of
    /// a failed Authenticate otherwise.
    void with_token(std::function<void(grpc::Status)> then);
    void prepare(grpc::ClientContext& ctx, bool stream) const;
    /// I/O thread: runs and drops the continuation of call `id`.
    void answer(std::uint64_t id);

    etcd_url url_;
    std::shared_ptr<delivery> d_;
    std::shared_ptr<watch_hub> hub_;
    std::shared_ptr<grpc::Channel> channel_;
    std::unique_ptr<pb::KV::Stub> kv_;
    std::unique_ptr<pb::Watch::Stub> watch_;
    std::unique_ptr<pb::Lease::Stub> lease_;
    std::unique_ptr<pb::Auth::Stub> auth_;
    std::unique_ptr<pb::Maintenance::Stub> maintenance_;
    // I/O thread only:
    std::string token_{};
    bool authenticating_ = false;
    std::vector<std::function<void(grpc::Status)>> token_waiters_{};
    /// The unary calls' continuations by call id. The completion thread holds only the id,
    /// so nothing a continuation owns (the last reference to a lease session, whose timers
    /// need the backend's loop) is ever destroyed there, not even when the answer comes after
    /// the backend closed; what is left here goes with the rpc, before the loop.
    std::unordered_map<std::uint64_t, std::function<void()>> answers_{};
    std::uint64_t next_call_ = 0;
    std::atomic<std::uint64_t> requests_{0};
};

} // namespace dlock::detail::etcd
