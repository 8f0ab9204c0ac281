// bench_cmd.cpp: `dlock bench`, one scenario of bench/scenarios.hpp (the same code as
// bench/lock_bench) against --url, printed as a table or as one JSON object.
// Built with the scenarios only when the dlock_bench_scenarios target exists
// (DLOCK_BUILD_BENCH=ON); otherwise the command says it is not built.
#include "commands.hpp"

#ifdef DLOCK_HAVE_BENCH
#include "scenarios.hpp"
#endif

#include <cstdlib>
#include <iomanip>

namespace dlock::cli {

int run_bench(const global_options& g, const bench_options& o, std::ostream& out,
              std::ostream& err) {
    (void)connect_options(g); // validates the URL (one URL, parsable) before any work
#ifdef DLOCK_HAVE_BENCH
    (void)err;
    bench::options b;
    b.url = effective_urls(g).front();
    if (const char* pw = std::getenv("DLOCK_PASSWORD"); pw && *pw)
        b.url = url_with_password(b.url, pw);
    b.kind = kind_from_name(o.kind).value_or(lock_kind::reentrant);
    b.duration = std::chrono::milliseconds(static_cast<long long>(o.seconds * 1000));
    if (o.scenario == "A") {
        b.which = bench::scenario::uncontended;
    } else if (o.scenario == "B") {
        b.which = bench::scenario::many_keys;
        b.workers = o.workers ? o.workers : 50;
        b.keys = o.keys ? o.keys : b.workers;
    } else if (o.scenario == "C") {
        b.which = bench::scenario::contended_counter;
        b.workers = o.workers ? o.workers : 8;
        b.max_ops = 2000;
    } else {
        b.which = bench::scenario::handoff;
        b.max_ops = 300;
    }
    const auto r = bench::run(b);
    if (o.json) {
        out << bench::to_json(r) << '\n';
        return exit_code::ok;
    }
    auto line = [&](const char* label) -> std::ostream& {
        return out << "  " << std::left << std::setw(20) << label << std::right;
    };
    out << std::fixed << std::setprecision(1) << "dlock bench: scenario " << o.scenario << ", "
        << o.kind << ", " << b.workers << " worker(s): " << r.ops << " critical sections in "
        << r.seconds << " s\n";
    line("ops/s") << r.ops_per_s << '\n';
    line("acquire p50 / p99") << r.acquire_p50_us << " / " << r.acquire_p99_us << " us\n";
    line("hand-off p50 / p99") << r.handoff_p50_us << " / " << r.handoff_p99_us << " us ("
                               << r.handoff_samples << " samples)\n";
    line("server cmds / op") << r.server_cmds_per_op << '\n';
    if (r.counter_exact) line("counter exact") << (*r.counter_exact ? "yes" : "NO") << '\n';
    return exit_code::ok;
#else
    (void)o;
    (void)out;
    err << "dlock: bench is not built in this build (configure with -DDLOCK_BUILD_BENCH=ON)\n";
    return exit_code::unavailable;
#endif
}

} // namespace dlock::cli
