// dlock bench: one scenario of bench/scenarios.hpp against --url, as a table or JSON.
#include "commands.hpp"

#ifdef DLOCK_HAVE_BENCH
#include "scenarios.hpp"
#endif

#include <iomanip>

namespace dlock::cli {

int run_bench(const global_options& g, const bench_options& o, std::ostream& out,
              std::ostream& err) {
#ifdef DLOCK_HAVE_BENCH
    (void)err;
    bench::options b;
    const auto copts = connect_options(g);
    (void)copts; // validated; scenarios connect by URL
    b.url = g.urls.empty()
                ? (std::getenv("DLOCK_URL") ? std::getenv("DLOCK_URL") : "redis://127.0.0.1:6379")
                : g.urls[0];
    b.kind = o.kind == "simple" ? lock_kind::simple : lock_kind::reentrant;
    b.duration = std::chrono::milliseconds(static_cast<long long>(o.seconds * 1000));
    if (o.scenario == "A") b.which = bench::scenario::uncontended;
    if (o.scenario == "B") {
        b.which = bench::scenario::many_keys;
        b.workers = o.workers ? o.workers : 50;
        b.keys = o.keys ? o.keys : b.workers;
    }
    if (o.scenario == "C") {
        b.which = bench::scenario::contended_counter;
        b.workers = o.workers ? o.workers : 8;
        b.max_ops = 2000;
    }
    if (o.scenario == "D") {
        b.which = bench::scenario::handoff;
        b.max_ops = 300;
    }
    const auto r = bench::run(b);
    if (o.json) {
        out << bench::to_json(r) << '\n';
        return 0;
    }
    out << std::fixed << std::setprecision(1) << "scenario " << o.scenario << " (" << o.kind
        << "): " << r.ops << " ops in " << r.seconds << " s\n"
        << "  ops/s            " << r.ops_per_s << "\n"
        << "  acquire p50/p99  " << r.acquire_p50_us << " / " << r.acquire_p99_us << " us\n"
        << "  hand-off p50/p99 " << r.handoff_p50_us << " / " << r.handoff_p99_us << " us ("
        << r.handoff_samples << " samples)\n"
        << "  server cmds/op   " << r.server_cmds_per_op << "\n";
    return 0;
#else
    (void)g;
    (void)o;
    (void)out;
    err << "dlock: this build has no benchmarks (configure with -DDLOCK_BUILD_BENCH=ON)\n";
    return exit_code::failure;
#endif
}

} // namespace dlock::cli
