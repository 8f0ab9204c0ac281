// dlock_fault_worker: the workload of the fault suite (reliability.md §7.2 W2/W3). It takes a lock
// through dlock's public API, does a read-modify-write on a resource under it, and logs every
// step as the checker's JSON Lines (§8.1) with CLOCK_MONOTONIC stamps (steady_clock):
//   acquire invoke/ok/fail/info (ok: token_h, fence, deadline = valid_until, ttl_ms, t_start)
//   use     invoke/ok/fail/info (the read-modify-write; ok = the write was accepted)
//   release invoke/ok/fail/info
//   with --watchdog (no fixed lease: the client renews the lease itself): acquire ok carries
//   "watchdog":true; extend ok without an invoke is a renewal the holder observed (the public API
//   has no renewal hook: the holder reads valid_until() before each use, before each write and
//   before its release, and logs it when it moved, with t_start derived as for acquire); lost
//   info is the loss signal (lease::on_lost, on the client's thread), naming the hold by token_h
// Modes: S (single master, simple lock), F (single master, reentrant lock with its fencing token,
// resource written through dlock::redis::fenced_set), R (a Redlock dlock::client over the
// --masters). Resources: none; counter (GET, sleep, SET on a Redis "resource" server); fenced (open
// = fenced_set of an open marker sharing the fence key, so that the resource ratchets on open as
// well as on write, then GET, sleep, fenced_set of the value); file (an append-only file: read
// the last line, sleep, append). Every value written is "after|before|w|op|fence" (the file's
// lines the same with spaces) so that the orchestrator can rebuild the resource log in the
// server's order from its append-only file.
// Bounded: at most --ops operations and --duration-ms; every call has a wait and a timeout.
//
// Other backends: in mode S the --url may name one (zk://, postgresql://, etcd://); the client is
// then made from the URL alone (its own parameters carry the timeouts) and --kind picks the lock
// kind. ZooKeeper and etcd have no fixed lease (a lock lives as long as the client's session or
// lease): there the acquisition takes none, --ttl-ms is the session timeout or lease TTL, and the
// holder's belief is the valid_until() it was granted with (the deadline it logs), not the later
// ones its session's pings or keep-alives push forward, so that what it does matches what the
// checker judges.

#include "checker/checker.hpp"
#include "checker/history.hpp"

#include <dlock/client.hpp>
#include <dlock/config.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/redis.hpp>
#include <dlock/redlock.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
using dlock::fault::jsonl_writer;

std::int64_t ns_of(clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
std::int64_t now_ns() {
    return ns_of(clock_type::now());
}

struct config {
    std::int64_t id = 1;
    std::string mode = "S";
    std::string kind; ///< a lock kind by name (kind_from_name); empty: the mode's
    std::string lock = "L";
    std::string url;
    std::vector<std::string> masters;
    std::string resource = "none";
    std::string resource_url;
    std::string file;
    std::int64_t ttl_ms = 1000;
    std::int64_t wait_ms = 3000;
    std::int64_t poll_ms = 0;
    std::int64_t command_timeout_ms = 1000;
    std::int64_t node_timeout_ms = 50;
    std::int64_t hold_ms = 100;
    std::int64_t ops = 1000;
    std::int64_t duration_ms = 10000;
    std::int64_t seed = 1;
    std::int64_t expire_pct = 0;
    std::int64_t think_ms = 0;
    std::int64_t extend_ms = 0;
    std::int64_t fork_pct = 0;
    std::int64_t linger_ms = 0;
    /// A careful holder writes only while its lease has this much left: the time a write to the
    /// resource takes when nothing delays it. The check is before the write and the write's "ok"
    /// is stamped after its reply, so with no margin a write begun just before the deadline is
    /// acknowledged just after it (CI saw 0.55 ms in F21). F06 delays the write far past it.
    std::int64_t write_margin_ms = 50;
    bool careless = false;
    bool storm = false;
    /// Hold without a fixed lease (the client's watchdog renews it) for --uses uses in a row.
    bool watchdog = false;
    std::int64_t uses = 1;
    std::string log;
};

class event_log {
public:
    explicit event_log(const std::string& path)
        : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
    ~event_log() {
        if (fd_ >= 0) ::close(fd_);
    }
    event_log(const event_log&) = delete;
    event_log& operator=(const event_log&) = delete;
    bool ok() const { return fd_ >= 0; }
    /// One write(2) per line: a SIGKILL never leaves half a line, and nothing is buffered.
    void put(jsonl_writer& w) {
        std::string line = w.line();
        (void)!::write(fd_, line.data(), line.size());
    }

private:
    int fd_;
};

struct resource_keys {
    std::string value, open, fence;
};

/// "after|before|w|op|fence" -> after; empty or nil -> 0.
std::int64_t value_after(const std::string& v) {
    if (v.empty()) return 0;
    try {
        return std::stoll(v.substr(0, v.find_first_of("| ")));
    } catch (const std::exception&) {
        return -1;
    }
}

/// The lock side of a worker: one dlock::client, on Redis (S, F) or Redlock over the masters
/// (R: its one kind, simple, whatever the options ask). A fork()ed child and F08's throw-away
/// rounds make their own.
struct locker {
    std::unique_ptr<dlock::client> client;
    bool redlock = false;
    bool session_lease = false; ///< ZooKeeper, etcd: no fixed lease, the session is the lease
    /// PostgreSQL advisory locks: each check of the holding session proves its locks and moves
    /// valid_until on (up to a fixed lease's end), a renewal the holder logs as with --watchdog.
    bool session_proven = false;

    dlock::acquire_options with_kind(dlock::acquire_options ao) const {
        if (redlock) ao.kind = dlock::lock_kind::simple;
        if (session_lease) ao.lease.reset();
        return ao;
    }
    dlock::lease acquire(const std::string& name, const dlock::acquire_options& ao,
                         std::error_code& ec) {
        return client->acquire(name, with_kind(ao), ec);
    }
    template <class Handler>
    void async_acquire(const std::string& name, const dlock::acquire_options& ao, Handler&& h) {
        client->async_acquire(name, with_kind(ao), std::forward<Handler>(h));
    }
};

/// What an async acquisition delivered, handed from the I/O thread to the worker's thread.
struct async_result {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    dlock::lease l;
};

class worker {
public:
    explicit worker(config c)
        : c_(std::move(c))
        , log_(c_.log)
        , rng_(static_cast<std::uint64_t>(c_.seed) * 1000003u + static_cast<std::uint64_t>(c_.id))
        , keys_{"res:{" + c_.lock + "}:value", "res:{" + c_.lock + "}:open",
                "res:{" + c_.lock + "}:fence"} {}

    int run() {
        if (!log_.ok()) {
            std::cerr << "dlock_fault_worker: cannot open log " << c_.log << "\n";
            return 64;
        }
        try {
            lock_ = make_locker();
            if (c_.resource == "counter" || c_.resource == "fenced")
                res_client_ = std::make_unique<dlock::client>(options(c_.resource_url));
        } catch (const dlock::error& e) {
            std::cerr << "dlock_fault_worker: " << e.what() << "\n";
            return 64;
        }
        auto end = clock_type::now() + ms(c_.duration_ms);
        for (std::int64_t i = 0; i < c_.ops && clock_type::now() < end; ++i) {
            if (c_.storm)
                storm_round(end);
            else
                one_round(end);
        }
        write_metrics();
        // F08: stay alive (clients and their I/O threads with us) while the orchestrator looks
        // for keys a destroyed handle would still renew.
        std::this_thread::sleep_for(ms(c_.linger_ms));
        return 0;
    }

private:
    /// <log>.metrics.json: a few of the lock client's counters at the end of the run, for
    /// scenarios that assert what the history cannot show (E07: watches etcd cancelled).
    void write_metrics() const {
        if (!lock_.client) return;
        const auto m = lock_.client->metrics();
        std::ofstream f(c_.log + ".metrics.json");
        f << "{\"watches_cancelled\":" << m.watches_cancelled
          << ",\"watch_streams_broken\":" << m.watch_streams_broken
          << ",\"reconnects\":" << m.reconnects << ",\"losses\":" << m.losses_total()
          << ",\"enabled\":" << (m.enabled ? "true" : "false") << "}\n";
    }

    locker make_locker() const {
        locker k;
        if (c_.mode == "R") {
            dlock::redlock_options ro;
            ro.node_timeout = ms(c_.node_timeout_ms);
            ro.retry_delay = ms(c_.poll_ms > 0 ? c_.poll_ms : 50);
            ro.retry_jitter = ms(c_.poll_ms > 0 ? c_.poll_ms : 50);
            ro.watchdog_lease = ms(c_.ttl_ms);
            for (const auto& u : c_.masters)
                ro.masters.push_back(options(u));
            k.client = std::make_unique<dlock::client>(ro);
            k.redlock = true;
        } else if (is_redis_url(c_.url)) {
            k.client = std::make_unique<dlock::client>(options(c_.url));
        } else {
            k.client = std::make_unique<dlock::client>(c_.url);
            k.session_lease =
                k.client->backend_name() == "zookeeper" || k.client->backend_name() == "etcd";
            const auto kind = dlock::kind_from_name(c_.kind).value_or(dlock::lock_kind::reentrant);
            k.session_proven =
                k.client->backend_name() == "postgresql" && kind != dlock::lock_kind::lease &&
                kind != dlock::lock_kind::shedlock && kind != dlock::lock_kind::versioned &&
                kind != dlock::lock_kind::semaphore;
        }
        return k;
    }

    static bool is_redis_url(const std::string& url) {
        return url.rfind("redis", 0) == 0 || url.rfind("unix", 0) == 0;
    }

    dlock::client_options options(const std::string& url) const {
        auto o = dlock::parse_url(url);
        o.command_timeout = ms(c_.command_timeout_ms);
        o.connect_timeout = ms(c_.command_timeout_ms);
        o.reconnect_max = 200ms;
        o.watchdog_lease = ms(c_.ttl_ms); // F08's handles without a fixed lease
        o.client_name = "dlock-fault-w" + std::to_string(c_.id);
        return o;
    }

    jsonl_writer ev(std::int64_t op, const char* f, const char* type) {
        jsonl_writer w;
        w.field("w", c_.id)
            .field("op", op)
            .field("lock", c_.lock)
            .field("f", f)
            .field("type", type);
        return w;
    }

    void put(jsonl_writer& w, std::int64_t t) {
        w.field("t", t);
        log_.put(w);
    }

    void one_round(clock_type::time_point end) {
        std::int64_t op = ++op_;
        dlock::acquire_options ao = acquire_opts(end, !c_.watchdog);
        {
            auto w = ev(op, "acquire", "invoke");
            put(w, now_ns());
        }
        std::error_code ec;
        dlock::lease l = lock_.acquire(c_.lock, ao, ec);
        std::int64_t t_done = now_ns();
        if (!log_acquired(op, l, ec, t_done, c_.watchdog)) return;
        std::string token_h = std::to_string(c_.id) + "-" + std::to_string(op);
        if (c_.watchdog) watch(l, op, token_h);
        std::optional<std::int64_t> fence;
        if (auto t = l.token()) fence = static_cast<std::int64_t>(*t);
        pid_t child = 0;
        std::uniform_int_distribution<std::int64_t> pct(0, 99);
        if (c_.fork_pct > 0 && pct(rng_) < c_.fork_pct) child = fork_contender();
        // A careful holder looks at its lease before it starts (an acquisition can return
        // after its validity, F03/F04); only the write of a --careless one is unchecked.
        if (c_.watchdog) {
            // Renewed by the client: a careful holder looks at its lease before each use and
            // stops at the loss signal (or a deadline that passed without a renewal).
            for (std::int64_t k = 0; k < c_.uses; ++k) {
                observe(l, token_h);
                if (l.lost() || clock_type::now() >= l.valid_until()) break;
                use(++op_, l, token_h, fence);
            }
            observe(l, token_h);
            release(l);
        } else if (clock_type::now() < l.valid_until()) {
            use(++op_, l, token_h, fence);
        }
        if (!c_.watchdog) {
            if (pct(rng_) < c_.expire_pct) {
                // Let it expire: keep the handle (no release) until its validity has passed.
                std::this_thread::sleep_until(l.valid_until() + 1ms);
            } else {
                release(l);
            }
        }
        if (child > 0) reap(child);
        think();
    }

    void release(dlock::lease& l) {
        std::int64_t rop = ++op_;
        {
            auto w = ev(rop, "release", "invoke");
            put(w, now_ns());
        }
        std::error_code ec;
        l.release(ec);
        std::int64_t t_rel = now_ns();
        auto w = ev(rop, "release", !ec ? "ok" : ec == dlock::errc::not_owner ? "fail" : "info");
        if (!ec) w.field("deleted", std::int64_t{1});
        if (ec == dlock::errc::not_owner) w.field("deleted", std::int64_t{0});
        if (ec) w.field("err", ec.message());
        put(w, t_rel);
    }

    /// Think time, so that a Redlock poller (no wake-up message) gets its turn.
    void think() {
        std::uniform_int_distribution<std::int64_t> d(0, c_.think_ms);
        std::this_thread::sleep_for(ms(d(rng_)));
    }

    dlock::acquire_options acquire_opts(clock_type::time_point end, bool fixed_lease) const {
        auto left = std::chrono::duration_cast<ms>(end - clock_type::now());
        dlock::acquire_options ao;
        ao.wait = std::max(ms(0), std::min(ms(c_.wait_ms), left));
        if (fixed_lease) ao.lease = ms(c_.ttl_ms);
        ao.kind = c_.mode == "F" ? dlock::lock_kind::reentrant : dlock::lock_kind::simple;
        if (auto k = dlock::kind_from_name(c_.kind)) ao.kind = *k;
        if (c_.poll_ms > 0)
            ao.retry = dlock::retry_policy{
                static_cast<unsigned>(std::max<std::int64_t>(1, c_.wait_ms / c_.poll_ms + 1)),
                ms(c_.poll_ms), ms(c_.poll_ms / 2)};
        return ao;
    }

    /// Logs the outcome of acquisition `op` (ok with its deadline and fence, fail when
    /// definitely not acquired, info when unknown); true when `l` holds.
    bool log_acquired(std::int64_t op, const dlock::lease& l, const std::error_code& ec,
                      std::int64_t t_done, bool watchdog = false) {
        if (!l) {
            bool definite = !ec || ec == dlock::errc::unavailable ||
                            ec == dlock::errc::out_of_memory || ec == dlock::errc::server_busy;
            auto w = ev(op, "acquire", definite ? "fail" : "info");
            if (ec) w.field("err", ec.message());
            put(w, t_done);
            // A server that is down fails every call at once: do not spin.
            std::this_thread::sleep_for(20ms);
            return false;
        }
        granted_until_ = l.valid_until();
        std::int64_t deadline = ns_of(granted_until_);
        auto w = ev(op, "acquire", "ok");
        w.field("token_h", std::to_string(c_.id) + "-" + std::to_string(op));
        if (auto t = l.token()) w.field("fence", static_cast<std::int64_t>(*t));
        // t_start is not public: derived from valid_until = t_start + TTL - drift, so that
        // the checker's DEADLINE check verifies t_inv <= t_start and t_ok < deadline.
        w.field("deadline", deadline)
            .field("ttl_ms", c_.ttl_ms)
            .field("t_start", deadline - c_.ttl_ms * 1'000'000 + dlock::fault::drift_ns(c_.ttl_ms));
        if (watchdog) w.field("watchdog", true);
        put(w, t_done);
        seen_deadline_ = deadline;
        return true;
    }

    /// --watchdog: logs the loss signal of the hold acquired by `op` when it comes. The
    /// callback runs on the client's I/O thread (or here, if lost already): one write(2), no
    /// blocking, nothing of the worker's thread state but the log and the constant config.
    void watch(dlock::lease& l, std::int64_t op, const std::string& token_h) {
        l.on_lost([this, op, token_h] {
            std::int64_t t = now_ns();
            auto w = ev(op, "lost", "info");
            w.field("token_h", token_h);
            put(w, t);
        });
    }

    /// --watchdog (and PostgreSQL's advisory locks, proven by their session's checks): a
    /// renewal the holder can see. The public API has no renewal hook, so the
    /// holder reads valid_until() where it uses the lease (before each use and write, before
    /// its release) and logs a deadline that moved as an extend ok without an invoke; its
    /// validity was measured from before the renewal was sent, so t_start is derived from it
    /// as for an acquisition. The event's t is when the holder saw it, not when it happened.
    void observe(const dlock::lease& l, const std::string& token_h) {
        if (!c_.watchdog && !lock_.session_proven) return;
        std::int64_t d = ns_of(l.valid_until());
        std::int64_t t = now_ns();
        if (d <= seen_deadline_) return; // not renewed since (or lost: valid_until is 0)
        seen_deadline_ = d;
        auto w = ev(++op_, "extend", "ok");
        w.field("token_h", token_h)
            .field("deadline", d)
            .field("ttl_ms", c_.ttl_ms)
            .field("t_start", d - c_.ttl_ms * 1'000'000 + dlock::fault::drift_ns(c_.ttl_ms))
            .field("observed", true);
        put(w, t);
    }

    /// F36: fork() while holding. The child (worker id + 100, same log: one write(2) per line
    /// with O_APPEND) makes its own client, waits for the lock the parent holds, takes it after
    /// the parent's release, holds briefly, releases and _exit()s without touching anything
    /// of the parent's (whose copies it has, with no I/O thread to renew them).
    pid_t fork_contender() {
        pid_t pid = ::fork();
        if (pid != 0) return pid; // parent, or -1: no child
        int rc = 0;
        try {
            // Worker id + 100; op numbers go on from the parent's (so that (w, op) stays
            // unique across the children of one parent: the parent uses 3 per round).
            c_.id += 100;
            locker k = make_locker();
            std::int64_t op = ++op_;
            auto end = clock_type::now() + ms(3 * c_.ttl_ms);
            {
                auto w = ev(op, "acquire", "invoke");
                put(w, now_ns());
            }
            std::error_code ec;
            dlock::lease l = k.acquire(c_.lock, acquire_opts(end, true), ec);
            if (log_acquired(op, l, ec, now_ns())) {
                std::this_thread::sleep_for(ms(c_.hold_ms / 4));
                release(l);
            }
        } catch (const std::exception& e) {
            std::cerr << "dlock_fault_worker: fork child: " << e.what() << "\n";
            rc = 70;
        }
        std::cerr.flush();
        ::_exit(rc);
    }

    /// Waits for a fork child (bounded: its wait is 3 TTL; kill -9 after 5 TTL + 5 s).
    void reap(pid_t child) {
        auto end = clock_type::now() + ms(5 * c_.ttl_ms + 5000);
        int status = 0;
        while (::waitpid(child, &status, WNOHANG) == 0) {
            if (clock_type::now() >= end) {
                std::cerr << "dlock_fault_worker: fork child " << child << " hung: killed\n";
                ::kill(child, SIGKILL);
                ::waitpid(child, &status, 0);
                return;
            }
            std::this_thread::sleep_for(5ms);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            std::cerr << "dlock_fault_worker: fork child " << child << " failed: status " << status
                      << "\n";
    }

    /// F08: one round of a cancellation/destroy storm, chosen at random: (0) a watchdog lease
    /// dropped while its renewal may be in flight; (1) an async acquisition whose handler drops
    /// the lease at once; (2) an exception thrown in the critical section, the lease released
    /// by unwinding; (3) a throw-away client destroyed while its async acquisition is pending.
    void storm_round(clock_type::time_point end) {
        std::uniform_int_distribution<int> pick(0, 3);
        int what = pick(rng_);
        std::int64_t op = ++op_;
        {
            auto w = ev(op, "acquire", "invoke");
            put(w, now_ns());
        }
        std::error_code ec;
        if (what == 0 || what == 2) {
            dlock::lease l = lock_.acquire(c_.lock, acquire_opts(end, false), ec);
            if (!log_acquired(op, l, ec, now_ns())) return;
            std::uniform_int_distribution<std::int64_t> hold(0, c_.ttl_ms / 2);
            std::this_thread::sleep_for(ms(hold(rng_)));
            auto w = ev(++op_, "release", "invoke");
            put(w, now_ns());
            try {
                dlock::lease gone = std::move(l);
                if (what == 2) throw std::runtime_error("thrown in the critical section");
            } catch (const std::runtime_error&) {
            }
            think();
            return;
        }
        auto r = std::make_shared<async_result>();
        auto deliver = [r](std::error_code e, dlock::lease got) {
            std::lock_guard g(r->m);
            r->ec = e;
            r->l = std::move(got);
            r->done = true;
            r->cv.notify_all();
        };
        std::optional<locker> temp;
        if (what == 3) temp.emplace(make_locker());
        locker& k = what == 3 ? *temp : lock_;
        k.async_acquire(c_.lock, acquire_opts(end, true), deliver);
        if (what == 3) {
            std::uniform_int_distribution<std::int64_t> after(0, 30);
            std::this_thread::sleep_for(ms(after(rng_)));
            temp.reset(); // the client goes while its acquisition is pending (or just done)
        }
        dlock::lease l;
        {
            std::unique_lock g(r->m);
            if (!r->cv.wait_for(g, ms(c_.wait_ms + 2 * c_.command_timeout_ms + 2000),
                                [&] { return r->done; })) {
                auto w = ev(op, "acquire", "info");
                w.field("err", "async acquisition never completed");
                put(w, now_ns());
                std::cerr << "dlock_fault_worker: async acquisition never completed\n";
                return;
            }
            l = std::move(r->l);
            ec = r->ec;
        }
        if (!log_acquired(op, l, ec, now_ns())) return;
        auto w = ev(++op_, "release", "invoke");
        put(w, now_ns());
        l = dlock::lease(); // dropped at once
        think();
    }

    void sleep_in_section() {
        std::uniform_int_distribution<std::int64_t> d(c_.hold_ms / 2, c_.hold_ms);
        std::this_thread::sleep_for(ms(d(rng_)));
    }

    /// F07: extends the lease by --extend-ms in the critical section (the proxy may delay the
    /// request past the deadline: then it must fail, and the holder stops).
    void extend(dlock::lease& l, const std::string& token_h) {
        std::int64_t op = ++op_;
        {
            auto w = ev(op, "extend", "invoke");
            w.field("token_h", token_h);
            put(w, now_ns());
        }
        std::error_code ec;
        l.extend(ms(c_.extend_ms), ec);
        std::int64_t t = now_ns();
        auto w = ev(op, "extend", !ec ? "ok" : ec == dlock::errc::not_owner ? "fail" : "info");
        w.field("token_h", token_h);
        if (!ec) w.field("deadline", ns_of(l.valid_until()));
        if (ec) w.field("err", ec.message());
        put(w, t);
    }

    void use(std::int64_t op, dlock::lease& l, const std::string& token_h,
             std::optional<std::int64_t> fence) {
        auto event = [&](const char* type) {
            auto w = ev(op, "use", type);
            w.field("token_h", token_h);
            if (fence) w.field("fence", *fence);
            return w;
        };
        {
            auto w = event("invoke");
            put(w, now_ns());
        }
        auto finish = [&](const char* type, const std::string& detail, const std::string& value) {
            std::int64_t t = now_ns();
            auto w = event(type);
            if (!value.empty()) w.field("value", value);
            if (!detail.empty()) w.field("err", detail);
            put(w, t);
        };
        auto too_late = [&] {
            observe(l, token_h);
            auto until = l.valid_until();
            if (lock_.session_lease) until = std::min(until, granted_until_);
            return !c_.careless && clock_type::now() + ms(c_.write_margin_ms) >= until;
        };
        if (c_.resource == "none") {
            sleep_in_section();
            if (c_.extend_ms > 0) extend(l, token_h);
            if (too_late()) return finish("fail", "too near the deadline to finish", "");
            return finish("ok", "", "");
        }
        if (c_.resource == "fenced" && !fence)
            return finish("fail", "mode " + c_.mode + " gives no fencing token", "");
        auto fence_u = static_cast<std::uint64_t>(fence.value_or(0));
        auto stamp = [&](std::int64_t before, char sep) {
            std::ostringstream o;
            o << before + 1 << sep << before << sep << c_.id << sep << op << sep
              << fence.value_or(0);
            return o.str();
        };
        std::error_code ec;
        if (c_.resource == "fenced") {
            std::ostringstream mark;
            mark << "open|" << c_.id << "|" << op << "|" << fence_u;
            bool opened = dlock::redis::fenced_set(*res_client_, keys_.open, keys_.fence, fence_u,
                                                   mark.str(), ec);
            if (ec) return finish("info", "open: " + ec.message(), "");
            if (!opened) return finish("fail", "open rejected: stale fence", "");
        }
        std::int64_t before = 0;
        if (c_.resource == "file") {
            before = last_file_value();
            if (before < 0) return finish("fail", "cannot read " + c_.file, "");
        } else {
            std::string_view get[] = {"GET", keys_.value};
            auto v = dlock::redis::command(*res_client_, get, ec);
            if (ec) return finish("fail", "read: " + ec.message(), "");
            if (v.is_error()) return finish("fail", "read: " + v.str, "");
            before = value_after(v.is_null() ? std::string() : v.str);
            if (before < 0) return finish("fail", "unparsable value " + v.str, "");
        }
        sleep_in_section();
        if (c_.extend_ms > 0) extend(l, token_h);
        if (too_late())
            return finish("fail", "too near the deadline for the write (not written)", "");
        if (c_.resource == "file") {
            std::string line = stamp(before, ' ') + "\n";
            int fd = ::open(c_.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0) return finish("fail", "cannot open " + c_.file, "");
            auto n = ::write(fd, line.data(), line.size());
            ::close(fd);
            if (n != static_cast<ssize_t>(line.size())) return finish("info", "short write", "");
            return finish("ok", "", line.substr(0, line.size() - 1));
        }
        std::string value = stamp(before, '|');
        if (c_.resource == "fenced") {
            bool written = dlock::redis::fenced_set(*res_client_, keys_.value, keys_.fence, fence_u,
                                                    value, ec);
            if (ec) return finish("info", "write: " + ec.message(), value);
            return written ? finish("ok", "", value)
                           : finish("fail", "write rejected: stale fence", value);
        }
        std::string_view set[] = {"SET", keys_.value, value};
        auto r = dlock::redis::command(*res_client_, set, ec);
        if (ec) return finish("info", "write: " + ec.message(), value);
        if (!r.is_ok()) return finish("fail", "write: " + r.str, value);
        finish("ok", "", value);
    }

    /// The first field of the file's last line; 0 for an empty or missing file; -1 on error.
    std::int64_t last_file_value() const {
        int fd = ::open(c_.file.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 0;
        std::string text;
        char buf[4096];
        for (int i = 0; i < 4096; ++i) { // at most 16 MiB
            auto n = ::read(fd, buf, sizeof buf);
            if (n <= 0) break;
            text.append(buf, static_cast<std::size_t>(n));
        }
        ::close(fd);
        while (!text.empty() && text.back() == '\n')
            text.pop_back();
        auto nl = text.rfind('\n');
        return value_after(nl == std::string::npos ? text : text.substr(nl + 1));
    }

    config c_;
    event_log log_;
    std::mt19937_64 rng_;
    resource_keys keys_;
    std::int64_t op_ = 0;
    std::int64_t seen_deadline_ = 0;         ///< --watchdog: the last deadline logged for the hold
    clock_type::time_point granted_until_{}; ///< the current hold's valid_until when granted
    locker lock_;
    std::unique_ptr<dlock::client> res_client_;
};

int usage(const std::string& why) {
    std::cerr << "dlock_fault_worker: " << why << "\n"
              << "usage: dlock_fault_worker --log FILE --mode S|F|R (--url URL | --masters U,U,U)\n"
                 "  [--id N] [--lock NAME] [--kind KIND] [--resource none|counter|fenced|file]\n"
                 "  [--resource-url URL] [--file PATH] [--ttl-ms N] [--wait-ms N] [--poll-ms N]\n"
                 "  [--command-timeout-ms N] [--node-timeout-ms N] [--hold-ms N] [--ops N]\n"
                 "  [--duration-ms N] [--seed N] [--expire-pct N] [--think-ms N] [--careless]\n"
                 "  [--write-margin-ms N]\n"
                 "  [--extend-ms N] [--fork-pct N] [--storm] [--linger-ms N]\n"
                 "  [--watchdog [--uses N]]\n";
    return 64;
}

struct number_option {
    const char* name;
    std::int64_t config::*field;
    std::int64_t min;
    std::int64_t max;
};
constexpr std::int64_t any = std::numeric_limits<std::int64_t>::max();
constexpr number_option number_options[] = {
    {"--id", &config::id, 0, any},
    {"--ttl-ms", &config::ttl_ms, 1, any},
    {"--wait-ms", &config::wait_ms, 0, any},
    {"--poll-ms", &config::poll_ms, 0, any},
    {"--command-timeout-ms", &config::command_timeout_ms, 1, any},
    {"--node-timeout-ms", &config::node_timeout_ms, 1, any},
    {"--hold-ms", &config::hold_ms, 0, any},
    {"--write-margin-ms", &config::write_margin_ms, 0, any},
    {"--ops", &config::ops, 0, any},
    {"--duration-ms", &config::duration_ms, 0, any},
    {"--seed", &config::seed, 0, any},
    {"--think-ms", &config::think_ms, 0, any},
    {"--expire-pct", &config::expire_pct, 0, 100},
    {"--extend-ms", &config::extend_ms, 0, any},
    {"--fork-pct", &config::fork_pct, 0, 100},
    {"--linger-ms", &config::linger_ms, 0, any},
    {"--uses", &config::uses, 1, any},
};
constexpr std::pair<const char*, std::string config::*> string_options[] = {
    {"--mode", &config::mode},
    {"--lock", &config::lock},
    {"--url", &config::url},
    {"--resource", &config::resource},
    {"--resource-url", &config::resource_url},
    {"--file", &config::file},
    {"--log", &config::log},
    {"--kind", &config::kind},
};

} // namespace

int main(int argc, char** argv) {
    config c;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--careless" || a == "--storm" || a == "--watchdog") {
            (a == "--careless" ? c.careless : a == "--storm" ? c.storm : c.watchdog) = true;
            continue;
        }
        if (i + 1 >= args.size()) return usage("option " + a + " needs a value");
        const std::string& v = args[++i];
        if (a == "--masters") {
            std::istringstream in(v);
            for (std::string u; std::getline(in, u, ',');)
                c.masters.push_back(u);
            continue;
        }
        bool known = false;
        for (const auto& [name, field] : string_options)
            if (a == name) {
                c.*field = v;
                known = true;
            }
        for (const auto& o : number_options) {
            if (a != o.name) continue;
            known = true;
            try {
                c.*o.field = std::stoll(v);
            } catch (const std::exception&) {
                return usage("bad number for " + a + ": \"" + v + "\"");
            }
            if (c.*o.field < o.min || c.*o.field > o.max)
                return usage("bad value for " + a + ": \"" + v + "\"");
        }
        if (!known) return usage("unknown option " + a);
    }
    if (c.log.empty()) return usage("--log is required");
    if (c.mode != "S" && c.mode != "F" && c.mode != "R") return usage("--mode must be S, F or R");
    if (c.mode == "R" ? c.masters.empty() : c.url.empty())
        return usage(c.mode == "R" ? "mode R needs --masters" : "--url is required");
    if (c.resource != "none" && c.resource != "counter" && c.resource != "fenced" &&
        c.resource != "file")
        return usage("unknown --resource " + c.resource);
    if ((c.resource == "counter" || c.resource == "fenced") && c.resource_url.empty())
        return usage("--resource " + c.resource + " needs --resource-url");
    if (c.resource == "file" && c.file.empty()) return usage("--resource file needs --file");
    if (!c.kind.empty() && !dlock::kind_from_name(c.kind)) return usage("unknown --kind " + c.kind);
    return worker(std::move(c)).run();
}
