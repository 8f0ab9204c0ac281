// async_lock: acquiring from a C++20 coroutine with asio::use_awaitable.
// Usage: example_async_lock redis://127.0.0.1:6379
#include <dlock/dlock.hpp>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <iostream>
#include <string>
#include <vector>

using namespace std::chrono_literals;

asio::awaitable<int> run(dlock::client& redis) {
    dlock::lease l =
        co_await redis.async_acquire("example:async", {.wait = 1s}, asio::use_awaitable);
    if (!l) co_return 1;
    std::vector<std::string> incr{"INCR", "example:async:count"};
    auto reply = co_await dlock::redis::async_command(redis, std::move(incr), asio::use_awaitable);
    std::cout << "incremented to " << reply.integer << " under token " << l.token().value() << '\n';
    l.release();
    co_return 0;
}

int main(int argc, char** argv) {
    dlock::client redis(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
    asio::io_context io;
    int rc = 1;
    asio::co_spawn(io, run(redis), [&](std::exception_ptr e, int r) {
        if (e) std::rethrow_exception(e);
        rc = r;
    });
    io.run();
    return rc;
}
