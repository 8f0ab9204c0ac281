// basic_lock: a Redisson-compatible reentrant lock guarding a read-modify-write, with the
// fencing token checked at the resource. Usage: example_basic_lock redis://127.0.0.1:6379
#include <dlock/dlock.hpp>

#include <iostream>
#include <mutex>
#include <string>

int main(int argc, char** argv) {
    dlock::client redis(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
    dlock::redis::command(redis, {"SET", "example:stock", "10"});

    dlock::mutex m = redis.make_mutex("example:stock:lock");
    {
        std::scoped_lock guard(m); // TimedLockable: blocks until acquired, watchdog renews
        const auto token = m.fencing_token().value();
        const auto stock = std::stoll(dlock::redis::command(redis, {"GET", "example:stock"}).str);
        // The resource rejects writes carrying an older token than one it has seen.
        if (!dlock::redis::fenced_set(redis, "example:stock", "example:stock:fence", token,
                                      std::to_string(stock - 1)))
            return 1;
        std::cout << "sold one, token " << token << ", stock now " << stock - 1 << '\n';
    }
    return m.is_locked() ? 1 : 0;
}
