// dlock_fault_proxy: the fault suite's TCP fault proxy (reliability.md §7.1; this machine has no
// netem, so delays, held and dropped replies come from here). One process serves several
// routes, one per (worker, server) pair; each route listens on a free 127.0.0.1 port and
// forwards to one target port. The test process steers it over a line-based control socket.
//
//   dlock_fault_proxy --route NAME=TARGET_PORT[/zk]... [--log FILE] [--fwd-log FILE]
//                     [--max-seconds N]
//   stdout: "control PORT", then "route NAME PORT" per route, then "ready".
//   A route's requests are RESP commands, or ZooKeeper requests with /zk (zk_request.hpp: the
//   operation, e.g. CREATE2, as `cmd`, its path as the argument `arg` matches).
//
// Control commands (one line each, answered by one line "ok ..." or "err ..."):
//   rule ROUTE FAULT [ARG] [cmd A|B...] [arg SUBSTR] [count N]
//       continuous faults (every byte):  pass | delay-up MS | delay-down MS | drip BYTES_PER_S
//                                        | blackhole
//       triggered by a matching request: delay-req MS (that request waits MS) | hold (replies
//       of that connection held until `release`) | drop (request forwarded, every reply of that
//       connection discarded) | reset (request forwarded, then the client connection is reset)
//       | stop PID (SIGSTOP PID, wait until every thread of it is stopped, then forward the
//       request: a reply can only be read after SIGCONT)
//       `cmd` matches the command name (case-insensitive alternatives), `arg` a substring of
//       any argument; `count` triggers at most N times (default unlimited).
//   release ROUTE   lets held replies go
//   clear ROUTE     back to pass; held replies go; connections whose bytes were discarded
//                   (blackhole, drop) are reset so that the client reconnects
//   stats ROUTE     "ok sessions=N triggered=N"
//   quit
// Every trigger is logged to --log as a nemesis event of the checker's format. The process exits
// after --max-seconds (default 600) whatever happens.

#include "checker/history.hpp"
#include "resp_request.hpp"
#include "zk_request.hpp"

#include <asio.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using dlock::fault::jsonl_writer;

constexpr std::size_t max_buffered = 64 * 1024 * 1024;
constexpr std::size_t read_size = 16 * 1024;

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               clock_type::now().time_since_epoch())
        .count();
}

int log_fd = -1;
int fwd_fd = -1;

/// --fwd-log: when each lock request (SET, EVAL, EVALSHA) reached the proxy, so that the
/// orchestrator can check that a lease's validity was measured from before its send.
void log_forward(const std::string& route, const dlock::fault::resp_request& req) {
    if (fwd_fd < 0 || (req.command != "SET" && req.command != "EVAL" && req.command != "EVALSHA"))
        return;
    bool fence = std::any_of(req.args.begin(), req.args.end(), [](const std::string& a) {
        return a.find("redisson_lock_token") != std::string::npos;
    });
    jsonl_writer w;
    std::string line = w.field("route", route)
                           .field("cmd", req.command)
                           .field("fence_key", fence)
                           .field("t", now_ns())
                           .line();
    (void)!::write(fwd_fd, line.data(), line.size());
}

void log_event(const std::string& what, const std::string& route, const std::string& value) {
    if (log_fd < 0) return;
    jsonl_writer w;
    std::string line = w.field("nemesis", "proxy-" + what)
                           .field("target", route)
                           .field("value", value)
                           .field("t", now_ns())
                           .line();
    // One write per line on an O_APPEND descriptor: a line is never torn.
    (void)!::write(log_fd, line.data(), line.size());
}

enum class fault {
    pass,
    delay_up,
    delay_down,
    drip,
    blackhole,
    delay_req,
    hold,
    drop,
    reset,
    stop
};

struct fault_name {
    const char* name;
    fault f;
    bool needs_arg;
};
constexpr fault_name fault_names[] = {
    {"pass", fault::pass, false},
    {"delay-up", fault::delay_up, true},
    {"delay-down", fault::delay_down, true},
    {"drip", fault::drip, true},
    {"blackhole", fault::blackhole, false},
    {"delay-req", fault::delay_req, true},
    {"hold", fault::hold, false},
    {"drop", fault::drop, false},
    {"reset", fault::reset, false},
    {"stop", fault::stop, true},
};

struct rule {
    fault what = fault::pass;
    std::int64_t arg = 0;
    std::vector<std::string> cmds; // empty: any command
    std::string arg_sub;           // empty: any arguments
    std::int64_t count = -1;       // triggers left; -1: unlimited
    std::int64_t triggered = 0;

    bool triggered_kind() const {
        return what == fault::delay_req || what == fault::hold || what == fault::drop ||
               what == fault::reset || what == fault::stop;
    }
    bool matches(const dlock::fault::resp_request& r) const {
        if (!triggered_kind() || count == 0) return false;
        if (!cmds.empty() && std::find(cmds.begin(), cmds.end(), r.command) == cmds.end())
            return false;
        if (!arg_sub.empty() &&
            std::none_of(r.args.begin(), r.args.end(), [&](const std::string& a) {
                return a.find(arg_sub) != std::string::npos;
            }))
            return false;
        return true;
    }
};

class session;

struct route {
    std::string name;
    tcp::acceptor acceptor;
    tcp::endpoint target;
    bool zk = false; ///< ZooKeeper requests (zk_request.hpp), not RESP
    rule r;
    std::vector<std::weak_ptr<session>> sessions;

    route(asio::io_context& io, std::string n, std::uint16_t target_port)
        : name(std::move(n))
        , acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0))
        , target(asio::ip::make_address("127.0.0.1"), target_port) {}
};

enum class after { nothing, reset };

/// Whether every thread of `pid` is stopped (state T or t in /proc/PID/task/TID/stat).
bool all_threads_stopped(std::int64_t pid) {
    std::error_code ec;
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
    std::size_t seen = 0;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
        std::ifstream f(t.path() / "stat");
        std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        const auto paren = stat.rfind(')');
        if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
        const char state = stat[paren + 2];
        if (state != 'T' && state != 't') return false;
        ++seen;
    }
    return !ec && seen > 0;
}

/// `stop PID`: SIGSTOP, then wait (at most 2 s) until every thread has stopped. A group stop
/// reaches the threads one by one: forwarded at once, the reply could come back and be read
/// by a thread not stopped yet (a loaded machine, F03 S seed 2: the grant was read, checked
/// and returned before the stop, and the pause fell after the acquisition instead of
/// between its request and its reply).
void stop_process(std::int64_t pid) {
    ::kill(static_cast<pid_t>(pid), SIGSTOP);
    const auto end = clock_type::now() + std::chrono::seconds(2);
    while (!all_threads_stopped(pid) && clock_type::now() < end)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
}

struct chunk {
    clock_type::time_point due;
    std::string data;
    after then = after::nothing;
};

struct pipe_state {
    std::deque<chunk> q;
    bool busy = false; // writing or waiting for a due time
    bool held = false;
    clock_type::time_point next_piece{}; // drip pacing
    std::unique_ptr<asio::steady_timer> timer;
};

class session : public std::enable_shared_from_this<session> {
public:
    session(asio::io_context& io, route& rt, tcp::socket client)
        : rt_(rt)
        , client_(std::move(client))
        , server_(io) {
        up_.timer = std::make_unique<asio::steady_timer>(io);
        down_.timer = std::make_unique<asio::steady_timer>(io);
    }

    void start() {
        read_client();
        if (rt_.r.what == fault::blackhole) {
            broken_ = true; // never connected: the client's bytes go nowhere
            return;
        }
        auto self = shared_from_this();
        server_.async_connect(rt_.target, [self](std::error_code ec) {
            if (ec) return self->close();
            self->connected_ = true;
            self->read_server();
            self->kick(true);
        });
    }

    void release() {
        down_.held = false;
        kick(false);
    }

    /// Healing: connections whose bytes were discarded cannot be resynchronised.
    void heal() {
        release();
        if (broken_) reset_client();
    }

    void close() {
        if (closed_) return;
        closed_ = true;
        std::error_code ignored;
        up_.timer->cancel();
        down_.timer->cancel();
        client_.close(ignored);
        server_.close(ignored);
    }

private:
    void reset_client() {
        std::error_code ignored;
        client_.set_option(asio::socket_base::linger(true, 0), ignored);
        close();
    }

    void read_client() {
        auto self = shared_from_this();
        client_.async_read_some(asio::buffer(cbuf_), [self](std::error_code ec, std::size_t n) {
            if (ec && self->client_reset_) return; // the server side ends on its own
            if (ec && self->connected_ && !self->up_.q.empty()) {
                // Requests still in flight (delay-req) reach the server after the client left,
                // as bytes in a real network would; the session ends once they are written.
                self->client_gone_ = true;
                return;
            }
            if (ec) return self->close();
            self->on_client_bytes(std::string_view(self->cbuf_.data(), n));
            if (!self->closed_) self->read_client();
        });
    }

    void read_server() {
        auto self = shared_from_this();
        server_.async_read_some(asio::buffer(sbuf_), [self](std::error_code ec, std::size_t n) {
            if (ec) return self->close();
            self->on_server_bytes(std::string_view(self->sbuf_.data(), n));
            if (!self->closed_) self->read_server();
        });
    }

    void on_client_bytes(std::string_view bytes) {
        if (rt_.r.what == fault::blackhole || broken_) {
            broken_ = true;
            return;
        }
        pending_.append(bytes);
        if (pending_.size() > max_buffered) return close();
        // Bounded: each pass consumes at least one byte of pending_ or stops.
        while (!pending_.empty()) {
            dlock::fault::resp_request req;
            auto st = rt_.zk ? dlock::fault::split_zk_request(pending_, zk_first_, req)
                             : dlock::fault::split_request(pending_, req);
            if (st == dlock::fault::split_status::complete) zk_first_ = false;
            if (st == dlock::fault::split_status::partial) break;
            if (st == dlock::fault::split_status::not_resp) {
                std::string raw;
                raw.swap(pending_);
                enqueue_up(std::move(raw), req, false);
                break;
            }
            std::string one = pending_.substr(0, req.size);
            pending_.erase(0, req.size);
            enqueue_up(std::move(one), req, true);
        }
        kick(true);
    }

    void enqueue_up(std::string bytes, const dlock::fault::resp_request& req, bool parsed) {
        rule& r = rt_.r;
        chunk c;
        c.due = clock_type::now();
        c.data = std::move(bytes);
        if (r.what == fault::delay_up) c.due += std::chrono::milliseconds(r.arg);
        if (parsed) log_forward(rt_.name, req);
        if (parsed && r.matches(req)) {
            if (r.count > 0) --r.count;
            ++r.triggered;
            std::string what;
            for (const auto& f : fault_names)
                if (f.f == r.what) what = f.name;
            log_event(what, rt_.name, req.command);
            switch (r.what) {
            case fault::delay_req:
                c.due += std::chrono::milliseconds(r.arg);
                break;
            case fault::hold:
                down_.held = true;
                break;
            case fault::drop:
                dropping_ = true;
                break;
            case fault::reset:
                c.then = after::reset;
                break;
            case fault::stop:
                if (r.arg > 1) {
                    stop_process(r.arg);
                    log_event("stopped", rt_.name, std::to_string(r.arg));
                }
                break;
            default:
                break;
            }
        }
        // A request never overtakes an earlier one.
        if (!up_.q.empty()) c.due = std::max(c.due, up_.q.back().due);
        up_.q.push_back(std::move(c));
    }

    void on_server_bytes(std::string_view bytes) {
        if (client_reset_ || client_gone_) return;
        if (rt_.r.what == fault::blackhole || dropping_) {
            broken_ = true;
            return;
        }
        chunk c;
        c.due = clock_type::now();
        c.data = std::string(bytes);
        if (rt_.r.what == fault::delay_down) c.due += std::chrono::milliseconds(rt_.r.arg);
        if (!down_.q.empty()) c.due = std::max(c.due, down_.q.back().due);
        std::size_t queued = 0;
        for (const auto& x : down_.q)
            queued += x.data.size();
        if (queued > max_buffered) return close();
        down_.q.push_back(std::move(c));
        kick(false);
    }

    void kick(bool up) {
        pipe_state& p = up ? up_ : down_;
        if (closed_ || p.busy || p.q.empty()) return;
        if (up && !connected_) return;
        if (!up && p.held) return;
        chunk& c = p.q.front();
        auto due = std::max(c.due, p.next_piece);
        auto self = shared_from_this();
        if (due > clock_type::now()) {
            p.busy = true;
            p.timer->expires_at(due);
            p.timer->async_wait([self, up](std::error_code ec) {
                pipe_state& pp = up ? self->up_ : self->down_;
                pp.busy = false;
                if (!ec) self->kick(up);
            });
            return;
        }
        std::size_t n = c.data.size();
        bool piece = false;
        if (!up && rt_.r.what == fault::drip) {
            // rate/20 bytes every 50 ms (at least one byte)
            n = std::min<std::size_t>(
                n, static_cast<std::size_t>(std::max<std::int64_t>(1, rt_.r.arg / 20)));
            piece = true;
        }
        p.busy = true;
        tcp::socket& sock = up ? server_ : client_;
        asio::async_write(sock, asio::buffer(c.data.data(), n),
                          [self, up, n, piece](std::error_code ec, std::size_t) {
                              pipe_state& pp = up ? self->up_ : self->down_;
                              pp.busy = false;
                              if (ec || self->closed_) return self->close();
                              chunk& front = pp.q.front();
                              front.data.erase(0, n);
                              if (piece)
                                  pp.next_piece = clock_type::now() + std::chrono::milliseconds(50);
                              if (front.data.empty()) {
                                  after then = front.then;
                                  pp.q.pop_front();
                                  if (then == after::reset) {
                                      // The client sees a reset; the server gets the request and
                                      // then an orderly end of stream, and the session ends when
                                      // the server closes.
                                      std::error_code ignored;
                                      self->server_.shutdown(tcp::socket::shutdown_send, ignored);
                                      self->client_reset_ = true;
                                      self->broken_ = true;
                                      self->client_.set_option(asio::socket_base::linger(true, 0),
                                                               ignored);
                                      self->client_.close(ignored);
                                      return;
                                  }
                              }
                              if (up && self->client_gone_ && pp.q.empty()) return self->close();
                              self->kick(up);
                          });
    }

    route& rt_;
    tcp::socket client_;
    tcp::socket server_;
    bool connected_ = false;
    bool closed_ = false;
    bool zk_first_ = true; // a ZooKeeper route: the connection's first frame is CONNECT
    bool dropping_ = false;
    bool broken_ = false;       // some bytes of this connection were discarded
    bool client_reset_ = false; // the client side was reset after a request (fault reset)
    bool client_gone_ = false;  // the client closed; delayed requests are still being sent
    std::string pending_;
    pipe_state up_;
    pipe_state down_;
    std::array<char, read_size> cbuf_{};
    std::array<char, read_size> sbuf_{};
};

class proxy {
public:
    explicit proxy(asio::io_context& io)
        : io_(io)
        , control_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}

    void add_route(const std::string& name, std::uint16_t target, bool zk) {
        routes_[name] = std::make_unique<route>(io_, name, target);
        routes_[name]->zk = zk;
    }

    void start() {
        std::cout << "control " << control_.local_endpoint().port() << "\n";
        for (auto& [name, rt] : routes_) {
            std::cout << "route " << name << " " << rt->acceptor.local_endpoint().port() << "\n";
            accept(*rt);
        }
        std::cout << "ready" << std::endl;
        accept_control();
    }

private:
    void accept(route& rt) {
        rt.acceptor.async_accept([this, &rt](std::error_code ec, tcp::socket s) {
            if (ec) return;
            std::error_code ignored;
            s.set_option(tcp::no_delay(true), ignored);
            auto sess = std::make_shared<session>(io_, rt, std::move(s));
            std::erase_if(rt.sessions, [](const auto& w) { return w.expired(); });
            rt.sessions.push_back(sess);
            sess->start();
            accept(rt);
        });
    }

    struct control_conn {
        explicit control_conn(tcp::socket s)
            : sock(std::move(s)) {}
        tcp::socket sock;
        asio::streambuf buf{4096};
    };

    void accept_control() {
        control_.async_accept([this](std::error_code ec, tcp::socket s) {
            if (ec) return;
            auto c = std::make_shared<control_conn>(std::move(s));
            read_control(c);
            accept_control();
        });
    }

    void read_control(std::shared_ptr<control_conn> c) {
        asio::async_read_until(c->sock, c->buf, '\n', [this, c](std::error_code ec, std::size_t) {
            if (ec) return;
            std::istream in(&c->buf);
            std::string line;
            std::getline(in, line);
            auto reply = std::make_shared<std::string>(execute(line) + "\n");
            asio::async_write(c->sock, asio::buffer(*reply),
                              [this, c, reply](std::error_code wec, std::size_t) {
                                  if (!wec && !quitting_) read_control(c);
                                  if (quitting_) io_.stop();
                              });
        });
    }

    route* find(const std::string& name) {
        auto it = routes_.find(name);
        return it == routes_.end() ? nullptr : it->second.get();
    }

    template <class F>
    void each_session(route& rt, F f) {
        for (auto& w : rt.sessions)
            if (auto s = w.lock()) f(*s);
    }

    std::string execute(const std::string& line) {
        std::istringstream in(line);
        std::string verb, name;
        in >> verb >> name;
        if (verb == "quit") {
            quitting_ = true;
            return "ok bye";
        }
        route* rt = find(name);
        if (!rt) return "err unknown route \"" + name + "\"";
        if (verb == "release") {
            each_session(*rt, [](session& s) { s.release(); });
            log_event("release", name, "");
            return "ok";
        }
        if (verb == "clear") {
            rt->r = rule{};
            each_session(*rt, [](session& s) { s.heal(); });
            log_event("clear", name, "");
            return "ok";
        }
        if (verb == "stats") {
            std::size_t live = 0;
            each_session(*rt, [&](session&) { ++live; });
            return "ok sessions=" + std::to_string(live) +
                   " triggered=" + std::to_string(rt->r.triggered);
        }
        if (verb != "rule") return "err unknown command \"" + verb + "\"";
        std::string fname;
        in >> fname;
        rule r;
        const fault_name* fn = nullptr;
        for (const auto& f : fault_names)
            if (fname == f.name) fn = &f;
        if (!fn) return "err unknown fault \"" + fname + "\"";
        r.what = fn->f;
        if (fn->needs_arg && !(in >> r.arg && r.arg >= 0))
            return "err fault " + fname + " needs a non-negative number";
        std::string key;
        while (in >> key) {
            std::string v;
            if (!(in >> v)) return "err " + key + " needs a value";
            if (key == "cmd") {
                std::string alt;
                std::istringstream alts(v);
                while (std::getline(alts, alt, '|')) {
                    std::transform(alt.begin(), alt.end(), alt.begin(), [](unsigned char ch) {
                        return static_cast<char>(std::toupper(ch));
                    });
                    r.cmds.push_back(alt);
                }
            } else if (key == "arg") {
                r.arg_sub = v;
            } else if (key == "count") {
                try {
                    r.count = std::stoll(v);
                } catch (const std::exception&) {
                    return "err bad count \"" + v + "\"";
                }
            } else {
                return "err unknown option \"" + key + "\"";
            }
        }
        rt->r = r;
        log_event("rule", name, line.substr(5));
        return "ok";
    }

    asio::io_context& io_;
    tcp::acceptor control_;
    std::map<std::string, std::unique_ptr<route>> routes_;
    bool quitting_ = false;
};

int usage(const std::string& why) {
    std::cerr << "dlock_fault_proxy: " << why << "\n"
              << "usage: dlock_fault_proxy --route NAME=TARGET_PORT[/zk]... [--log FILE]"
                 " [--fwd-log FILE] [--max-seconds N]\n";
    return 64;
}

int run(int argc, char** argv) {
    asio::io_context io;
    proxy p(io);
    long max_seconds = 600;
    int routes = 0;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (i + 1 >= args.size()) return usage("option " + a + " needs a value");
        const std::string& v = args[++i];
        try {
            if (a == "--route") {
                auto eq = v.find('=');
                if (eq == std::string::npos || eq == 0) return usage("bad --route \"" + v + "\"");
                std::string target = v.substr(eq + 1);
                const bool zk = target.ends_with("/zk");
                if (zk) target.resize(target.size() - 3);
                long port = std::stol(target);
                if (port <= 0 || port > 65535) return usage("bad port in \"" + v + "\"");
                p.add_route(v.substr(0, eq), static_cast<std::uint16_t>(port), zk);
                ++routes;
            } else if (a == "--log") {
                log_fd = ::open(v.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (log_fd < 0) return usage("cannot open " + v);
            } else if (a == "--fwd-log") {
                fwd_fd = ::open(v.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fwd_fd < 0) return usage("cannot open " + v);
            } else if (a == "--max-seconds") {
                max_seconds = std::stol(v);
                if (max_seconds <= 0) return usage("--max-seconds must be positive");
            } else {
                return usage("unknown option " + a);
            }
        } catch (const std::exception&) {
            return usage("bad number in \"" + v + "\"");
        }
    }
    if (routes == 0) return usage("no --route");
    asio::steady_timer life(io, std::chrono::seconds(max_seconds));
    life.async_wait([&](std::error_code ec) {
        if (!ec) io.stop();
    });
    p.start();
    io.run();
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "dlock_fault_proxy: " << e.what() << "\n";
        return 70;
    }
}
