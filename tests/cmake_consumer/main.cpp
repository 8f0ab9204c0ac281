// A consumer of the installed package: compiles against the public headers only.
#include <dlock/dlock.hpp>

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
}
