// The commands of `dlock`, each a function of parsed options that returns an exit code.
#pragma once

#include "common.hpp"

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dlock::cli {

struct exec_options {
    std::optional<std::chrono::milliseconds> wait;     ///< nullopt: wait forever
    std::optional<std::chrono::milliseconds> lease;    ///< nullopt: watchdog
    std::optional<std::chrono::milliseconds> watchdog; ///< watchdog lease
    std::string kind = "lock";
    std::chrono::milliseconds kill_after{5000};
    std::string name;
    std::vector<std::string> command;
};
int run_exec(const global_options& g, const exec_options& o, std::ostream& err);

int run_status(const global_options& g, const std::string& name, bool json, std::ostream& out,
               std::ostream& err);
int run_list(const global_options& g, const std::string& pattern, bool json, std::ostream& out,
             std::ostream& err);
int run_unlock(const global_options& g, const std::string& name, std::ostream& out,
               std::ostream& err);

struct demo_options {
    int processes = 2;
    int threads = 4;
    int stock = 200;
};
int run_demo(const global_options& g, const demo_options& o, std::ostream& out, std::ostream& err);

struct bench_options {
    std::string scenario = "A";
    std::string kind = "lock";
    unsigned workers = 0; ///< 0: the scenario's default
    unsigned keys = 0;
    double seconds = 3;
    bool json = false;
};
int run_bench(const global_options& g, const bench_options& o, std::ostream& out,
              std::ostream& err);

} // namespace dlock::cli
