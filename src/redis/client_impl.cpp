#include "redis/client_impl.hpp"

#include "core/random.hpp"
#include "redis/renewal.hpp"

#include <dlock/mutex.hpp>

#include <stdexcept>

namespace dlock::detail {

// ---- ids ----------------------------------------------------------------------------------

namespace {
std::atomic<std::uint64_t> owner_counter{0};
} // namespace

std::uint64_t new_owner_id() noexcept {
    return owner_counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::uint64_t this_thread_owner_id() noexcept {
    thread_local const std::uint64_t id = new_owner_id();
    return id;
}

std::chrono::nanoseconds drift_for(std::chrono::milliseconds lease) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(lease) / 100 +
           std::chrono::milliseconds(2);
}

// ---- hold_state ---------------------------------------------------------------------------

std::chrono::steady_clock::time_point hold_state::valid_until() const noexcept {
    return std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(valid_until_ns_.load(std::memory_order_acquire)));
}

void hold_state::set_valid_until(std::chrono::steady_clock::time_point t) noexcept {
    valid_until_ns_.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count(),
        std::memory_order_release);
}

void hold_state::mark_released() noexcept {
    released_.store(true, std::memory_order_release);
    set_valid_until(std::chrono::steady_clock::time_point{});
    end_local();
}

void hold_state::mark_lost() {
    if (lost_.exchange(true, std::memory_order_acq_rel)) return;
    set_valid_until(std::chrono::steady_clock::time_point{});
    end_local();
    stop_.request_stop();
    std::vector<std::function<void()>> cbs;
    {
        std::lock_guard lk(cb_mu_);
        cbs.swap(callbacks_);
    }
    for (auto& cb : cbs)
        cb();
}

void hold_state::end_local() noexcept {
    if (!local_counted_.exchange(false, std::memory_order_acq_rel)) return;
    if (auto c = client.lock()) c->local_hold_end(kind, keys.key);
}

void hold_state::on_lost(std::function<void()> cb) {
    {
        std::lock_guard lk(cb_mu_);
        if (!lost()) {
            callbacks_.push_back(std::move(cb));
            return;
        }
    }
    cb();
}

// ---- client_impl --------------------------------------------------------------------------

std::error_code reply_error(const resp3::value& v) noexcept {
    if (!v.is_error()) return {};
    return make_error_code(classify_server_error(v.str));
}

client_impl::client_impl(client_options opts)
    : opts_(std::move(opts))
    , id_(random_uuid())
    , work_(asio::make_work_guard(io_)) {
    if (opts_.kind != topology::standalone)
        throw error(errc::configuration_error,
                    "dlock: Sentinel and Cluster topologies are not supported by the client yet "
                    "(" +
                        to_string(opts_) + ")");
    if (opts_.watchdog_lease < std::chrono::milliseconds(30))
        throw error(errc::configuration_error, "dlock: watchdog_lease must be at least 30 ms");
    if (opts_.command_timeout <= std::chrono::milliseconds(0) ||
        opts_.connect_timeout <= std::chrono::milliseconds(0))
        throw error(errc::configuration_error, "dlock: timeouts must be positive");
    net::target t;
    if (!opts_.unix_socket.empty())
        t.unix_socket = opts_.unix_socket;
    else {
        t.host = opts_.endpoints.at(0).host;
        t.port = opts_.endpoints.at(0).port;
    }
    conn_ = std::make_shared<net::connection>(io_, opts_, t, net::connection::mode::command);
    if (opts_.sync_io == blocking_io::caller_thread && !opts_.tls.enabled)
        lane_ = std::make_unique<net::sync_lane>(opts_);
    sub_ = std::make_unique<net::subscriber>(io_, opts_, t);
    renewal_ = std::make_unique<renewal_service>(*this);
}

client_impl::~client_impl() {
    shutdown();
}

void client_impl::start() {
    conn_->start();
    renewal_->start();
    thread_ = std::thread([this] {
        thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
        io_.run();
    });
    thread_id_.store(thread_.get_id(), std::memory_order_release);
}

void client_impl::shutdown() {
    shut_.store(true, std::memory_order_release);
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
        // Waiters sleeping on a timer or a message would never wake again: end them now.
        std::vector<std::weak_ptr<cancellable>> ops;
        {
            std::lock_guard lk(ops_mu_);
            ops.swap(ops_);
        }
        for (auto& w : ops)
            if (auto op = w.lock()) op->cancel();
        renewal_->stop();
        sub_->stop();
    });
    if (lane_) lane_->shutdown();
    conn_->stop();
    work_.reset();
    // Give in-flight completions a chance, then stop the loop for good.
    asio::post(io_, [this] { io_.stop(); });
    if (on_io_thread())
        thread_.detach();
    else
        thread_.join();
}

net::subscriber& client_impl::subscriber() {
    return *sub_;
}

void client_impl::local_hold_begin(lock_kind kind, const std::string& key,
                                   std::chrono::milliseconds lease) {
    std::lock_guard lk(local_mu_);
    auto& e = local_holds_[kind == lock_kind::reentrant ? 0 : 1][std::hash<std::string>{}(key)];
    ++e.count;
    e.longest_lease = std::max(e.longest_lease, lease);
}

void client_impl::local_hold_end(lock_kind kind, const std::string& key) noexcept {
    std::lock_guard lk(local_mu_);
    auto& m = local_holds_[kind == lock_kind::reentrant ? 0 : 1];
    auto it = m.find(std::hash<std::string>{}(key));
    if (it != m.end() && --it->second.count <= 0) m.erase(it);
}

std::optional<std::chrono::milliseconds> client_impl::held_here(lock_kind kind,
                                                                const std::string& key) {
    std::lock_guard lk(local_mu_);
    const auto& m = local_holds_[kind == lock_kind::reentrant ? 0 : 1];
    if (m.empty()) return std::nullopt;
    auto it = m.find(std::hash<std::string>{}(key));
    if (it == m.end()) return std::nullopt;
    return it->second.longest_lease;
}

void client_impl::track(std::weak_ptr<cancellable> op) {
    std::lock_guard lk(ops_mu_);
    std::erase_if(ops_, [](const std::weak_ptr<cancellable>& w) { return w.expired(); });
    ops_.push_back(std::move(op));
}

bool client_impl::on_io_thread() const noexcept {
    return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire);
}

resp3::value client_impl::run(std::span<const std::string_view> args, std::error_code& ec,
                              std::string_view eval_fallback) {
    if (on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    const auto deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    if (lane_allowed()) {
        ec.clear();
        resp3::value out;
        if (lane_->call(*conn_, args, eval_fallback, deadline, out, ec) ==
            net::sync_lane::result::done)
            return out;
    }
    sync_request r;
    r.args = args;
    r.eval_fallback = eval_fallback;
    r.deadline = deadline;
    conn_->submit(r);
    r.wait();
    ec = r.ec_;
    return std::move(r.reply_);
}

resp3::value client_impl::run_script(script_id id, std::span<const std::string_view> args,
                                     std::error_code& ec) {
    const auto& s = get_script(id);
    std::vector<std::string_view> full;
    full.reserve(args.size() + 2);
    full.push_back("EVALSHA");
    full.push_back(s.sha);
    full.insert(full.end(), args.begin(), args.end());
    return run(full, ec, s.text);
}

// ---- free functions used by the public templates ------------------------------------------

void submit(client_impl& c, request& r) {
    if (r.deadline == std::chrono::steady_clock::time_point{})
        r.deadline = std::chrono::steady_clock::now() + c.options().command_timeout;
    c.conn().submit(r);
}

asio::any_io_executor executor_of(client_impl& c) {
    return c.io().get_executor();
}

void start_acquire(const std::shared_ptr<client_impl>& c, std::string name,
                   const acquire_options& opts, acquire_callback cb, caller mode) {
    std::error_code ec;
    acquire_request req;
    req.kind = opts.kind;
    req.keys = make_keys(name, opts.kind, ec);
    if (!ec && opts.lease && opts.lease->count() < 1) ec = make_error_code(errc::invalid_argument);
    if (!ec && opts.retry &&
        (opts.retry->attempts == 0 || opts.retry->delay.count() < 0 ||
         opts.retry->jitter.count() < 0))
        ec = make_error_code(errc::invalid_argument);
    if (ec) {
        asio::post(c->io(), [cb = std::move(cb), ec] { cb(ec, lease{}); });
        return;
    }
    req.wait = opts.wait;
    req.retry = opts.retry;
    if (req.wait && req.wait->count() < 0) req.wait = std::chrono::milliseconds(0);
    req.lease = opts.lease ? *opts.lease : c->options().watchdog_lease;
    req.owner = opts.kind == lock_kind::reentrant ? c->id() + ':' + std::to_string(new_owner_id())
                                                  : random_token();
    const bool watchdog = !opts.lease;
    if (mode == caller::may_block) {
        acquire_result res;
        if (c->try_first_attempt(req, res, ec) == client_impl::first_attempt::finished) {
            if (ec || !res.acquired) return cb(ec, lease{});
            return cb({}, lease(c->make_hold(req, res, watchdog)));
        }
    }
    auto shared_req = std::make_shared<acquire_request>(req);
    c->async_acquire(
        req, [c, shared_req, watchdog, cb = std::move(cb)](std::error_code e, acquire_result r) {
            if (e || !r.acquired) return cb(e, lease{});
            cb({}, lease(c->make_hold(*shared_req, r, watchdog)));
        });
}

} // namespace dlock::detail
