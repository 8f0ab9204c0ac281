// dlock::mutex and dlock::simple_mutex against a real redis-server: mutual exclusion between
// threads and between processes, the standard lock helpers (unique_lock, scoped_lock,
// std::lock), and a simple_mutex that is not reentrant.
#include "lock_test_util.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::fast_options;
using dlock::test::redis_server;

TEST(lock, excludes_threads_of_one_process) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    for (auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
        std::atomic<int> inside{0}, max_inside{0};
        int counter = 0;
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                auto run = [&](dlock::basic_mutex& m) {
                    for (int i = 0; i < 100; ++i) {
                        std::scoped_lock g(m);
                        const int now = ++inside;
                        int seen = max_inside.load();
                        while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
                        }
                        ++counter;
                        --inside;
                    }
                };
                if (kind == dlock::lock_kind::reentrant) {
                    dlock::mutex m = c.make_mutex("excl");
                    run(m);
                } else {
                    dlock::simple_mutex m = c.make_simple_mutex("excl-simple");
                    run(m);
                }
            });
        for (auto& th : threads)
            th.join();
        EXPECT_EQ(max_inside.load(), 1);
        EXPECT_EQ(counter, 800);
    }
}

TEST(lock, excludes_processes_that_share_a_counter_in_redis) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto* shared = static_cast<std::atomic<int>*>(::mmap(nullptr, 2 * sizeof(std::atomic<int>),
                                                         PROT_READ | PROT_WRITE,
                                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(shared, MAP_FAILED);
    new (&shared[0]) std::atomic<int>(0); // inside
    new (&shared[1]) std::atomic<int>(0); // violations
    s.cli({"SET", "counter", "0"});
    std::vector<pid_t> children;
    for (int p = 0; p < 3; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 0;
            try {
                dlock::client c(fast_options(s.url()));
                dlock::mutex m = c.make_mutex("proc-lock");
                for (int i = 0; i < 50; ++i) {
                    std::scoped_lock g(m);
                    if (shared[0].fetch_add(1) != 0) shared[1].fetch_add(1);
                    const auto v = std::stoll(dlock::redis::command(c, {"GET", "counter"}).str);
                    dlock::redis::command(c, {"SET", "counter", std::to_string(v + 1)});
                    shared[0].fetch_sub(1);
                }
            } catch (...) {
                rc = 1;
            }
            ::_exit(rc);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(shared[1].load(), 0);
    EXPECT_EQ(s.cli({"GET", "counter"}), "150");
    ::munmap(shared, 2 * sizeof(std::atomic<int>));
}

TEST(lock, works_with_standard_lock_helpers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex a = c.make_mutex("std-a");
    dlock::mutex b = c.make_mutex("std-b");
    {
        std::unique_lock<dlock::mutex> u(a, std::defer_lock);
        EXPECT_TRUE(u.try_lock_for(100ms));
        EXPECT_TRUE(u.owns_lock());
    }
    {
        std::scoped_lock both(a, b);
        EXPECT_TRUE(a.is_held_by_this_thread());
        EXPECT_TRUE(b.is_held_by_this_thread());
    }
    std::lock(a, b);
    a.unlock();
    b.unlock();
    {
        std::unique_lock<dlock::mutex> u(a, std::chrono::system_clock::now() + 100ms);
        EXPECT_TRUE(u.owns_lock());
    }
    EXPECT_FALSE(a.is_locked());
    EXPECT_FALSE(b.is_locked());
}

TEST(lock, a_simple_mutex_is_not_reentrant_and_says_so) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::simple_mutex m = c.make_simple_mutex("simple");
    m.lock();
    EXPECT_FALSE(m.fencing_token().has_value());
    EXPECT_EQ(s.cli({"TYPE", "simple"}), "string");
    EXPECT_EQ(s.cli({"GET", "simple"}).size(), 32u); // 128-bit token in hex
    std::error_code ec;
    EXPECT_FALSE(m.try_lock_for(0ms, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    m.unlock();
    EXPECT_EQ(s.cli({"EXISTS", "simple"}), "0");
}
