#include "etcd/rpc.hpp"

#include "etcd/watch_hub.hpp"

#include <dlock/error.hpp>

#include <absl/synchronization/mutex.h>
#include <arpa/inet.h>
#include <cstdlib>
#include <fstream>
#include <netdb.h>
#include <sstream>

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
                a4 = std::string(buf) + ":" + std::to_string(e.port);
            if (r->ai_family == AF_INET6 && a6.empty() &&
                ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(r->ai_addr)->sin6_addr,
                            buf, sizeof buf))
                a6 = "[" + std::string(buf) + "]:" + std::to_string(e.port);
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

/// gRPC 1.51 (Debian 12) runs callback-API completions on one shared "alternative" completion
/// queue whose threads start at its first reference (a channel's first callback call) and stop
/// at its last release (that channel's destruction). When the last release runs on one of those
/// threads (a completion dropped the last reference to a backend, and so to its channel), the
/// queue is deleted under its own running thread and the process aborts (`ref_counted.h: prior
/// > 0`; grpc/grpc#32584 describes the self-join). A channel that never connects and is never
/// destroyed, after one callback call, holds a reference for the process's life: the queue and
/// its two threads stay, and no release can be the last.
void pin_callback_queue() {
    static const bool pinned = [] {
        // Leaked on purpose (reachable from these statics: not a leak to LeakSanitizer).
        static auto* const channel = new std::shared_ptr<grpc::Channel>(
            grpc::CreateChannel("unix:/nonexistent/dlock-pin", grpc::InsecureChannelCredentials()));
        static auto* const stub = pb::KV::NewStub(*channel).release();
        struct call {
            grpc::ClientContext ctx;
            pb::RangeRequest req;
            pb::RangeResponse resp;
        };
        auto* c = new call;
        c->ctx.set_deadline(std::chrono::system_clock::now()); // fails at once, never sent
        stub->async()->Range(&c->ctx, &c->req, &c->resp, [c](const grpc::Status&) { delete c; });
        return true;
    }();
    (void)pinned;
}

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
    pin_callback_queue();
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
    struct call {
        grpc::ClientContext ctx;
        pb::AuthenticateRequest req;
        pb::AuthenticateResponse resp;
    };
    auto c = std::make_shared<call>();
    c->req.set_name(url_.user);
    c->req.set_password(url_.password);
    c->ctx.set_deadline(std::chrono::system_clock::now() + url_.connect_timeout);
    requests_.fetch_add(1, std::memory_order_relaxed);
    auth_->async()->Authenticate(&c->ctx, &c->req, &c->resp, [this, c, d = d_](grpc::Status s) {
        d->post([this, c, s] {
            authenticating_ = false;
            if (s.ok()) token_ = c->resp.token();
            auto waiters = std::move(token_waiters_);
            token_waiters_.clear();
            for (auto& w : waiters)
                w(s);
        });
    });
}

template <class Req, class Resp, class Invoke>
void rpc::unary(Req req, Invoke invoke, done_fn<Resp> done, bool retried) {
    with_token([this, req = std::move(req), invoke, done = std::move(done),
                retried](grpc::Status auth) mutable {
        if (!auth.ok()) return done(std::move(auth), Resp{});
        struct call {
            grpc::ClientContext ctx;
            Req req;
            Resp resp;
        };
        auto c = std::make_shared<call>();
        c->req = std::move(req);
        prepare(c->ctx, false);
        requests_.fetch_add(1, std::memory_order_relaxed);
        // The continuation stays here, on the I/O thread; gRPC's thread gets only its id.
        const auto id = ++next_call_;
        answers_.emplace(
            id, [this, c, invoke, done = std::move(done), retried](grpc::Status s) mutable {
                if (!retried && !url_.user.empty() &&
                    s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
                    token_.clear(); // expired: authenticate again, once
                    return unary<Req, Resp>(std::move(c->req), invoke, std::move(done), true);
                }
                done(std::move(s), std::move(c->resp));
            });
        invoke(&c->ctx, &c->req, &c->resp, [this, c, id, d = d_](grpc::Status s) {
            d->post([this, id, s = std::move(s)]() mutable { answer(id, std::move(s)); });
        });
    });
}

void rpc::answer(std::uint64_t id, grpc::Status s) {
    const auto it = answers_.find(id);
    if (it == answers_.end()) return;
    auto f = std::move(it->second);
    answers_.erase(it);
    f(std::move(s));
}

// One line per method: the stub's callback-API call.
#define DLOCK_ETCD_UNARY(fn, stub, method, Req, Resp)                                              \
    void rpc::fn(pb::Req r, done_fn<pb::Resp> done) {                                              \
        unary<pb::Req, pb::Resp>(                                                                  \
            std::move(r),                                                                          \
            [this](grpc::ClientContext* c, const pb::Req* q, pb::Resp* a,                          \
                   std::function<void(grpc::Status)> f) {                                          \
                (stub)->async()->method(c, q, a, std::move(f));                                    \
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
        open(&s->context(), s.get());
        s->begin(s);
        opened(std::move(s));
    });
}

void rpc::open_watch(watch_stream::read_fn on_read, watch_stream::end_fn on_end,
                     std::function<void(std::shared_ptr<watch_stream>)> opened) {
    open_stream<watch_stream>(
        std::move(on_read), std::move(on_end),
        [this](grpc::ClientContext* c, watch_stream* s) { watch_->async()->Watch(c, s); },
        std::move(opened));
}

void rpc::open_keepalive(keepalive_stream::read_fn on_read, keepalive_stream::end_fn on_end,
                         std::function<void(std::shared_ptr<keepalive_stream>)> opened) {
    open_stream<keepalive_stream>(
        std::move(on_read), std::move(on_end),
        [this](grpc::ClientContext* c, keepalive_stream* s) {
            lease_->async()->LeaseKeepAlive(c, s);
        },
        std::move(opened));
}

} // namespace dlock::detail::etcd
