// dlock_check: reads the JSONL logs of a fault run (worker logs, nemesis log, resource log),
// merges them by t, runs every check of reliability.md §8.3 and prints a verdict per check with
// witnesses. Exit 0 when every check matches its expectation (--expect CHECK=ok|violated|any;
// the default is ok; any = reported, not asserted), 1 otherwise, 64 on bad input or usage.

#include "checker/checker.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int exit_mismatch = 1;
constexpr int exit_usage = 64;

int usage(const std::string& why) {
    std::cerr << "dlock_check: " << why << "\n"
              << "usage: dlock_check [--expect CHECK=ok|violated|any]... [--leftover KEY]...\n"
              << "                   [--max-gap-ms N] [--loss-tolerance-ms N] FILE.jsonl...\n"
              << "checks: MUTEX EXTEND_EXPIRED DEADLINE USE_WITHIN_HOLD FENCE RESOURCE\n"
              << "        FOREIGN_RELEASE ORPHANS LIVENESS LOSS\n";
    return exit_usage;
}

} // namespace

int main(int argc, char** argv) {
    using namespace dlock::fault;
    std::map<check, bool> expect_violated;
    std::map<check, bool> not_asserted;
    std::vector<std::string> leftovers;
    std::vector<std::string> files;
    checker_options opts;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string* {
            return i + 1 < args.size() ? &args[++i] : nullptr;
        };
        if (a == "--expect") {
            const std::string* v = value();
            if (!v) return usage("--expect needs CHECK=ok|violated");
            auto eq = v->find('=');
            auto c = check_from_string(v->substr(0, eq));
            std::string what = eq == std::string::npos ? "" : v->substr(eq + 1);
            if (!c || (what != "ok" && what != "violated" && what != "any"))
                return usage("bad --expect \"" + *v + "\"");
            expect_violated[*c] = what == "violated";
            not_asserted[*c] = what == "any";
        } else if (a == "--leftover") {
            const std::string* v = value();
            if (!v) return usage("--leftover needs a key");
            leftovers.push_back(*v);
        } else if (a == "--max-gap-ms") {
            const std::string* v = value();
            if (!v) return usage("--max-gap-ms needs a number");
            try {
                opts.max_liveness_gap_ns = std::stoll(*v) * 1'000'000;
            } catch (const std::exception&) {
                return usage("bad --max-gap-ms \"" + *v + "\"");
            }
        } else if (a == "--loss-tolerance-ms") {
            const std::string* v = value();
            if (!v) return usage("--loss-tolerance-ms needs a number");
            try {
                opts.loss_tolerance_ns = std::stoll(*v) * 1'000'000;
            } catch (const std::exception&) {
                return usage("bad --loss-tolerance-ms \"" + *v + "\"");
            }
        } else if (a == "--help" || a == "-h") {
            usage("help");
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            return usage("unknown option " + a);
        } else {
            files.push_back(a);
        }
    }
    if (files.empty()) return usage("no input files");
    history h;
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
            std::cerr << "dlock_check: cannot open " << f << "\n";
            return exit_usage;
        }
        std::ostringstream text;
        text << in.rdbuf();
        if (auto err = add_jsonl(h, f, text.str())) {
            std::cerr << "dlock_check: " << err->message << "\n";
            return exit_usage;
        }
    }
    finish(h);
    report rep = run_checks(h, leftovers, opts);
    std::cout << format_report(rep);
    bool all_match = true;
    for (const auto& c : rep.results) {
        bool want = expect_violated.count(c.what) ? expect_violated[c.what] : false;
        if (!not_asserted[c.what] && want != c.violated) {
            all_match = false;
            std::cout << "MISMATCH " << to_string(c.what) << ": expected "
                      << (want ? "violated" : "ok") << ", got " << (c.violated ? "violated" : "ok")
                      << "\n";
        }
    }
    std::cout << (all_match ? "VERDICT: as expected\n" : "VERDICT: NOT as expected\n");
    return all_match ? 0 : exit_mismatch;
}
