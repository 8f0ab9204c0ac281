#include "redis/net/connection.hpp"

#include "core/log.hpp"
#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>

namespace dlock::net {
namespace {

constexpr std::size_t read_chunk = 16 * 1024;
/// While processing one read chunk, flush what its completions queued after this many replies.
constexpr std::size_t early_flush_replies = 8;

std::error_code map_transport_error(const std::error_code& ec) {
    if (ec.category() == error_category()) return ec;
    if (ec == asio::error::operation_aborted) return make_error_code(errc::cancelled);
    return make_error_code(errc::unavailable);
}

/// host:port or the socket path, for log fields (never user or password).
std::string address_of(const target& t) {
    return t.unix_socket.empty() ? t.host + ':' + std::to_string(t.port) : t.unix_socket;
}

/// Server text as it goes into last_failure(): at most max_failure_text bytes, one line.
std::string bounded_text(std::string_view text) {
    std::string s(text.substr(0, max_failure_text));
    for (char& ch : s)
        if (ch == '\r' || ch == '\n') ch = ' ';
    if (text.size() > max_failure_text) s += "...";
    return s;
}

/// `text` with every occurrence of `secret` replaced by "***" (a server that does not know
/// HELLO, Redis 5, echoes its arguments, the password among them).
std::string redacted(std::string_view text, std::string_view secret) {
    std::string s(text);
    if (secret.empty()) return s;
    for (auto at = s.find(secret); at != std::string::npos; at = s.find(secret, at + 3))
        s.replace(at, secret.size(), "***");
    return s;
}

} // namespace

bool connect_failure_is_definite(const std::error_code& transport_ec) noexcept {
    return transport_ec == asio::error::connection_refused ||
           transport_ec == asio::error::host_not_found || transport_ec == asio::error::no_data ||
           transport_ec == asio::error::service_not_found ||
           (transport_ec.category() == asio::error::get_system_category() &&
            transport_ec.value() == ENOENT); // Asio's system category maps to no std::errc
}

std::string connection::last_failure() const {
    std::lock_guard lk(mu_);
    return last_failure_;
}

void connection::note_error_reply(std::string_view text) {
    note_failure(address() + ": " + bounded_text(text));
}

void connection::note_failure(std::string text) {
    std::lock_guard lk(mu_);
    last_failure_ = std::move(text);
}

std::string connection::address() const {
    if (!target_.unix_socket.empty()) return "unix:" + target_.unix_socket;
    const bool v6 = target_.host.find(':') != std::string::npos;
    return (v6 ? "[" + target_.host + "]" : target_.host) + ":" + std::to_string(target_.port);
}

void connection::fail_connect(const std::error_code& transport_ec, std::string_view what) {
    note_failure(std::string(what) + " " + address() + ": " + transport_ec.message());
    fail_connection(map_transport_error(transport_ec));
    // Nothing was written on this connection: failing what is queued is a certain outcome.
    // One-way commands (a subscriber's SUBSCRIBE) stay queued for the next connection. With a
    // target source (Sentinel) a refused master is no answer: fail_connection() made it
    // resolve again, and the queued requests wait for the master it finds.
    if (!source_ && connect_failure_is_definite(transport_ec))
        expire_pending(std::chrono::steady_clock::time_point::max(),
                       make_error_code(errc::unavailable));
}

connection::connection(asio::io_context& io, client_options opts, target where, mode m,
                       std::shared_ptr<target_source> source)
    : io_(io)
    , opts_(std::move(opts))
    , target_(std::move(where))
    , mode_(m)
    , source_(std::move(source))
    , resolver_(io)
    , connect_timer_(io)
    , backoff_timer_(io)
    , deadline_timer_(io)
    , rng_(std::random_device{}())
    , backoff_(opts_.reconnect_min)
    , parser_(opts_.limits) {
    if (opts_.tls.enabled) {
        ssl_ctx_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
        ssl_ctx_->set_options(asio::ssl::context::default_workarounds |
                              asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                              asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        ssl_ctx_->set_verify_mode(asio::ssl::verify_peer);
        if (opts_.tls.ca_file.empty())
            ssl_ctx_->set_default_verify_paths();
        else
            ssl_ctx_->load_verify_file(opts_.tls.ca_file);
        if (!opts_.tls.cert_file.empty()) {
            ssl_ctx_->use_certificate_chain_file(opts_.tls.cert_file);
            ssl_ctx_->use_private_key_file(opts_.tls.key_file, asio::ssl::context::pem);
        }
    }
}

connection::~connection() = default;

void connection::start() {
    asio::post(io_, [self = shared_from_this()] { self->do_connect(); });
}

void connection::stop() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
        stopped_ = true;
    }
    asio::post(io_, [self = shared_from_this()] {
        self->generation_++;
        self->resolver_.cancel();
        self->connect_timer_.cancel();
        self->backoff_timer_.cancel();
        self->deadline_timer_.cancel();
        const auto ec = make_error_code(errc::cancelled);
        std::deque<detail::request*> inflight;
        {
            std::lock_guard lk(self->mu_);
            inflight.swap(self->inflight_);
            self->fd_ = -1; // before closing: no caller may send() on a closed or reused fd
        }
        self->close_stream();
        for (auto* r : inflight)
            r->complete(ec, {});
        self->fail_all_pending(ec);
        self->connected_.store(false, std::memory_order_release);
    });
}

void connection::submit(detail::request& r) {
    r.redirects = 0;
    std::error_code fail;
    {
        std::lock_guard lk(mu_);
        if (stopped_)
            fail = make_error_code(errc::cancelled);
        else if (sticky_error_)
            fail = sticky_error_;
        else if (fd_ >= 0 && !writing_ && pending_.empty() &&
                 !io_.get_executor().running_in_this_thread()) {
            counters_.sent(r.args.empty() ? std::string_view{} : r.args.front());
            direct_write_locked(r);
            return;
        } else {
            counters_.sent(r.args.empty() ? std::string_view{} : r.args.front());
            const auto begin = pending_buf_.size();
            resp3::encode_command(pending_buf_, r.args);
            pending_.push_back({&r, begin, pending_buf_.size()});
            schedule_flush_locked();
            return;
        }
    }
    r.complete(fail, {});
}

void connection::submit_group(std::span<detail::request* const> reqs) {
    std::error_code fail;
    {
        std::lock_guard lk(mu_);
        if (stopped_)
            fail = make_error_code(errc::cancelled);
        else if (sticky_error_)
            fail = sticky_error_;
        if (!fail) {
            for (auto* r : reqs) {
                counters_.sent(r->args.empty() ? std::string_view{} : r->args.front());
                const auto begin = pending_buf_.size();
                resp3::encode_command(pending_buf_, r->args);
                pending_.push_back({r, begin, pending_buf_.size()});
            }
            schedule_flush_locked();
            return;
        }
    }
    for (auto* r : reqs)
        r->complete(fail, {});
}

void connection::submit_oneway(std::span<const std::string_view> args) {
    std::lock_guard lk(mu_);
    if (stopped_) return;
    counters_.sent(args.empty() ? std::string_view{} : args.front());
    const auto begin = pending_buf_.size();
    resp3::encode_command(pending_buf_, args);
    pending_.push_back({nullptr, begin, pending_buf_.size()});
    schedule_flush_locked();
}

void connection::direct_write_locked(detail::request& r) {
    // The connection is idle (no write in flight, nothing queued): write from the calling
    // thread with one non-blocking send(), saving the hop to the I/O thread. Whatever the
    // kernel does not take is queued (as bytes without a reply slot) ahead of anything else.
    direct_buf_.clear();
    resp3::encode_command(direct_buf_, r.args);
    const ssize_t n =
        ::send(fd_, direct_buf_.data(), direct_buf_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        // Nothing was written: queue normally; the I/O thread will see the broken socket.
        const auto begin = pending_buf_.size();
        pending_buf_.append(direct_buf_);
        pending_.push_back({&r, begin, pending_buf_.size()});
        schedule_flush_locked();
        return;
    }
    inflight_.push_back(&r);
    const auto written = n < 0 ? std::size_t{0} : static_cast<std::size_t>(n);
    if (written == direct_buf_.size()) return;
    pending_buf_.assign(direct_buf_, written);
    pending_.push_back({nullptr, 0, pending_buf_.size()});
    schedule_flush_locked();
}

void connection::schedule_flush_locked() {
    if (flush_scheduled_ || !ready_ || writing_) return;
    flush_scheduled_ = true;
    asio::post(io_, [self = shared_from_this()] { self->flush(); });
}

// ---- connect and handshake -------------------------------------------------------------

void connection::do_connect() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
    }
    const auto gen = ++generation_;
    connect_timer_.expires_after(opts_.connect_timeout);
    connect_timer_.async_wait([this, self = shared_from_this(), gen](std::error_code ec) {
        if (ec || gen != generation_) return;
        note_failure("connect " + address() + ": no answer within " +
                     std::to_string(opts_.connect_timeout.count()) + " ms");
        fail_connection(make_error_code(errc::unavailable));
    });

    if (!source_) return connect_to_target(gen);
    source_->resolve([this, self = shared_from_this(), gen](std::error_code ec, target t) {
        if (gen != generation_) return;
        if (ec) return fail_connection(ec);
        target_ = std::move(t);
        connect_to_target(gen);
    });
}

void connection::connect_to_target(std::uint64_t gen) {
    if (!target_.unix_socket.empty()) {
        auto& sock = stream_.emplace<asio::local::stream_protocol::socket>(io_);
        sock.async_connect(asio::local::stream_protocol::endpoint(target_.unix_socket),
                           [this, self = shared_from_this(), gen](std::error_code ec) {
                               if (gen != generation_) return;
                               if (ec) return fail_connect(ec, "connect");
                               on_transport_ready();
                           });
        return;
    }
    resolver_.async_resolve(
        target_.host, std::to_string(target_.port),
        [this, self = shared_from_this(), gen](std::error_code ec, tcp::resolver::results_type rs) {
            if (gen != generation_) return;
            if (ec) return fail_connect(ec, "resolve");
            tcp::socket* sock = nullptr;
            if (ssl_ctx_) {
                auto& tls = stream_.emplace<std::unique_ptr<tls_stream>>(
                    std::make_unique<tls_stream>(io_, *ssl_ctx_));
                sock = &tls->next_layer();
            } else {
                sock = &stream_.emplace<tcp::socket>(io_);
            }
            asio::async_connect(
                *sock, rs, [this, self, gen](std::error_code ec2, const tcp::endpoint&) {
                    if (gen != generation_) return;
                    if (ec2) return fail_connect(ec2, "connect");
                    if (auto* s = std::get_if<tcp::socket>(&stream_))
                        s->set_option(tcp::no_delay(true));
                    else
                        std::get<std::unique_ptr<tls_stream>>(stream_)->next_layer().set_option(
                            tcp::no_delay(true));
                    on_transport_ready();
                });
        });
}

void connection::on_transport_ready() {
    auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_);
    if (!tls) return handshake();
    const std::string& name = opts_.tls.server_name.empty() ? target_.host : opts_.tls.server_name;
    // SNI only for host names; verification for both names and IP addresses.
    std::error_code addr_ec;
    (void)asio::ip::make_address(name, addr_ec);
    if (addr_ec) SSL_set_tlsext_host_name((*tls)->native_handle(), name.c_str());
    (*tls)->set_verify_callback(asio::ssl::host_name_verification(name));
    const auto gen = generation_;
    (*tls)->async_handshake(asio::ssl::stream_base::client, [this, self = shared_from_this(),
                                                             gen](std::error_code ec) {
        if (gen != generation_) return;
        if (ec) {
            // A certificate that fails verification is an auth failure:
            // retrying will not fix it, and we never fall back.
            const bool verify = ec.category() == asio::error::get_ssl_category();
            std::string why = ec.message();
            // OpenSSL's reason says which check failed ("certificate has expired").
            auto* t = std::get_if<std::unique_ptr<tls_stream>>(&stream_);
            const long result = t ? SSL_get_verify_result((*t)->native_handle()) : X509_V_OK;
            if (verify && result != X509_V_OK)
                why += std::string(" (") + X509_verify_cert_error_string(result) + ")";
            note_failure("TLS handshake with " + address() + ": " + why);
            return fail_connection(make_error_code(verify ? errc::auth_failed : errc::unavailable));
        }
        handshake();
    });
}

std::size_t encode_handshake(std::string& out, const client_options& o) {
    std::vector<std::string_view> hello{"HELLO", "3"};
    if (!o.password.empty()) {
        hello.push_back("AUTH");
        hello.push_back(o.username.empty() ? std::string_view("default") : o.username);
        hello.push_back(o.password);
    }
    if (!o.client_name.empty()) {
        hello.push_back("SETNAME");
        hello.push_back(o.client_name);
    }
    resp3::encode_command(out, hello);
    if (o.db == 0) return 1;
    const std::string db = std::to_string(o.db);
    resp3::encode_command(out, {"SELECT", db});
    return 2;
}

void connection::handshake() {
    // HELLO 3 [AUTH user pass] [SETNAME name]; SELECT db. Written as one batch; user commands
    // wait until every handshake reply was checked (a failed AUTH must never be followed by
    // commands that would run as the default user).
    write_buf_.clear();
    handshake_replies_ = encode_handshake(write_buf_, opts_);
    role_pending_ = source_ != nullptr && source_->master_only();
    if (role_pending_) {
        resp3::encode_command(write_buf_, {"ROLE"});
        ++handshake_replies_;
    }
    handshaking_ = true;
    handshake_error_.clear();
    handshake_text_.clear();
    read_buf_.clear();
    read_pos_ = 0;
    parser_.reset();
    {
        std::lock_guard lk(mu_);
        writing_ = true;
    }
    const auto gen = generation_;
    async_write_bytes([this, self = shared_from_this(), gen](std::error_code ec, std::size_t) {
        if (gen != generation_) return;
        on_written(ec); // the handshake replies may already have made the connection ready
    });
    start_read();
}

void connection::dispatch_reply(resp3::value&& v) {
    if (handshaking_) {
        if (v.kind == resp3::type::push) return;
        if (!handshake_error_) {
            handshake_error_ = handshake_error(v);
            if (handshake_error_) handshake_text_ = bounded_text(redacted(v.str, opts_.password));
            // A server that is not the master (a demoted one, a replica the sentinels still
            // name): not ours; resolve again.
            if (!handshake_error_ && role_pending_ && handshake_replies_ == 1 && !role_is_master(v))
                handshake_error_ = make_error_code(errc::readonly);
        }
        if (--handshake_replies_ != 0) return;
        handshaking_ = false;
        if (handshake_error_) {
            const auto ec = handshake_error_;
            if (!handshake_text_.empty())
                note_failure("handshake with " + address() + ": " + handshake_text_);
            {
                std::lock_guard lk(mu_);
                if (ec == errc::auth_failed || ec == errc::permission_denied) sticky_error_ = ec;
            }
            return fail_connection(ec);
        }
        connect_timer_.cancel();
        backoff_ = opts_.reconnect_min;
        connected_.store(true, std::memory_order_release);
        bool again = false;
        {
            std::lock_guard lk(mu_);
            sticky_error_.clear();
            last_failure_.clear();
            ready_ = true;
            again = ++epoch_ > 1;
            fd_ = plain_fd();
            record_peer_locked();
            if (!pending_.empty()) schedule_flush_locked();
        }
        last_read_ = std::chrono::steady_clock::now();
        detail::wire_counters::bump(again ? counters_.reconnects : counters_.connects);
        if (again)
            detail::log(opts_.log, log_level::warning, "reconnected to redis",
                        {{"address", address_of(target_)},
                         {"connection", mode_ == mode::pubsub ? "pubsub" : "command"}});
        arm_deadline_tick();
        if (on_state_) on_state_(true);
        return;
    }
    if (mode_ == mode::pubsub || v.kind == resp3::type::push) {
        if (on_push_) on_push_(v);
        return;
    }
    detail::request* r = nullptr;
    bool redirect = false;
    {
        std::lock_guard lk(mu_);
        if (!inflight_.empty()) {
            r = inflight_.front();
            inflight_.pop_front();
            if (on_redirect_ && cluster_redirect(v)) {
                redirect = true; // handed to the Cluster router below, outside the lock
            } else if (source_ && topology_error(v)) {
                // Not carried out here: send it again, to the master we move to.
                requeue_front_locked(*r);
                draining_ = true;
                ready_ = false; // nothing more is written to this server
                fd_ = -1;
                if (!inflight_.empty()) return;
                r = nullptr;
            } else if (needs_eval(v, r->eval_fallback)) {
                // Re-send as EVAL, queued behind whatever is pending. Only this request's own
                // outcome depends on it, so ordering among callers is unaffected.
                detail::wire_counters::bump(counters_.noscript);
                counters_.sent("EVAL");
                const auto begin = pending_buf_.size();
                encode_as_eval(pending_buf_, r->args, r->eval_fallback);
                r->eval_fallback = {};
                pending_.push_back({r, begin, pending_buf_.size()});
                schedule_flush_locked();
                return;
            }
        }
    }
    if (draining_ && !r) return finish_drain();
    if (r && v.is_error()) note_error_reply(v.str);
    if (!r) {
        // A reply nobody asked for: the stream is desynchronised. Never attribute it.
        return fail_connection(make_error_code(errc::protocol_error));
    }
    if (!redirect || !on_redirect_(*r, v)) r->complete({}, std::move(v));
    if (draining_) {
        bool empty = false;
        {
            std::lock_guard lk(mu_);
            empty = inflight_.empty();
        }
        if (empty) finish_drain();
    }
}

// ---- following the master (target source) -------------------------------------------------

void connection::retarget() {
    if (!source_) return;
    asio::post(io_, [self = shared_from_this()] {
        if (!self->connected() || self->draining_) return;
        self->source_->resolve([self, epoch = self->generation_](std::error_code ec, target t) {
            if (ec || epoch != self->generation_ || self->draining_) return;
            if (t.host == self->target_.host && t.port == self->target_.port) return;
            self->begin_drain();
        });
    });
}

void connection::begin_drain() {
    bool empty = false;
    {
        std::lock_guard lk(mu_);
        draining_ = true;
        ready_ = false;
        fd_ = -1;
        empty = inflight_.empty();
    }
    if (empty) finish_drain();
}

void connection::finish_drain() {
    fail_connection(make_error_code(errc::readonly)); // nothing in flight: nothing ambiguous
}

void connection::requeue_front_locked(detail::request& r) {
    // In order behind the requests requeued before it, ahead of everything submitted since.
    std::string bytes;
    resp3::encode_command(bytes, r.args);
    const std::size_t at = std::min(requeued_, pending_.size());
    const std::size_t byte = at == 0 ? 0 : pending_[at - 1].end;
    pending_buf_.insert(byte, bytes);
    for (auto i = at; i < pending_.size(); ++i) {
        pending_[i].begin += bytes.size();
        pending_[i].end += bytes.size();
    }
    pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at),
                    pending_entry{&r, byte, byte + bytes.size()});
    ++requeued_;
}

// ---- reading -----------------------------------------------------------------------------

void connection::start_read() {
    drop_parsed(read_buf_, read_pos_, read_chunk + 1);
    const auto old = read_buf_.size();
    read_buf_.resize(old + read_chunk);
    const auto gen = generation_;
    async_read_some_bytes(
        [this, self = shared_from_this(), gen, old](std::error_code ec, std::size_t n) {
            if (gen != generation_) return;
            read_buf_.resize(old + (ec ? 0 : n));
            on_read(ec, n);
        });
}

void connection::on_read(std::error_code ec, std::size_t) {
    if (ec) {
        if (ec != asio::error::operation_aborted)
            note_failure("read from " + address() + ": " + ec.message());
        return fail_connection(map_transport_error(ec));
    }
    last_read_ = std::chrono::steady_clock::now();
    const auto gen = generation_;
    std::size_t since_flush = 0;
    for (;;) {
        std::size_t used = 0;
        std::error_code pec;
        auto v = parser_.consume(std::string_view(read_buf_).substr(read_pos_), used, pec);
        read_pos_ += used;
        if (pec) return fail_connection(pec);
        if (!v) break;
        dispatch_reply(std::move(*v));
        if (gen != generation_) return; // the reply handler failed the connection
        // Overlap with the server: commands that completion handlers issued while this chunk
        // is being processed go out every early_flush_replies replies, so the server works on
        // them while we parse the rest, instead of both sides taking turns per whole batch.
        if (++since_flush == early_flush_replies) {
            since_flush = 0;
            flush();
        }
    }
    start_read();
}

// ---- writing -----------------------------------------------------------------------------

void connection::flush() {
    {
        std::lock_guard lk(mu_);
        flush_scheduled_ = false;
        // A write in progress continues from on_written(); the handshake from its last reply.
        if (writing_ || handshaking_ || !ready_ || pending_.empty()) return;
        writing_ = true;
        write_buf_.clear();
        write_buf_.swap(pending_buf_);
        for (auto& e : pending_)
            if (e.req) inflight_.push_back(e.req);
        pending_.clear();
    }
    const auto gen = generation_;
    async_write_bytes([this, self = shared_from_this(), gen](std::error_code ec, std::size_t) {
        if (gen != generation_) return;
        on_written(ec);
    });
}

void connection::on_written(std::error_code ec) {
    {
        std::lock_guard lk(mu_);
        writing_ = false;
    }
    if (ec) return fail_connection(map_transport_error(ec));
    // Everything submitted while this write was in flight goes out as the next batch.
    flush();
}

// ---- timeouts and failure ----------------------------------------------------------------

void connection::arm_deadline_tick() {
    // While connected, a coarse periodic check (a tenth of the command timeout, 5-100 ms)
    // finds the oldest in-flight request past its deadline. A per-request timer would need a
    // hop to this thread for every command written directly by a caller.
    const auto period = std::clamp(opts_.command_timeout / 10, std::chrono::milliseconds(5),
                                   std::chrono::milliseconds(100));
    deadline_timer_.expires_after(period);
    const auto gen = generation_;
    deadline_timer_.async_wait([this, self = shared_from_this(), gen](std::error_code ec) {
        if (ec || gen != generation_) return;
        bool expired = false;
        {
            std::lock_guard lk(mu_);
            expired = !inflight_.empty() &&
                      inflight_.front()->deadline <= std::chrono::steady_clock::now();
        }
        // No reply in time: outcome unknown, and the stream can no longer be trusted to line
        // up replies with requests.
        if (expired) return fail_connection(make_error_code(errc::ambiguous));
        if (!check_idle()) return;
        arm_deadline_tick();
    });
}

bool connection::check_idle() {
    // Health check of an idle connection: after idle_timeout without a byte from the server,
    // send a PING. On a command connection its deadline is the command timeout (a dead peer
    // then surfaces as errc::ambiguous and a reconnect); a subscriber connection, whose replies
    // all travel as pushes, is dropped when nothing arrived for two idle periods plus the
    // command timeout. Returns false when the connection was failed.
    if (opts_.idle_timeout.count() <= 0) return true;
    const auto now = std::chrono::steady_clock::now();
    const auto quiet = now - last_read_;
    if (mode_ == mode::pubsub) {
        if (quiet > 2 * opts_.idle_timeout + opts_.command_timeout) {
            fail_connection(make_error_code(errc::unavailable));
            return false;
        }
        if (quiet > opts_.idle_timeout && now - last_ping_ > opts_.idle_timeout) {
            last_ping_ = now;
            const std::string_view ping[] = {"PING"};
            submit_oneway(ping);
        }
        return true;
    }
    if (quiet > opts_.idle_timeout && !ping_.busy) {
        ping_.busy = true;
        ping_.args = ping_.cmd;
        ping_.deadline = now + opts_.command_timeout;
        submit(ping_);
    }
    return true;
}

bool connection::idle(std::uint64_t& epoch) {
    std::lock_guard lk(mu_);
    epoch = epoch_;
    return ready_ && !stopped_ && !writing_ && pending_.empty() && inflight_.empty();
}

bool connection::peer_address(sockaddr_storage& addr, socklen_t& len, std::uint64_t& epoch) {
    std::lock_guard lk(mu_);
    if (!ready_ || peer_len_ == 0) return false;
    addr = peer_;
    len = peer_len_;
    epoch = epoch_;
    return true;
}

void connection::record_peer_locked() {
    peer_len_ = 0;
    std::error_code ec;
    if (auto* s = std::get_if<tcp::socket>(&stream_)) {
        const auto ep = s->remote_endpoint(ec);
        if (ec || ep.size() > sizeof peer_) return;
        std::memcpy(&peer_, ep.data(), ep.size());
        peer_len_ = static_cast<socklen_t>(ep.size());
    } else if (std::holds_alternative<asio::local::stream_protocol::socket>(stream_)) {
        const asio::local::stream_protocol::endpoint ep(target_.unix_socket);
        if (ep.size() > sizeof peer_) return;
        std::memcpy(&peer_, ep.data(), ep.size());
        peer_len_ = static_cast<socklen_t>(ep.size());
    }
}

int connection::plain_fd() {
    // Only plain sockets may be written from caller threads; a TLS stream's state is not.
    if (auto* s = std::get_if<tcp::socket>(&stream_)) return s->native_handle();
    if (auto* u = std::get_if<asio::local::stream_protocol::socket>(&stream_))
        return u->native_handle();
    return -1;
}

void connection::close_stream() {
    std::error_code ignore;
    if (auto* s = std::get_if<tcp::socket>(&stream_))
        s->close(ignore);
    else if (auto* u = std::get_if<asio::local::stream_protocol::socket>(&stream_))
        u->close(ignore);
    else if (auto* t = std::get_if<std::unique_ptr<tls_stream>>(&stream_))
        (*t)->next_layer().close(ignore);
    // The stream object itself is kept until the next connect replaces it, because aborted
    // handlers may still reference it.
}

void connection::fail_connection(std::error_code why) {
    ++generation_;
    draining_ = false;
    // Whatever went wrong, the next connect asks where the master is (the sentinels usually
    // name the same one; a refused or demoted one they have replaced is then skipped).
    if (source_ && why != errc::cancelled) source_->invalidate(target_);
    connect_timer_.cancel();
    deadline_timer_.cancel();
    {
        std::lock_guard lk(mu_);
        fd_ = -1; // before closing: no caller may send() on a closed or reused fd
    }
    close_stream();
    handshaking_ = false;
    parser_.reset();
    read_buf_.clear();
    read_pos_ = 0;
    const bool was_connected = connected_.exchange(false, std::memory_order_acq_rel);
    std::deque<detail::request*> inflight;
    {
        std::lock_guard lk(mu_);
        ready_ = false;
        flush_scheduled_ = false;
        writing_ = false;
        fd_ = -1;
        peer_len_ = 0;
        requeued_ = 0;
        inflight.swap(inflight_);
        if (mode_ == mode::command) {
            // A command connection queues bytes without a reply slot only for the tail of a
            // partly written direct write: that command went to the old connection (it is
            // in `inflight`, now ambiguous), and its tail must not reach the next one.
            std::string buf;
            std::vector<pending_entry> keep;
            for (auto& e : pending_) {
                if (!e.req) continue;
                const auto begin = buf.size();
                buf.append(pending_buf_, e.begin, e.end - e.begin);
                keep.push_back({e.req, begin, buf.size()});
            }
            pending_buf_.swap(buf);
            pending_.swap(keep);
        }
    }
    // Everything written and unanswered has an unknown outcome.
    detail::wire_counters::bump(counters_.ambiguous, inflight.size());
    if (was_connected)
        detail::log(opts_.log, log_level::warning, "connection to redis lost, reconnecting",
                    {{"address", address_of(target_)},
                     {"connection", mode_ == mode::pubsub ? "pubsub" : "command"},
                     {"error", why.message()}});
    const auto amb = make_error_code(errc::ambiguous);
    for (auto* r : inflight)
        r->complete(amb, {});
    if (why == errc::auth_failed || why == errc::permission_denied ||
        why == errc::configuration_error) {
        fail_all_pending(why);
    }
    if (was_connected && on_state_) on_state_(false);
    schedule_reconnect();
}

void connection::fail_all_pending(std::error_code ec) {
    std::vector<pending_entry> drop;
    {
        std::lock_guard lk(mu_);
        drop.swap(pending_);
        pending_buf_.clear();
    }
    for (auto& e : drop)
        if (e.req) e.req->complete(ec, {});
}

void connection::expire_pending(std::chrono::steady_clock::time_point now, std::error_code ec) {
    std::vector<detail::request*> expired;
    {
        std::lock_guard lk(mu_);
        if (std::none_of(pending_.begin(), pending_.end(),
                         [&](const pending_entry& e) { return e.req && e.req->deadline <= now; }))
            return;
        std::string buf;
        std::vector<pending_entry> keep;
        for (auto& e : pending_) {
            if (e.req && e.req->deadline <= now) {
                expired.push_back(e.req);
                continue;
            }
            const auto begin = buf.size();
            buf.append(pending_buf_, e.begin, e.end - e.begin);
            keep.push_back({e.req, begin, buf.size()});
        }
        pending_buf_.swap(buf);
        pending_.swap(keep);
    }
    for (auto* r : expired)
        r->complete(ec, {});
}

void connection::schedule_reconnect() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
    }
    // Full jitter: uniform in [min, backoff].
    const auto lo = opts_.reconnect_min.count();
    const auto hi = std::max(lo, backoff_.count());
    std::uniform_int_distribution<long long> dist(static_cast<long long>(lo),
                                                  static_cast<long long>(hi));
    const auto delay = std::chrono::milliseconds(dist(rng_));
    backoff_ = std::min(opts_.reconnect_max, backoff_ * 2);

    // Requests queued while we are down expire on their own deadline as errc::unavailable:
    // they were never written, so that outcome is certain.
    expire_pending(std::chrono::steady_clock::now(), make_error_code(errc::unavailable));
    backoff_timer_.expires_after(delay);
    backoff_timer_.async_wait([this, self = shared_from_this()](std::error_code ec) {
        if (ec) return;
        do_connect();
    });
    // While disconnected, wake for the earliest pending deadline so waiting callers get their
    // timeout on time even during a long backoff.
    std::chrono::steady_clock::time_point earliest = std::chrono::steady_clock::time_point::max();
    {
        std::lock_guard lk(mu_);
        for (auto& e : pending_)
            if (e.req) earliest = std::min(earliest, e.req->deadline);
    }
    if (earliest != std::chrono::steady_clock::time_point::max() &&
        earliest < backoff_timer_.expiry()) {
        deadline_timer_.expires_at(earliest);
        deadline_timer_.async_wait([this, self = shared_from_this()](std::error_code ec) {
            if (ec || connected()) return;
            expire_pending(std::chrono::steady_clock::now(), make_error_code(errc::unavailable));
        });
    }
}

// ---- stream dispatch ---------------------------------------------------------------------

template <class Handler>
void connection::async_write_bytes(Handler&& h) {
    std::visit(
        [&](auto& s) {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, std::monostate>) {
                asio::post(io_, [h = std::forward<Handler>(h)]() mutable {
                    h(make_error_code(errc::unavailable), 0);
                });
            } else if constexpr (std::is_same_v<S, std::unique_ptr<tls_stream>>) {
                asio::async_write(*s, asio::buffer(write_buf_), std::forward<Handler>(h));
            } else {
                asio::async_write(s, asio::buffer(write_buf_), std::forward<Handler>(h));
            }
        },
        stream_);
}

template <class Handler>
void connection::async_read_some_bytes(Handler&& h) {
    auto buf = asio::buffer(read_buf_.data() + read_buf_.size() - read_chunk, read_chunk);
    std::visit(
        [&](auto& s) {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, std::monostate>) {
                asio::post(io_, [h = std::forward<Handler>(h)]() mutable {
                    h(make_error_code(errc::unavailable), 0);
                });
            } else if constexpr (std::is_same_v<S, std::unique_ptr<tls_stream>>) {
                s->async_read_some(buf, std::forward<Handler>(h));
            } else {
                s.async_read_some(buf, std::forward<Handler>(h));
            }
        },
        stream_);
}

} // namespace dlock::net
