#include "zk_floor.hpp"

#include "scenarios.hpp"

#include <iostream>

#ifdef DLOCK_WITH_ZOOKEEPER
#include <algorithm>
#include <poll.h>
#include <string_view>
#include <vector>
#include <zookeeper/zookeeper.h>
#endif

namespace dlock::bench {

#ifdef DLOCK_WITH_ZOOKEEPER
namespace {
using clock = std::chrono::steady_clock;

struct chain {
    zhandle_t* zh = nullptr;
    std::string dir{};
    std::string node{};
    clock::time_point start{};
    std::vector<double>* pairs = nullptr;
    const clock::time_point* until = nullptr;
    int failed = 0;
    bool done = false;
};

void start_pair(chain& c);

void on_deleted(int rc, const void* d) {
    auto& c = *static_cast<chain*>(const_cast<void*>(d));
    if (rc != ZOK) ++c.failed;
    c.pairs->push_back(std::chrono::duration<double, std::micro>(clock::now() - c.start).count());
    if (clock::now() < *c.until && c.failed == 0)
        start_pair(c);
    else
        c.done = true;
}

void on_children(int rc, const String_vector*, const Stat*, const void* d) {
    auto& c = *static_cast<chain*>(const_cast<void*>(d));
    if (rc != ZOK) ++c.failed;
    if (zoo_adelete(c.zh, c.node.c_str(), -1, &on_deleted, &c) != ZOK) {
        ++c.failed;
        c.done = true;
    }
}

void on_created(int rc, const char* path, const Stat*, const void* d) {
    auto& c = *static_cast<chain*>(const_cast<void*>(d));
    if (rc != ZOK || path == nullptr) {
        ++c.failed;
        c.done = true;
        return;
    }
    c.node = path;
    if (zoo_aget_children2(c.zh, c.dir.c_str(), 0, &on_children, &c) != ZOK) {
        ++c.failed;
        c.done = true;
    }
}

void start_pair(chain& c) {
    c.start = clock::now();
    // Curator's protected name: a 36-character id before "-lock-" (the same request size).
    const std::string prefix = c.dir + "/_c_00000000-0000-0000-0000-000000000000-lock-";
    if (zoo_acreate2(c.zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                     &on_created, &c) != ZOK) {
        ++c.failed;
        c.done = true;
    }
}

void on_parent(int, const char*, const void* d) {
    *static_cast<bool*>(const_cast<void*>(d)) = true; // made, or there already
}

void ignore_events(zhandle_t*, int, int, const char*, void*) {}
void ignore_log(const char*) {}

/// One turn of the C client's loop, as its own command-line client runs it.
void turn(zhandle_t* zh) {
    int fd = -1;
    int interest = 0;
    timeval tv{};
    if (zookeeper_interest(zh, &fd, &interest, &tv) == ZINVALIDSTATE) return;
    pollfd p{fd, 0, 0};
    if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
    const int ms = static_cast<int>(std::min<long>(tv.tv_sec * 1000L + tv.tv_usec / 1000, 100));
    int events = 0;
    if (fd >= 0 && ::poll(&p, 1, ms) > 0) {
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
        if (p.revents & (POLLOUT | POLLHUP | POLLERR)) events |= ZOOKEEPER_WRITE;
    }
    zookeeper_process(zh, events);
}
} // namespace

int zk_floor(const std::string& url, unsigned workers, std::chrono::milliseconds d) {
    constexpr std::string_view scheme = "zk://";
    if (url.compare(0, scheme.size(), scheme) != 0) {
        std::cerr << "W: an etcd:// or zk:// URL\n";
        return 64;
    }
    auto rest = url.substr(scheme.size());
    const auto end = rest.find_first_of("/?");
    const std::string hosts = rest.substr(0, end);
    zhandle_t* zh =
        zookeeper_init2(hosts.c_str(), &ignore_events, 10000, nullptr, nullptr, 0, &ignore_log);
    if (zh == nullptr) {
        std::cerr << "W: cannot open a session to " << hosts << "\n";
        return 69;
    }
    const auto connect_by = clock::now() + std::chrono::seconds(10);
    while (zoo_state(zh) != ZOO_CONNECTED_STATE && clock::now() < connect_by)
        turn(zh);
    bool made = false;
    zoo_acreate(zh, "/dlock-floor", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, &on_parent, &made);
    while (!made && clock::now() < connect_by)
        turn(zh);
    std::vector<chain> chains(workers == 0 ? 1 : workers);
    std::vector<double> pairs;
    for (std::size_t i = 0; i < chains.size(); ++i) {
        made = false;
        chains[i].dir = "/dlock-floor/k" + std::to_string(i);
        zoo_acreate(zh, chains[i].dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                    &on_parent, &made);
        while (!made && clock::now() < connect_by)
            turn(zh);
    }
    if (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        std::cerr << "W: no session with " << hosts << "\n";
        zookeeper_close(zh);
        return 69;
    }
    const auto t0 = clock::now();
    const auto until = t0 + d;
    for (auto& c : chains) {
        c.zh = zh;
        c.pairs = &pairs;
        c.until = &until;
        start_pair(c);
    }
    const auto give_up = until + std::chrono::seconds(10);
    while (clock::now() < give_up &&
           !std::all_of(chains.begin(), chains.end(), [](const chain& c) { return c.done; }))
        turn(zh);
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    int failed = 0;
    for (const auto& c : chains)
        failed += c.failed;
    zookeeper_close(zh);
    if (failed != 0) {
        std::cerr << "W: " << failed << " requests failed\n";
        return 69;
    }
    std::cout << "{\"scenario\":\"W\",\"workers\":" << chains.size() << ",\"ops\":" << pairs.size()
              << ",\"ops_per_s\":" << static_cast<double>(pairs.size()) / secs
              << ",\"pair_p50_us\":" << percentile(pairs, 0.5)
              << ",\"pair_p99_us\":" << percentile(pairs, 0.99) << "}\n";
    return 0;
}
#else
int zk_floor(const std::string&, unsigned, std::chrono::milliseconds) {
    std::cerr << "W: this build has no ZooKeeper backend\n";
    return 64;
}
#endif

} // namespace dlock::bench
