// net::connection: construction, stop, the submit paths (queued, direct write, groups) and the
// byte stream (the handshake's batch, reads, writes); the rest in connect, dispatch, reconnect.cpp.
#include "redis/net/connection.hpp"

#include "redis/net/failure.hpp"
#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <asio/buffer.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>

#include <cerrno>
#include <sys/socket.h>

namespace dlock::net {
namespace {

constexpr std::size_t read_chunk = 16 * 1024;
/// While processing one read chunk, flush what its completions queued after this many replies.
constexpr std::size_t early_flush_replies = 8;

} // namespace

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
    r.asking_refused = false;
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
            sent_since_tick_ = true;
            // The deadline tick sleeps until the idle check: bring the short one back (the
            // queued path's flush() does it on the I/O thread).
            if (std::exchange(tick_long_, false))
                asio::post(io_, [self = shared_from_this()] { self->rearm_tick(); });
            return;
        } else {
            sent_since_tick_ = true;
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

// ---- the handshake's batch -------------------------------------------------------------

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
    bool wake_tick = false;
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
        sent_since_tick_ = true;
        wake_tick = std::exchange(tick_long_, false);
    }
    if (wake_tick) arm_deadline_tick();
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
