// The command lines of a throwaway PostgreSQL server: initdb and postgres for data that dies
// with its directory (no fsync, no durability), listening on one loopback port and a Unix
// socket in its own directory. Shared by the demo's private server (tools/dlock) and the test
// fixture (tests/support), which add their own authentication and settings.
#pragma once

#include <string>
#include <vector>

namespace dlock::tools {

/// `initdb` for `data`, superuser `postgres`, UTF-8, no sync; `auth` are the authentication
/// options (e.g. "--auth=trust"), appended.
inline std::vector<std::string> throwaway_initdb_args(const std::string& initdb,
                                                      const std::string& data,
                                                      const std::vector<std::string>& auth) {
    std::vector<std::string> a{initdb,      "-D",
                               data,        "-U",
                               "postgres",  "-E",
                               "UTF8",      "--locale=C.UTF-8",
                               "--no-sync", "--no-instructions"};
    a.insert(a.end(), auth.begin(), auth.end());
    return a;
}

/// `postgres` on `data`, 127.0.0.1:`port` and a socket in `socket_dir`, without durability;
/// each of `settings` ("name=value") is passed with -c.
inline std::vector<std::string> throwaway_server_args(const std::string& postgres,
                                                      const std::string& data, int port,
                                                      const std::string& socket_dir,
                                                      const std::vector<std::string>& settings) {
    std::vector<std::string> a{postgres, "-D", data, "-p", std::to_string(port), "-k", socket_dir};
    for (const char* s : {"listen_addresses=127.0.0.1", "fsync=off", "synchronous_commit=off",
                          "full_page_writes=off"}) {
        a.emplace_back("-c");
        a.emplace_back(s);
    }
    for (const auto& s : settings) {
        a.emplace_back("-c");
        a.push_back(s);
    }
    return a;
}

} // namespace dlock::tools
