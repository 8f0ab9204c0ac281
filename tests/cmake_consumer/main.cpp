// A consumer of the installed package: compiles against the public headers only (the umbrella,
// and a backend's own header by its name).
#include <dlock/dlock.hpp>
#include <dlock/redis.hpp>

#include <iostream>
#include <mutex>
#include <string_view>

int main(int argc, char** argv) {
    if (argc > 1 && std::string_view(argv[1]) == "--version") {
        const auto opts = dlock::parse_url("redis://user:secret@127.0.0.1:6379/2");
        std::cout << "dlock consumer ok: " << dlock::to_string(opts) << '\n';
        return 0;
    }
    dlock::client c(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
    dlock::mutex m = c.make_mutex("consumer");
    std::scoped_lock guard(m);
    std::cout << "token " << m.fencing_token().value_or(0) << '\n';
    std::cout << "ping " << dlock::redis::command(c, {"PING"}).str << " on "
              << dlock::redis::masters(c) << " master(s)\n";
}
