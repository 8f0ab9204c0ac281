// dlock::lease: the RAII handle of one acquisition by an owner id of its own.
#include "redis/client_impl.hpp"
#include "redis/renewal.hpp"

#include <dlock/lease.hpp>

namespace dlock {

lease::lease(lease&&) noexcept = default;

lease& lease::operator=(lease&& o) noexcept {
    if (this != &o) {
        std::error_code ignore;
        release(ignore);
        state_ = std::move(o.state_);
    }
    return *this;
}

lease::~lease() {
    std::error_code ignore;
    release(ignore);
}

const std::string& lease::name() const {
    static const std::string empty;
    return state_ ? state_->keys.key : empty;
}

std::optional<std::uint64_t> lease::token() const {
    return state_ ? state_->token : std::nullopt;
}

std::chrono::steady_clock::time_point lease::valid_until() const {
    return state_ ? state_->valid_until() : std::chrono::steady_clock::time_point{};
}

bool lease::lost() const noexcept {
    return state_ && state_->lost();
}

std::stop_token lease::stop_token() const {
    return state_ ? state_->stop_token() : std::stop_token{};
}

void lease::on_lost(std::function<void()> cb) {
    if (state_) state_->on_lost(std::move(cb));
}

void lease::release() {
    std::error_code ec;
    release(ec);
    throw_if(ec);
}

void lease::release(std::error_code& ec) {
    ec.clear();
    if (!state_ || state_->released()) return;
    auto h = std::move(state_);
    auto c = h->client.lock();
    if (!c || c->shut_down()) {
        h->mark_released();
        ec = make_error_code(errc::cancelled);
        return;
    }
    if (h->lost()) {
        c->renewal().remove(h);
        ec = make_error_code(errc::not_owner);
        return;
    }
    h->releasing = true;
    c->renewal().remove(h);
    if (c->on_io_thread()) {
        // Called from a completion handler: never block the I/O thread.
        c->release_detached(h, {});
        return;
    }
    c->release(h, ec);
    if (ec == errc::not_owner) {
        h->mark_lost();
        return;
    }
    h->mark_released();
}

void lease::extend(std::chrono::milliseconds lease_ms) {
    std::error_code ec;
    extend(lease_ms, ec);
    throw_if(ec);
}

void lease::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    ec.clear();
    if (!state_ || state_->released()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    if (lease_ms.count() < 1) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    auto c = state_->client.lock();
    if (!c) {
        ec = make_error_code(errc::cancelled);
        return;
    }
    if (state_->lost()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    const std::string ms = std::to_string(lease_ms.count());
    const std::string_view args[] = {"1", state_->keys.key, ms, state_->owner};
    const auto sent = std::chrono::steady_clock::now();
    auto v = c->run_script(state_->kind == lock_kind::reentrant ? detail::script_id::reentrant_renew
                                                                : detail::script_id::simple_renew,
                           args, ec);
    if (ec) return;
    if ((ec = detail::reply_error(v))) return;
    if (v.kind != resp3::type::array || v.elements.size() != 1) {
        ec = make_error_code(errc::protocol_error);
        return;
    }
    if (v.elements[0].integer != 1) {
        c->renewal().remove(state_);
        state_->mark_lost();
        ec = make_error_code(errc::not_owner);
        return;
    }
    state_->set_valid_until(sent + lease_ms - detail::drift_for(lease_ms));
}

namespace detail {

namespace {
/// One release in flight without a waiting caller; owns its command line.
struct detached_release final : request {
    std::vector<std::string> storage;
    std::vector<std::string_view> views;
    std::function<void(std::error_code, resp3::value&&)> done;
    void complete(std::error_code ec, resp3::value&& v) override {
        if (done) done(ec, std::move(v));
        delete this;
    }
};
} // namespace

asio::any_io_executor hold_executor(const std::shared_ptr<hold_state>& h) {
    auto c = h ? h->client.lock() : nullptr;
    return c && !c->shut_down() ? asio::any_io_executor(c->io().get_executor())
                                : asio::any_io_executor{};
}

void start_release(std::shared_ptr<hold_state> h, std::function<void(std::error_code)> done) {
    auto c = h ? h->client.lock() : nullptr;
    if (!h || h->released()) return done({});
    if (!c || c->shut_down()) {
        h->mark_released();
        return done(make_error_code(errc::cancelled));
    }
    if (h->lost()) {
        c->renewal().remove(h);
        return done(make_error_code(errc::not_owner));
    }
    h->releasing = true;
    c->renewal().remove(h);
    c->release_detached(h, std::move(done));
}

std::vector<std::string> client_impl::release_command(lock_kind kind, const lock_keys& keys,
                                                      const std::string& owner,
                                                      std::chrono::milliseconds lease,
                                                      std::string_view& eval_fallback) const {
    const auto& s = get_script(kind == lock_kind::reentrant ? script_id::reentrant_release
                                                            : script_id::simple_release);
    eval_fallback = s.text;
    if (kind == lock_kind::reentrant)
        return {"EVALSHA",
                std::string(s.sha),
                "2",
                keys.key,
                keys.channel,
                "0",
                std::to_string(lease.count()),
                owner,
                std::string(publish_cmd()),
                "0"};
    return {"EVALSHA", std::string(s.sha),        "2", keys.key, keys.channel,
            owner,     std::string(publish_cmd())};
}

void client_impl::submit_release(std::vector<std::string> command, std::string_view eval_fallback,
                                 std::function<void(std::error_code, resp3::value&&)> done) {
    auto* op = new detached_release();
    op->storage = std::move(command);
    op->done = std::move(done);
    op->views.assign(op->storage.begin(), op->storage.end());
    op->args = op->views;
    op->eval_fallback = eval_fallback;
    op->deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    conn_->submit(*op);
}

void client_impl::release_detached(const std::shared_ptr<hold_state>& h,
                                   std::function<void(std::error_code)> done) {
    auto finish = [h, done = std::move(done)](std::error_code ec, resp3::value&& v) {
        if (!ec) ec = reply_error(v);
        if (!ec) {
            const bool released =
                h->kind == lock_kind::reentrant ? v.is_integer() : v.is_integer() && v.integer == 1;
            if (!released) ec = make_error_code(errc::not_owner);
        }
        if (ec == errc::not_owner)
            h->mark_lost();
        else
            h->mark_released();
        if (done) done(ec);
    };
    if (handover_possible(*h) && !shut_down()) {
        if (on_io_thread()) return release_or_handover(h, std::move(finish));
        return asio::post(io_,
                          [self = shared_from_this(), h, finish = std::move(finish)]() mutable {
                              self->release_or_handover(h, std::move(finish));
                          });
    }
    std::string_view fallback;
    auto cmd = release_command(h->kind, h->keys, h->owner, h->lease, fallback);
    submit_release(std::move(cmd), fallback, std::move(finish));
}

} // namespace detail
} // namespace dlock
