// lease_handle: a lock that is not bound to a thread, with loss you cannot miss.
// Usage: example_lease_handle redis://127.0.0.1:6379
#include <dlock/dlock.hpp>

#include <iostream>
#include <thread>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    dlock::client redis(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
    dlock::lease job = redis.acquire("example:nightly-job", {.wait = 2s});
    if (!job) {
        std::cout << "someone else runs the job\n";
        return 0;
    }
    job.on_lost([] { std::cerr << "lease lost: stop writing\n"; });
    // Hand the lease to a worker thread; it checks the stop token between steps.
    std::thread worker([lease = std::move(job)]() mutable {
        for (int step = 0; step < 3 && !lease.stop_token().stop_requested(); ++step)
            std::cout << "step " << step << " under token " << lease.token().value() << '\n';
        lease.release();
    });
    worker.join();
    return 0;
}
