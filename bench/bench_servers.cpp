// bench_servers: the servers of bench/backend_bench.sh, started by the tests' RAII fixtures
// (tests/support/zk_fixture, pg_fixture) so that a benchmark runs them exactly as the tests do.
//
//   bench_servers zk|zk3|pg|etcd|redis
//
// redis: a private redis-server (the tests' redis_fixture); zk:  a standalone ZooKeeper server;
// zk3: a 3-node ensemble (tickTime 2000 ms, ZooKeeper's sample value, for both; its URL carries
// the ensemble's server_lag and the longest session it allows); pg: a private
// PostgreSQL (initdb in a temporary directory); etcd: one etcd member (the tests' etcd_fixture).
// Prints the URL on one line (zk://..., postgresql://..., etcd://...) and, for ZooKeeper, the
// connect string Curator takes on a second line ("connect: HOST:PORT,..."), then runs until
// SIGTERM, SIGINT or SIGHUP, when the fixture stops the servers and removes their directories. The
// servers are children of this process and inherit its CPU affinity (run it under `taskset -c 1`).
#include "etcd_fixture.hpp"
#include "pg_fixture.hpp"
#include "redis_fixture.hpp"
#include "zk_fixture.hpp"

#include <csignal>
#include <iostream>
#include <memory>
#include <string>

namespace {

/// Blocks until one of the stop signals arrives (they are blocked first, so none is lost).
void wait_for_stop(const sigset_t& set) {
    int sig = 0;
    ::sigwait(&set, &sig);
}

std::string connect_string(const std::string& url) {
    auto s = url.substr(url.find("://") + 3);
    return s.substr(0, s.find_first_of("/?"));
}

} // namespace

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    sigset_t set;
    ::sigemptyset(&set);
    for (const int s : {SIGTERM, SIGINT, SIGHUP})
        ::sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        if (what == "zk" || what == "zk3") {
            if (!dlock::test::zookeeper_available()) {
                std::cerr << "bench_servers: java or the ZooKeeper jars not found\n";
                return 77;
            }
            const dlock::test::zk_options opts{.tick_ms = 2000};
            std::unique_ptr<dlock::test::zk_server> one;
            std::unique_ptr<dlock::test::zk_ensemble> three;
            std::string url;
            if (what == "zk") {
                one = std::make_unique<dlock::test::zk_server>(opts);
                url = one->url();
            } else {
                three = std::make_unique<dlock::test::zk_ensemble>(opts);
                // The longest session the servers allow (20 x tickTime, as Curator's 60 s
                // default is clamped to) and the ensemble's server_lag, which it must exceed
                // 1.5 x: an ensemble's URL without a lag is refused.
                url = three->url() + "?session_timeout=" + std::to_string(20 * opts.tick_ms) +
                      "&server_lag=" + std::to_string(three->server_lag().count());
            }
            std::cout << url << "\nconnect: " << connect_string(url) << std::endl;
            wait_for_stop(set);
            return 0;
        }
        if (what == "etcd") {
            if (!dlock::test::etcd_available()) {
                std::cerr << "bench_servers: etcd or etcdctl not installed\n";
                return 77;
            }
            dlock::test::etcd_cluster cluster(1);
            std::cout << cluster.url() << std::endl;
            wait_for_stop(set);
            return 0;
        }
        if (what == "redis") {
            if (!dlock::test::redis_available()) {
                std::cerr << "bench_servers: redis-server not installed\n";
                return 77;
            }
            dlock::test::redis_server server;
            std::cout << server.url() << std::endl;
            wait_for_stop(set);
            return 0;
        }
        if (what == "pg") {
            if (!dlock::test::postgres_available()) {
                std::cerr << "bench_servers: PostgreSQL binaries not found\n";
                return 77;
            }
            // PostgreSQL's default max_connections (the tests' fixture allows 200): what a
            // client meets on a stock server (issue 25: 1,000 held locks within 100).
            dlock::test::pg_server server({"max_connections=100"});
            std::cout << server.url() << std::endl;
            wait_for_stop(set);
            return 0;
        }
    } catch (const std::exception& e) {
        std::cerr << "bench_servers: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: bench_servers zk|zk3|pg|etcd|redis\n";
    return 64;
}
