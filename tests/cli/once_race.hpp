// tests/cli/once_race.hpp: the race of `dlock exec --once-per` that each backend's CLI test
// runs: three processes over 1 s slots until three runs happened (at most 30 s), each run
// writing its slot to a file.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

struct once_race {
    std::size_t runs = 0;  ///< commands run
    std::size_t slots = 0; ///< distinct slots among them (== runs: never twice in one slot)
};

/// `dlock(args)` runs the dlock binary with `args` against the backend under test.
inline once_race race_once_per(const std::function<void(const std::string&)>& dlock,
                               const std::string& name) {
    char tmpl[] = "/tmp/dlock-once-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return {};
    const std::string log = std::string(tmpl) + "/runs";
    // Until three runs happened, at most 30 s (a loaded machine or a sanitizer build starts a
    // dlock process in up to a second).
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const auto lines = [&] {
        std::ifstream in(log);
        return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(),
                          '\n');
    };
    std::vector<std::thread> ts;
    for (int p = 0; p < 3; ++p)
        ts.emplace_back([&] {
            while (std::chrono::steady_clock::now() < end && lines() < 3)
                dlock("exec --once-per 1s " + name + " -- sh -c 'echo $DLOCK_PERIOD_SLOT >> " +
                      log + "'");
        });
    for (auto& t : ts)
        t.join();
    std::ifstream in(log);
    std::vector<std::string> runs;
    for (std::string line; std::getline(in, line);)
        runs.push_back(line);
    std::filesystem::remove_all(tmpl);
    return {runs.size(), std::set<std::string>(runs.begin(), runs.end()).size()};
}

} // namespace dlock::test
