#!/usr/bin/env python3
"""SVG charts of a bench/run_side_by_side.sh run, drawn with gnuplot (Debian gnuplot-nox).

    python3 bench/charts.py [--png] RESULTS_DIR [CHARTS_DIR=bench/charts]

Reads what the run left in RESULTS_DIR (no benchmark is run): dlock's lock_bench JSON lines
(A_<kind>.txt, B_<kind>[_async].txt, C_<kind>[_own_clients].txt, D_<kind>[_own_clients].txt),
D's raw hand-off samples (D_<kind>*.samples, one microsecond value per line; runs before they
were kept have none) and the peers' harness results (peers/node.json, peers/python.json). Writes:

    throughput_A.svg  throughput_B.svg  throughput_C.svg   ops/s, dlock's rows and every peer's
    handoff_D.svg                                           D hand-off p50 and p99 (log scale)
    handoff_cdf_D.svg        D hand-off latency CDF: dlock (client per worker) and the peers
    handoff_cdf_D_dlock.svg  D hand-off latency CDF of dlock, one shared client vs per worker

The peers' harness keeps only p50 / p99 / max of D, so a peer's CDF is those three points
(drawn as points joined by dashes; each peer's best configuration by p50) unless its D result
carries a "samples_us" list; dlock's is the full
step curve when its samples exist (p50 and p99 points otherwise). --png writes PNG previews.
"""
import json
import os
import subprocess
import sys
import tempfile

KINDS = ["lock", "simple", "fair", "write"]
DLOCK_COLOR = "#1f77b4"
PEER_COLOR = "#ff7f0e"
FLOOR_COLOR = "#999999"


def read_json_line(path):
    """The last line of PATH that parses as a JSON object (lock_bench prints one)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def read_samples(path):
    try:
        with open(path) as f:
            return sorted(float(x) for x in f.read().split())
    except (OSError, ValueError):
        return []


def peers(results):
    """(label, is_floor, {test: result}) for every library in the peers' JSON files."""
    out = []
    for name in ("node.json", "python.json"):
        try:
            with open(os.path.join(results, "peers", name)) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        for lib, tests in data.get("libs", {}).items():
            floor = lib.startswith("raw") or lib.startswith("floor")
            out.append((lib, floor, tests))
    return out


def dlock_rows(results, scenario, variants):
    """[(label, result)] for each kind and variant suffix that has a result file."""
    rows = []
    for kind in KINDS:
        for suffix, note in variants:
            r = read_json_line(os.path.join(results, f"{scenario}_{kind}{suffix}.txt"))
            if r:
                rows.append((f"dlock {kind}{note}", r))
    return rows


FORMAT = "svg"  # --png: PNG previews (pngcairo) instead, for a look without an SVG viewer


def terminal(width, height):
    if FORMAT == "png":
        return f'set terminal pngcairo size {width},{height} font "sans,10" background "#ffffff"'
    return f'set terminal svg size {width},{height} dynamic font "sans,12" background "#ffffff"'


def out_path(charts, name):
    return os.path.join(charts, f"{name}.{FORMAT}")


def gp_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def bar_chart(path, title, xlabel, rows, log=False):
    """Horizontal bars: rows = [(label, value, color)], first row on top."""
    rows = [r for r in rows if r[1] and r[1] > 0]
    if not rows:
        print(f"charts: no data for {os.path.basename(path)}", file=sys.stderr)
        return False
    n = len(rows)
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        for i, (label, value, color) in enumerate(rows):
            y = n - 1 - i
            dat.write(f'{y} {value:.6g} "{label}" {int(color[1:], 16)}\n')
    xmax = max(r[1] for r in rows)
    xrange = f"set logscale x; set xrange [{min(r[1] for r in rows) / 2:.6g}:{xmax * 4:.6g}]" \
        if log else f"set xrange [0:{xmax * 1.22:.6g}]"
    script = f"""
{terminal(900, 110 + 26 * n)}
set output {gp_quote(path)}
set title {gp_quote(title)}
set xlabel {gp_quote(xlabel)}
set style fill solid 0.85 noborder
set grid xtics
unset key
set yrange [-0.7:{n - 0.3}]
set format x "%.0f"
{xrange}
set lmargin 34
set ytics scale 0
plot {gp_quote(dat.name)} using (0):1:(0):2:($1-0.38):($1+0.38):(column(4)):ytic(3) \\
       with boxxyerror lc rgb variable notitle, \\
     '' using 2:1:(sprintf(" %.0f", $2)) with labels left offset 0.3,0 font "sans,10" notitle
"""
    try:
        run_gnuplot(script)
    finally:
        os.unlink(dat.name)
    return True


def throughput(results, charts, scenario, what, dlock_variants, peer_tests):
    rows = [(label, r.get("ops_per_s", 0), DLOCK_COLOR)
            for label, r in dlock_rows(results, scenario, dlock_variants)]
    for lib, floor, tests in peers(results):
        for test, note in peer_tests:
            t = tests.get(test)
            if t:
                value = t.get("ops_per_s", t.get("pairs_per_s", 0))
                rows.append((f"{lib}{note}", value, FLOOR_COLOR if floor else PEER_COLOR))
    return bar_chart(out_path(charts, f"throughput_{scenario}"),
                     f"{scenario}: {what} (dlock blue, peers orange, no-library floors grey)",
                     "operations per second (higher is better)", rows)


def handoff_bars(results, charts):
    rows = []
    for label, r in dlock_rows(results, "D", D_VARIANTS):
        rows.append((label + " p50", r.get("handoff_p50_us", 0), DLOCK_COLOR))
        rows.append((label + " p99", r.get("handoff_p99_us", 0), "#aec7e8"))
    for lib, floor, tests in peers(results):
        for test, t in tests.items():
            if test.startswith("D_"):
                label = f"{lib} {test[2:]}"
                rows.append((label + " p50", t.get("p50_us", 0), FLOOR_COLOR if floor else PEER_COLOR))
                rows.append((label + " p99", t.get("p99_us", 0), "#dddddd" if floor else "#ffbb78"))
    return bar_chart(out_path(charts, "handoff_D"),
                     "D: isolated hand-off, release issued -> waiter holds the lock",
                     "microseconds (log scale, lower is better)", rows, log=True)


def dlock_series(results, suffix, note):
    """CDF series of dlock's D runs with one variant suffix: the samples' step curve, or the
    p50 / p99 points of a run that kept no samples."""
    series = []
    for kind in KINDS:
        samples = read_samples(os.path.join(results, f"D_{kind}{suffix}.samples"))
        r = read_json_line(os.path.join(results, f"D_{kind}{suffix}.txt"))
        if samples:
            points = [(us, (i + 1) / len(samples)) for i, us in enumerate(samples)]
            series.append((f"dlock {kind}{note} ({len(samples)} samples)", points, "with steps lw 2"))
        elif r and r.get("handoff_p50_us"):
            points = [(r["handoff_p50_us"], 0.5), (r["handoff_p99_us"], 0.99)]
            series.append((f"dlock {kind}{note} (p50, p99 only)", points,
                           "with linespoints lw 2 pt 7 ps 0.7"))
    return series


def peer_series(results):
    """Each peer's D configuration with the lowest p50 (and the floors): p50, p99, max."""
    series = []
    for lib, floor, tests in peers(results):
        ds = [(test, t) for test, t in tests.items() if test.startswith("D_") and t.get("p50_us")]
        if not ds:
            continue
        test, t = min(ds, key=lambda d: d[1]["p50_us"])
        samples = sorted(t.get("samples_us") or [])
        if samples:  # a harness that keeps D's raw samples (a "samples_us" list)
            points = [(us, (i + 1) / len(samples)) for i, us in enumerate(samples)]
            series.append((f"{lib} {test[2:]} ({len(samples)} samples)", points,
                           "with steps dt 2 lw 2"))
            continue
        points = [(t["p50_us"], 0.5), (t["p99_us"], 0.99), (t["max_us"], 1.0)]
        series.append((f"{lib} {test[2:]} (p50, p99, max only; n={t.get('n', '?')})", points,
                       "with linespoints dt 2 lw 1.5 pt 7 ps 0.7"))
    return series


def cdf_chart(path, title, series):
    if not series:
        print(f"charts: no data for {os.path.basename(path)}", file=sys.stderr)
        return False
    tmp = []
    try:
        plots = []
        for name, points, style in series:
            f = tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False)
            tmp.append(f.name)
            f.write("\n".join(f"{x:.6g} {y:.6g}" for x, y in points) + "\n")
            f.close()
            plots.append(f"{gp_quote(f.name)} using 1:2 {style} title {gp_quote(name)}")
        lo = min(p[0] for _, pts, _ in series for p in pts)
        hi = max(p[0] for _, pts, _ in series for p in pts)
        script = f"""
{terminal(1000, 640)}
set output {gp_quote(path)}
set title {gp_quote(title)}
set xlabel "microseconds from release issued to waiter holding the lock (log scale)"
set ylabel "share of hand-offs at or below x"
set logscale x
set xrange [{lo / 1.5:.6g}:{hi * 1.5:.6g}]
set yrange [0:1.02]
set format x "%.0f"
set grid
set mxtics 10
set key inside right bottom vertical Left reverse font ",10" box opaque
plot {", ".join(plots)}
"""
        run_gnuplot(script)
        return True
    finally:
        for name in tmp:
            os.unlink(name)


def handoff_cdf(results, charts):
    """D against the peers (dlock with a client per worker: the waiter on its own connection,
    as every peer's), and dlock alone (one shared client vs a client per worker)."""
    a = cdf_chart(out_path(charts, "handoff_cdf_D"),
                  "D: hand-off latency distribution, dlock (client per worker) and the peers",
                  dlock_series(results, "_own_clients", "") + peer_series(results))
    b = cdf_chart(out_path(charts, "handoff_cdf_D_dlock"),
                  "D: dlock hand-off latency distribution, one shared client and a client per worker",
                  dlock_series(results, "", ", one client") +
                  dlock_series(results, "_own_clients", ", client per worker"))
    return a and b


D_VARIANTS = [("", ""), ("_own_clients", ", client per worker")]


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 64 if len(sys.argv) < 2 else 0
    global FORMAT
    if "--png" in sys.argv:
        sys.argv.remove("--png")
        FORMAT = "png"
    results = sys.argv[1]
    charts = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "charts")
    if not os.path.isdir(results):
        print(f"charts: {results} is not a directory", file=sys.stderr)
        return 66
    os.makedirs(charts, exist_ok=True)
    made = [
        throughput(results, charts, "A", "one client, sequential acquire+release on one key",
                   [("", "")], [("A", "")]),
        throughput(results, charts, "B", "50 workers on 50 keys over one client",
                   [("_async", " (async)"), ("", " (threads)")], [("B", "")]),
        throughput(results, charts, "C", "8 workers on one key, GET+SET inside",
                   [("", " (one client)"), ("_own_clients", " (client per worker)")],
                   [("C_default", " default"), ("C_poll1ms", " poll 1 ms"),
                    ("C_blocking", " blocking")]),
        handoff_bars(results, charts),
        handoff_cdf(results, charts),
    ]
    print(f"charts: {sum(made)} of {len(made)} written to {charts}")
    return 0 if all(made) else 1


if __name__ == "__main__":
    sys.exit(main())
