#include "etcd/rpc.hpp"

#include "etcd/watch_hub.hpp"

#include <dlock/error.hpp>

#include <absl/synchronization/mutex.h>
#include <arpa/inet.h>
#include <cstdlib>
#include <fstream>
#include <netdb.h>
#include <sstream>
#include <thread>

namespace dlock::detail::etcd {
namespace {

bool read_file(const std::string& path, std::string& out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

std::string bare_host(const std::string& name) {
    return name.size() > 2 && name.front() == '[' ? name.substr(1, name.size() - 2) : name;
}

/// "ipv4:a:p,b:p" (or "ipv6:[a]:p,..." when no endpoint has an IPv4 address): one address per
/// endpoint that resolves; "" when none does.
std::string channel_target(const etcd_url& u) {
    std::vector<std::string> v4, v6;
    for (const auto& e : u.endpoints) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        if (::getaddrinfo(bare_host(e.name).c_str(), nullptr, &hints, &res) != 0 || !res) continue;
        std::string a4, a6;
        for (auto* r = res; r; r = r->ai_next) {
            char buf[INET6_ADDRSTRLEN] = {};
            if (r->ai_family == AF_INET && a4.empty() &&
                ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(r->ai_addr)->sin_addr,
                            buf, sizeof buf))
                a4.append(buf).append(":").append(std::to_string(e.port));
            if (r->ai_family == AF_INET6 && a6.empty() &&
                ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(r->ai_addr)->sin6_addr,
                            buf, sizeof buf))
                a6.append("[").append(buf).append("]:").append(std::to_string(e.port));
        }
        ::freeaddrinfo(res);
        if (!a4.empty()) v4.push_back(a4);
        if (!a6.empty()) v6.push_back(a6);
    }
    const auto join = [](const char* scheme, const std::vector<std::string>& v) {
        std::string t = scheme;
        for (std::size_t i = 0; i < v.size(); ++i)
            t += (i ? "," : "") + v[i];
        return t;
    };
    if (!v4.empty()) return join("ipv4:", v4);
    if (!v6.empty()) return join("ipv6:", v6);
    return {};
}

bool says(const grpc::Status& s, std::string_view what) {
    return s.error_message().find(what) != std::string::npos;
}

/// gRPC reports a failed TLS handshake as UNAVAILABLE ("failed to connect to all addresses;
/// last error: ... Ssl handshake failed: ... certificate verify failed" in gRPC 1.51).
bool tls_refused(const grpc::Status& s) {
    return s.error_code() == grpc::StatusCode::UNAVAILABLE &&
           (says(s, "Ssl handshake failed") || says(s, "certificate verify failed"));
}

// Before gRPC's first initialisation: Debian's gRPC turns its fork support on, whose fork
// handlers break the ref counts of calls in flight when the process forks (`dlock exec` runs
// its command by fork and exec; so do the tests' fixtures). Set at static initialisation, while
// the process has one thread (setenv beside another thread's getenv is a data race); a value
// the user set stays. docs/design/etcd.md says so.
// NOLINTBEGIN(concurrency-mt-unsafe): static initialisation, before any thread of ours
[[maybe_unused]] const bool fork_support_off =
    ::setenv("GRPC_ENABLE_FORK_SUPPORT", "false", 0) == 0;
// NOLINTEND(concurrency-mt-unsafe)

/// One unary call on the completion queue: gRPC writes the answer and the status, the
/// completion thread then posts `answered` (which reads them on the I/O loop, through its own
/// reference) and drops the call's hold on itself.
template <class Req, class Resp>
struct unary_call final : completion, std::enable_shared_from_this<unary_call<Req, Resp>> {
    grpc::ClientContext ctx;
    Req req;
    Resp resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> reader;
    std::shared_ptr<delivery> d;
    std::function<void()> answered; // posted to the I/O loop: holds an id, nothing it owns
    std::shared_ptr<unary_call> self;

    void start() {
        self = this->shared_from_this();
        reader->StartCall();
        reader->Finish(&resp, &status, this);
    }
    void completed(bool /*ok: always true for Finish*/) override {
        // Moved out first: when the delivery is closed it is dropped here, not kept by the
        // call (Authenticate's continuation holds the call itself).
        auto a = std::move(answered);
        d->post(std::move(a));
        auto last = std::move(self); // may be the last reference: the call goes with it
    }
};

/// Debian 12 builds Abseil without NDEBUG, so its Mutex runs in debug mode, where every lock
/// taken while another is held updates a lock-order graph for deadlock detection (gRPC takes
/// its mutexes nested: in scenario B, perf showed GraphCycles::GetId and the rest of it at
/// about 3.5 % of the client's CPU). That detection is a debugging aid for Abseil's own
/// users, not a check gRPC relies on: off, once, when the first etcd client starts (a program
/// that never makes one keeps Abseil's default). docs/design/etcd.md says so.
void abseil_release_mode() {
    static const bool once = [] {
        absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
        return true;
    }();
    (void)once;
}

} // namespace

// Not destroyed, and its thread not joined: a backend's calls may still complete after it is
// gone (their answers are then dropped by the closed delivery), and a static destructor would
// race the thread at exit. One thread waits without a deadline, so an idle client's gRPC
// wakes only for its own timers (the callback API's queue polled with a 1 s deadline and a
// 100 ms sleep on each of two threads: docs/design/etcd.md).
grpc::CompletionQueue& completion_queue() {
    static grpc::CompletionQueue* const q = [] {
        auto* cq = new grpc::CompletionQueue; // reachable from this static: no leak report
        std::thread([cq] {
            void* tag = nullptr;
            bool ok = false;
            while (cq->Next(&tag, &ok))
                static_cast<completion*>(tag)->completed(ok);
        }).detach();
        return cq;
    }();
    return *q;
}

std::error_code to_error(const grpc::Status& s) {
    using grpc::StatusCode;
    switch (s.error_code()) {
    case StatusCode::OK:
        return {};
    case StatusCode::UNAVAILABLE:
        return make_error_code(tls_refused(s) ? errc::auth_failed : errc::unavailable);
    case StatusCode::DEADLINE_EXCEEDED:
        return make_error_code(errc::unavailable);
    case StatusCode::UNAUTHENTICATED:
        return make_error_code(errc::auth_failed);
    case StatusCode::PERMISSION_DENIED:
        return make_error_code(errc::permission_denied);
    case StatusCode::INVALID_ARGUMENT:
    case StatusCode::FAILED_PRECONDITION:
        // etcd: "authentication failed, invalid user ID or password", "user name is empty"
        // (auth enabled, no credentials given).
        if (says(s, "authentication failed") || says(s, "user name is empty") ||
            says(s, "invalid auth token"))
            return make_error_code(errc::auth_failed);
        return make_error_code(s.error_code() == StatusCode::INVALID_ARGUMENT
                                   ? errc::invalid_argument
                                   : errc::server_error);
    case StatusCode::UNIMPLEMENTED:
        return make_error_code(errc::unsupported);
    case StatusCode::CANCELLED:
        return make_error_code(errc::cancelled);
    case StatusCode::RESOURCE_EXHAUSTED:
        return make_error_code(errc::server_busy);
    default:
        return make_error_code(errc::server_error);
    }
}

bool transient(const grpc::Status& s) {
    return (s.error_code() == grpc::StatusCode::UNAVAILABLE && !tls_refused(s)) ||
           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

rpc::rpc(const etcd_url& url, asio::any_io_executor ex, std::error_code& ec, std::string& why)
    : url_(url)
    , d_(std::make_shared<delivery>(ex))
    , hub_(std::make_shared<watch_hub>(*this, ex)) {
    ec.clear();
    abseil_release_mode();
    const auto target = channel_target(url_);
    if (target.empty()) {
        ec = errc::unavailable;
        why = "no endpoint of " + url_.display() + " resolves to an address";
        return;
    }
    grpc::ChannelArguments args;
    args.SetLoadBalancingPolicyName("round_robin");
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Dead or frozen connections are found by HTTP/2 pings while a call is open, within 6 + 2 s
    // (etcd answers pings more often than every 5 s with GOAWAY, and pings without calls unless
    // told to allow them). The lease's own stream gives up a silent member sooner (session.hpp).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 6000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
    args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (url_.tls) {
        grpc::SslCredentialsOptions o;
        const auto load = [&](const std::string& path, std::string& into) {
            if (path.empty() || read_file(path, into)) return true;
            ec = errc::configuration_error;
            why = "cannot read " + path + " (etcds:// URL parameter)";
            return false;
        };
        if (!load(url_.cacert, o.pem_root_certs) || !load(url_.cert, o.pem_cert_chain) ||
            !load(url_.key, o.pem_private_key))
            return;
        creds = grpc::SslCredentials(o);
        // The addresses are resolved here: the certificate is checked against the URL's name.
        args.SetSslTargetNameOverride(bare_host(url_.endpoints.front().name));
    } else {
        creds = grpc::InsecureChannelCredentials();
    }
    channel_ = grpc::CreateCustomChannel(target, creds, args);
    kv_ = pb::KV::NewStub(channel_);
    watch_ = pb::Watch::NewStub(channel_);
    lease_ = pb::Lease::NewStub(channel_);
    auth_ = pb::Auth::NewStub(channel_);
    maintenance_ = pb::Maintenance::NewStub(channel_);
}

rpc::~rpc() {
    close();
}

void rpc::close() {
    d_->close();
    hub_->close();
}

void rpc::prepare(grpc::ClientContext& ctx, bool stream) const {
    if (!token_.empty()) ctx.AddMetadata("token", token_);
    if (stream)
        ctx.AddMetadata("hasleader", "true");
    else
        ctx.set_deadline(std::chrono::system_clock::now() + url_.connect_timeout);
}

void rpc::with_token(std::function<void(grpc::Status)> then) {
    if (url_.user.empty() || !token_.empty()) return then(grpc::Status::OK);
    token_waiters_.push_back(std::move(then));
    if (authenticating_) return;
    authenticating_ = true;
    auto c = std::make_shared<unary_call<pb::AuthenticateRequest, pb::AuthenticateResponse>>();
    c->req.set_name(url_.user);
    c->req.set_password(url_.password);
    c->ctx.set_deadline(std::chrono::system_clock::now() + url_.connect_timeout);
    c->d = d_;
    c->answered = [this, c] {
        authenticating_ = false;
        if (c->status.ok()) token_ = c->resp.token();
        auto waiters = std::move(token_waiters_);
        token_waiters_.clear();
        for (auto& w : waiters)
            w(c->status);
    };
    requests_.fetch_add(1, std::memory_order_relaxed);
    c->reader = auth_->PrepareAsyncAuthenticate(&c->ctx, c->req, &completion_queue());
    c->start();
}

template <class Req, class Resp, class Invoke>
void rpc::unary(Req req, Invoke invoke, done_fn<Resp> done, bool retried) {
    with_token([this, req = std::move(req), invoke, done = std::move(done),
                retried](grpc::Status auth) mutable {
        if (!auth.ok()) return done(std::move(auth), Resp{});
        auto c = std::make_shared<unary_call<Req, Resp>>();
        c->req = std::move(req);
        c->d = d_;
        prepare(c->ctx, false);
        requests_.fetch_add(1, std::memory_order_relaxed);
        // The continuation stays here, on the I/O thread; the completion thread posts only
        // its id (the call's answer is read through the continuation's reference).
        const auto id = ++next_call_;
        answers_.emplace(id, [this, c, invoke, done = std::move(done), retried]() mutable {
            if (!retried && !url_.user.empty() &&
                c->status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
                token_.clear(); // expired: authenticate again, once
                return unary<Req, Resp>(std::move(c->req), invoke, std::move(done), true);
            }
            done(std::move(c->status), std::move(c->resp));
        });
        c->answered = [this, id] { answer(id); };
        c->reader = invoke(&c->ctx, c->req);
        c->start();
    });
}

void rpc::answer(std::uint64_t id) {
    const auto it = answers_.find(id);
    if (it == answers_.end()) return;
    auto f = std::move(it->second);
    answers_.erase(it);
    f();
}

// One line per method: the stub's call on the completion queue.
#define DLOCK_ETCD_UNARY(fn, stub, method, Req, Resp)                                              \
    void rpc::fn(pb::Req r, done_fn<pb::Resp> done) {                                              \
        unary<pb::Req, pb::Resp>(                                                                  \
            std::move(r),                                                                          \
            [this](grpc::ClientContext* c, const pb::Req& q) {                                     \
                return (stub)->PrepareAsync##method(c, q, &completion_queue());                    \
            },                                                                                     \
            std::move(done));                                                                      \
    }

DLOCK_ETCD_UNARY(range, kv_, Range, RangeRequest, RangeResponse)
DLOCK_ETCD_UNARY(txn, kv_, Txn, TxnRequest, TxnResponse)
DLOCK_ETCD_UNARY(delete_range, kv_, DeleteRange, DeleteRangeRequest, DeleteRangeResponse)
DLOCK_ETCD_UNARY(lease_grant, lease_, LeaseGrant, LeaseGrantRequest, LeaseGrantResponse)
DLOCK_ETCD_UNARY(lease_revoke, lease_, LeaseRevoke, LeaseRevokeRequest, LeaseRevokeResponse)
DLOCK_ETCD_UNARY(lease_ttl, lease_, LeaseTimeToLive, LeaseTimeToLiveRequest,
                 LeaseTimeToLiveResponse)
DLOCK_ETCD_UNARY(status, maintenance_, Status, StatusRequest, StatusResponse)
#undef DLOCK_ETCD_UNARY

template <class S, class Open>
void rpc::open_stream(typename S::read_fn on_read, typename S::end_fn on_end, Open open,
                      std::function<void(std::shared_ptr<S>)> opened) {
    with_token([this, on_read = std::move(on_read), on_end = std::move(on_end), open,
                opened = std::move(opened)](grpc::Status auth) mutable {
        if (!auth.ok()) {
            on_end(std::move(auth));
            return opened(nullptr);
        }
        auto s = std::make_shared<S>(d_, std::move(on_read), std::move(on_end));
        prepare(s->context(), true);
        requests_.fetch_add(1, std::memory_order_relaxed);
        s->begin(s, open(&s->context()));
        opened(std::move(s));
    });
}

void rpc::open_watch(watch_stream::read_fn on_read, watch_stream::end_fn on_end,
                     std::function<void(std::shared_ptr<watch_stream>)> opened) {
    open_stream<watch_stream>(
        std::move(on_read), std::move(on_end),
        [this](grpc::ClientContext* c) {
            return watch_->PrepareAsyncWatch(c, &completion_queue());
        },
        std::move(opened));
}

void rpc::open_keepalive(keepalive_stream::read_fn on_read, keepalive_stream::end_fn on_end,
                         std::function<void(std::shared_ptr<keepalive_stream>)> opened) {
    open_stream<keepalive_stream>(
        std::move(on_read), std::move(on_end),
        [this](grpc::ClientContext* c) {
            return lease_->PrepareAsyncLeaseKeepAlive(c, &completion_queue());
        },
        std::move(opened));
}

} // namespace dlock::detail::etcd
