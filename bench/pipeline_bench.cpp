// pipeline_bench: throughput of ONE dlock connection for PING or EVALSHA from N concurrent
// callers, to compare with redis-benchmark at the same command, concurrency and pipeline.
//
//   pipeline_bench URL PING|EVALSHA sync|async CALLERS SECONDS
// sync:  CALLERS threads each calling dlock::redis::command() in a loop (blocking callers);
// async: CALLERS outstanding async_command() chains (each completion issues the next).
// EVALSHA runs the compare-and-delete release script of the peers' raw suite on a missing key.
#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr std::string_view release_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else "
    "return 0 end";

struct chain : std::enable_shared_from_this<chain> {
    dlock::client* c = nullptr;
    std::vector<std::string> cmd;
    std::atomic<std::uint64_t>* ops = nullptr;
    std::atomic<bool>* stop = nullptr;
    void next() {
        if (stop->load(std::memory_order_relaxed)) return;
        dlock::redis::async_command(
            *c, cmd, [self = shared_from_this()](std::error_code ec, dlock::resp3::value) {
                if (ec) return;
                self->ops->fetch_add(1, std::memory_order_relaxed);
                self->next();
            });
    }
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        std::cerr << "usage: pipeline_bench URL PING|EVALSHA sync|async CALLERS SECONDS\n";
        return 64;
    }
    dlock::client c(argv[1]);
    const std::string what = argv[2];
    const bool async = std::string(argv[3]) == "async";
    const int callers = std::stoi(argv[4]);
    const double seconds = std::stod(argv[5]);
    std::vector<std::string> cmd{"PING"};
    if (what == "EVALSHA") {
        const auto sha = dlock::redis::command(c, {"SCRIPT", "LOAD", release_script}).str;
        cmd = {"EVALSHA", sha, "1", "pipeline-bench:missing", "token"};
    }
    std::atomic<std::uint64_t> ops{0};
    std::atomic<bool> stop{false};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> lat;
    if (async) {
        std::vector<std::shared_ptr<chain>> chains;
        for (int i = 0; i < callers; ++i) {
            auto ch = std::make_shared<chain>();
            ch->c = &c;
            ch->cmd = cmd;
            ch->ops = &ops;
            ch->stop = &stop;
            chains.push_back(ch);
            ch->next();
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        stop = true;
    } else {
        std::vector<std::thread> ts;
        std::vector<std::vector<double>> per(static_cast<std::size_t>(callers));
        const std::vector<std::string_view> views(cmd.begin(), cmd.end());
        for (int i = 0; i < callers; ++i)
            ts.emplace_back([&, i] {
                auto& l = per[static_cast<std::size_t>(i)];
                while (!stop.load(std::memory_order_relaxed)) {
                    const auto a = std::chrono::steady_clock::now();
                    dlock::redis::command(c, views);
                    l.push_back(std::chrono::duration<double, std::micro>(
                                    std::chrono::steady_clock::now() - a)
                                    .count());
                    ops.fetch_add(1, std::memory_order_relaxed);
                }
            });
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        stop = true;
        for (auto& t : ts)
            t.join();
        for (auto& l : per)
            lat.insert(lat.end(), l.begin(), l.end());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(lat.begin(), lat.end());
    const auto pct = [&](double p) {
        return lat.empty() ? 0.0
                           : lat[static_cast<std::size_t>(p * static_cast<double>(lat.size() - 1))];
    };
    std::cout << "{\"command\":\"" << what << "\",\"mode\":\"" << (async ? "async" : "sync")
              << "\",\"callers\":" << callers << ",\"ops_per_s\":" << static_cast<double>(ops) / s
              << ",\"p50_us\":" << pct(0.5) << ",\"p99_us\":" << pct(0.99) << "}\n";
    // Let outstanding async completions drain before the client goes away.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return 0;
}
