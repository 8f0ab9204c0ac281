#include "postgres/connection.hpp"

#include "postgres/errors.hpp"
#include "postgres/libpq.hpp"

#include <asio/post.hpp>

#include <charconv>
#include <poll.h>

namespace dlock::detail::pg {
namespace {

std::string trimmed(const char* s) {
    std::string t = s ? s : "";
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\t'))
        t.pop_back();
    for (auto& c : t)
        if (c == '\n' || c == '\t') c = ' ';
    return t;
}

bool readable_now(int fd) noexcept {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

} // namespace

// --- result ---------------------------------------------------------------------------------

result::result(::pg_result* r)
    : r_(r, [](::pg_result* p) { pq().clear(p); }) {}

bool result::ok() const noexcept {
    if (!r_) return false;
    const auto s = pq().result_status(r_.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

bool result::aborted() const noexcept {
    return r_ && pq().result_status(r_.get()) == PGRES_PIPELINE_ABORTED;
}

std::string_view result::sqlstate() const noexcept {
    if (!r_) return {};
    const char* s = pq().result_error_field(r_.get(), PG_DIAG_SQLSTATE);
    return s ? std::string_view(s) : std::string_view{};
}

std::string result::message() const {
    if (!r_) return "no result";
    const char* m = pq().result_error_field(r_.get(), PG_DIAG_MESSAGE_PRIMARY);
    std::string text = m ? m : trimmed(pq().result_error_message(r_.get()));
    // The session forgot a statement it prepared: a pooler in transaction mode ran this
    // transaction on another server session.
    if (sqlstate() == sqlstate::invalid_sql_statement_name)
        text += " (behind a connection pooler in transaction mode? add dlock_prepare=off to the "
                "URL)";
    return text;
}

int result::rows() const noexcept {
    return r_ ? pq().ntuples(r_.get()) : 0;
}

std::int64_t result::affected() const noexcept {
    if (!r_) return 0;
    const std::string_view v = pq().cmd_tuples(r_.get());
    std::int64_t n = 0;
    std::from_chars(v.data(), v.data() + v.size(), n);
    return n;
}

bool result::is_null(int row, int col) const noexcept {
    return !r_ || row >= pq().ntuples(r_.get()) || col >= pq().nfields(r_.get()) ||
           pq().getisnull(r_.get(), row, col);
}

std::string_view result::value(int row, int col) const noexcept {
    if (is_null(row, col)) return {};
    return {pq().getvalue(r_.get(), row, col),
            static_cast<std::size_t>(pq().getlength(r_.get(), row, col))};
}

std::optional<std::int64_t> result::int_value(int row, int col) const noexcept {
    const auto v = value(row, col);
    std::int64_t out = 0;
    if (v.empty()) return std::nullopt;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc{} || p != v.data() + v.size()) return std::nullopt;
    return out;
}

// --- connection -----------------------------------------------------------------------------

connection::connection(asio::io_context& io, std::shared_ptr<const settings> s)
    : io_(io)
    , settings_(std::move(s))
    , sd_(io)
    , timer_(io) {}

connection::~connection() {
    if (sd_.is_open()) sd_.release();
    if (conn_) pq().finish(conn_);
}

void connection::connect(std::function<void(std::error_code)> done) {
    connect_done_ = std::move(done);
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : settings_->params) {
        keys.push_back(k.c_str());
        values.push_back(v.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = pq().connect_start_params(keys.data(), values.data(), 0);
    if (!conn_) return fail(make_error_code(errc::out_of_memory), "libpq: out of memory");
    if (pq().status(conn_) == CONNECTION_BAD) {
        const std::string text = trimmed(pq().error_message(conn_));
        return fail(make_error_code(classify_connect_failure(text)), text);
    }
    pq().set_notice_receiver(conn_, &connection::notice_receiver, this);
    timer_.expires_after(settings_->connect_timeout);
    timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        auto self = w.lock();
        if (ec || !self || self->up_ || self->closed_) return;
        self->fail(make_error_code(errc::unavailable),
                   "no connection within " +
                       std::to_string(self->settings_->connect_timeout.count()) + " ms");
    });
    connect_step(PGRES_POLLING_WRITING);
}

void connection::assign_socket() {
    if (sd_.is_open()) sd_.release();
    const int fd = pq().socket(conn_);
    if (fd >= 0) sd_.assign(fd);
}

void connection::connect_step(int polling_status) {
    if (closed_) return;
    switch (static_cast<PostgresPollingStatusType>(polling_status)) {
    case PGRES_POLLING_OK: {
        timer_.cancel();
        if (pq().set_nonblocking(conn_, 1) != 0 || pq().enter_pipeline_mode(conn_) != 1)
            return fail(make_error_code(errc::protocol_error), trimmed(pq().error_message(conn_)));
        assign_socket();
        up_ = true;
        pid_ = pq().backend_pid(conn_);
        arm_read();
        auto done = std::move(connect_done_);
        connect_done_ = nullptr;
        if (done) done({});
        return;
    }
    case PGRES_POLLING_FAILED: {
        const std::string text = trimmed(pq().error_message(conn_));
        return fail(make_error_code(classify_connect_failure(text)), text);
    }
    default:
        break;
    }
    assign_socket();
    const auto what = polling_status == PGRES_POLLING_READING
                          ? asio::posix::stream_descriptor::wait_read
                          : asio::posix::stream_descriptor::wait_write;
    sd_.async_wait(what, [self = shared_from_this()](std::error_code ec) {
        if (ec || self->closed_) return;
        self->connect_step(pq().connect_poll(self->conn_));
    });
}

void connection::arm_read() {
    if (reading_ || closed_ || !sd_.is_open()) return;
    reading_ = true;
    sd_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [self = shared_from_this()](std::error_code ec) {
                       self->reading_ = false;
                       if (ec || self->closed_) return;
                       self->on_readable();
                   });
}

void connection::on_readable() {
    // Edge-triggered reactor: read until the socket has nothing more (bounded, see header).
    for (int round = 0; round < 8; ++round) {
        if (pq().consume_input(conn_) != 1 || pq().status(conn_) == CONNECTION_BAD) {
            std::string text = trimmed(pq().error_message(conn_));
            if (!error_text_.empty()) text = error_text_ + " (" + text + ")";
            process_results(); // an error result that came with the close
            if (closed_) return;
            return fail(make_error_code(errc::unavailable), text);
        }
        process_results();
        if (closed_) return;
        while (PGnotify* n = pq().notifies(conn_)) {
            const std::string channel = n->relname, payload = n->extra ? n->extra : "";
            pq().freemem(n);
            if (on_notify_) on_notify_(channel, payload);
            if (closed_) return;
        }
        if (!readable_now(pq().socket(conn_))) break;
    }
    if (writing_) flush();
    if (closed_) return;
    arm_read();
}

void connection::process_results() {
    while (!inflight_.empty() && !closed_ && !pq().is_busy(conn_)) {
        PGresult* r = pq().get_result(conn_);
        auto& b = inflight_.front();
        if (!r) {
            // The end of one statement's (or one Parse's) results.
            if (!b.have_current) break; // nothing more yet
            b.have_current = false;
            continue;
        }
        if (pq().result_status(r) == PGRES_PIPELINE_SYNC) {
            pq().clear(r);
            batch done = std::move(inflight_.front());
            inflight_.pop_front();
            last_ok_send_ = done.sent;
            arm_deadline();
            if (done.done) done.done({}, done.results);
            if (after_batch_) {
                auto after = after_batch_; // it may clear or replace the hook
                after();
            }
            continue;
        }
        if (b.have_current || b.results.size() >= b.count) {
            pq().clear(r); // a second result of one statement: not produced by our statements
            continue;
        }
        b.have_current = true;
        if (b.parses_read < b.parses.size() && b.parses[b.parses_read].first == b.results.size()) {
            parse_read(b, b.parses[b.parses_read].second, r);
            ++b.parses_read;
        } else if (b.parse_error) {
            pq().clear(r); // aborted by the failed Parse, whose error is the statement's
            b.results.push_back(std::move(*b.parse_error));
            b.parse_error.reset();
        } else {
            b.results.emplace_back(r);
        }
    }
}

void connection::parse_read(batch& b, const std::string& sql, PGresult* r) {
    if (pq().result_status(r) == PGRES_COMMAND_OK) {
        pq().clear(r);
        if (auto it = prepared_.find(sql); it != prepared_.end()) it->second.ready = true;
        return;
    }
    // Refused (a missing table, a permission) or aborted by an earlier failure: not prepared;
    // its next use tries again.
    prepared_.erase(sql);
    b.parse_error.emplace(r);
}

bool connection::statement_name(const statement& s, batch& b, std::size_t i, const char*& name) {
    // The named statements of one session are few (the kinds' fixed SQL); the bound only
    // guards against a caller that builds SQL per call.
    constexpr std::size_t max_named = 64;
    name = nullptr;
    if (!settings_->prepare || s.params.empty()) return true;
    if (const auto it = prepared_.find(s.sql); it != prepared_.end()) {
        if (it->second.ready) name = it->second.name.c_str();
        return true;
    }
    if (prepared_.size() >= max_named) return true;
    auto& n = prepared_[s.sql];
    n.name = "dlock_" + std::to_string(++names_);
    if (pq().send_prepare(conn_, n.name.c_str(), s.sql.c_str(), static_cast<int>(s.params.size()),
                          nullptr) != 1) {
        prepared_.erase(s.sql);
        return false;
    }
    b.parses.emplace_back(i, s.sql);
    name = n.name.c_str(); // executed right behind its own Parse
    return true;
}

void connection::run(std::vector<statement> stmts, std::chrono::milliseconds timeout,
                     batch_handler done) {
    if (!open()) {
        std::vector<result> none;
        auto ec = make_error_code(closed_ ? errc::unavailable : errc::invalid_argument);
        asio::post(io_, [done = std::move(done), ec, none]() mutable { done(ec, none); });
        return;
    }
    batch b;
    b.count = stmts.size();
    b.done = std::move(done);
    b.sent = std::chrono::steady_clock::now();
    if (timeout.count() > 0) b.deadline = b.sent + timeout;
    for (std::size_t i = 0; i < stmts.size(); ++i) {
        const auto& s = stmts[i];
        std::vector<const char*> values;
        values.reserve(s.params.size());
        for (const auto& p : s.params)
            values.push_back(p ? p->c_str() : nullptr);
        const char* name = nullptr;
        const int n = static_cast<int>(values.size());
        if (!statement_name(s, b, i, name) ||
            (name ? pq().send_query_prepared(conn_, name, n, values.data(), nullptr, nullptr, 0)
                  : pq().send_query_params(conn_, s.sql.c_str(), n, nullptr, values.data(), nullptr,
                                           nullptr, 0)) != 1) {
            inflight_.push_back(std::move(b));
            return fail(make_error_code(errc::unavailable), trimmed(pq().error_message(conn_)));
        }
    }
    inflight_.push_back(std::move(b));
    if (pq().pipeline_sync(conn_) != 1)
        return fail(make_error_code(errc::unavailable), trimmed(pq().error_message(conn_)));
    arm_deadline();
    flush();
}

void connection::flush() {
    if (closed_) return;
    const int r = pq().flush(conn_);
    if (r < 0) return fail(make_error_code(errc::unavailable), trimmed(pq().error_message(conn_)));
    if (r == 0 || writing_) {
        if (r == 0) writing_ = false;
        return;
    }
    writing_ = true;
    sd_.async_wait(asio::posix::stream_descriptor::wait_write,
                   [self = shared_from_this()](std::error_code ec) {
                       if (ec || self->closed_) return;
                       self->writing_ = false;
                       self->flush();
                   });
}

void connection::arm_deadline() {
    if (!up_ || closed_) return;
    std::optional<std::chrono::steady_clock::time_point> first;
    for (const auto& b : inflight_)
        if (b.deadline && (!first || *b.deadline < *first)) first = b.deadline;
    if (!first) {
        timer_.cancel();
        return;
    }
    timer_.expires_at(*first);
    timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        auto self = w.lock();
        if (ec || !self || self->closed_) return;
        const auto now = std::chrono::steady_clock::now();
        for (const auto& b : self->inflight_)
            if (b.deadline && *b.deadline <= now)
                return self->fail(make_error_code(errc::ambiguous),
                                  "no reply within the statement budget");
        self->arm_deadline();
    });
}

void connection::fail(std::error_code ec, std::string text) {
    if (closed_) return;
    error_text_ = redact(std::move(text), settings_->secrets);
    finish(ec, true);
}

void connection::close(std::error_code why) {
    if (closed_) return;
    finish(why, false);
}

void connection::finish(std::error_code ec, bool notify) {
    closed_ = true;
    timer_.cancel();
    if (sd_.is_open()) sd_.release();
    if (conn_) {
        pq().finish(conn_);
        conn_ = nullptr;
    }
    auto connect_done = std::move(connect_done_);
    connect_done_ = nullptr;
    auto batches = std::move(inflight_);
    inflight_.clear();
    auto closed_cb = std::move(on_closed_);
    on_closed_ = nullptr;
    on_notify_ = nullptr;
    auto after = std::move(after_batch_);
    after_batch_ = nullptr;
    if (connect_done) connect_done(ec);
    for (auto& b : batches)
        if (b.done) b.done(ec, b.results);
    if (notify && closed_cb) closed_cb(ec);
    if (after && !batches.empty()) after();
}

void connection::notice_receiver(void* self, const PGresult* r) {
    // An error the server sends outside a statement (57P01 "terminating connection due to
    // administrator command") arrives as a notice just before the socket closes: keep it for
    // the message. Plain notices and warnings are dropped.
    auto* c = static_cast<connection*>(self);
    const char* sev = pq().result_error_field(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (!sev || (std::string_view(sev) != "FATAL" && std::string_view(sev) != "PANIC")) return;
    const char* state = pq().result_error_field(r, PG_DIAG_SQLSTATE);
    const char* msg = pq().result_error_field(r, PG_DIAG_MESSAGE_PRIMARY);
    c->error_text_ = std::string(msg ? msg : "server ended the session") + " (SQLSTATE " +
                     (state ? state : "?") + ")";
}

} // namespace dlock::detail::pg
