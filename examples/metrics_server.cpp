// metrics_server: serves a client's metrics at /metrics (prometheus-cpp's Exposer) while four
// threads take turns on one lock, and prints the library's warnings through a log sink.
// Usage: example_metrics_server [--listen 127.0.0.1:9464] [--seconds N] redis://127.0.0.1:6379
//   --listen   address to serve on (default 127.0.0.1:9464; port 0 picks a free one)
//   --seconds  how long to run (default 0: until killed)
//   then:      curl http://127.0.0.1:9464/metrics
#include <dlock/dlock.hpp>
#include <dlock/prometheus.hpp>

#include <atomic>
#include <iostream>
#include <mutex>
#include <prometheus/exposer.h>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    std::string listen = "127.0.0.1:9464", url = "redis://127.0.0.1:6379";
    long seconds = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--listen" && i + 1 < argc)
            listen = argv[++i];
        else if (a == "--seconds" && i + 1 < argc)
            seconds = std::stol(argv[++i]);
        else
            url = a;
    }

    auto options = dlock::parse_url(url);
    std::mutex out_mu;
    options.log.sink = [&](const dlock::log_record& r) { // the library never prints by itself
        std::lock_guard lk(out_mu);
        std::clog << "dlock " << dlock::to_string(r.level) << ": " << r.message;
        for (const auto& f : r.fields)
            std::clog << ' ' << f.key << '=' << f.value;
        std::clog << '\n';
    };
    dlock::client redis(options);

    prometheus::Exposer exposer(listen);
    auto metrics = dlock::make_prometheus_collectable(redis, {{"service", "example"}});
    exposer.RegisterCollectable(metrics);
    std::cout << "serving http://" << listen.substr(0, listen.rfind(':')) << ':'
              << exposer.GetListeningPorts().at(0) << "/metrics" << std::endl;

    std::atomic<bool> stop{false};
    std::atomic<long> turns{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w)
        workers.emplace_back([&] {
            dlock::mutex m = redis.make_mutex("example:metrics");
            while (!stop) {
                if (!m.try_lock_for(500ms)) continue;
                ++turns; // the critical section
                m.unlock();
            }
        });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (seconds == 0 || std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(100ms);
    stop = true;
    for (auto& t : workers)
        t.join();

    const auto m = redis.metrics();
    const auto k = m.kind("reentrant");
    std::cout << turns << " turns; acquired " << k.acquired << ", p(wait <= 1 ms) "
              << m.wait_time.fraction_at_most(0.001) << ", hand-overs " << m.handoff_handover.count
              << ", wakes " << m.handoff_wake.count << '\n';
    return turns > 0 && k.acquired == static_cast<std::uint64_t>(turns) ? 0 : 1;
}
