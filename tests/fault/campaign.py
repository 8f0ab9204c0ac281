"""A fault campaign: every deterministic row (faultrun.py's scenarios, each mode CI runs and
each extended one, every backend) once per seed, one run at a time, each result in
OUT/seedN/ID-MODE.json with the commit it ran on and the machine's load average at its start.

  scripts/fault-campaign.sh [--seeds 1-5] [--only REGEX] [--stop-at HH:MM] [--build DIR] OUT

Resumable: a row whose result file is already in OUT/seedN/ is not run again (unless that run
was skipped, e.g. its server was not installed then), so the same command continues a stopped
campaign, and a new --seeds range adds seeds to an existing folder. Rows whose server is not
installed are recorded as skipped by faultrun.py itself. --only REGEX keeps the rows whose
"ID.MODE" matches (re.search). --stop-at HH:MM (UTC) starts no run after that time; SIGINT or
SIGTERM lets the current run finish and stops (a second one kills it). A run that outlasts
its time limit is killed and recorded as NOT as expected, with the reason.
"""

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# Paths whose changes do not change a run: the docs (the campaign's own output lands there),
# the page generator, its test and the B/S tests' runner. Anything else modified makes the
# commit "-dirty".
NOT_RUN = [":(exclude)docs", ":(exclude)*.md", ":(exclude)tests/fault/safety_doc.py",
           ":(exclude)tests/fault/safety_doc_test.py", ":(exclude)tests/fault/coverage_tests.py"]


def commit():
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                            "--untracked-files=no", "--", "."] + NOT_RUN,
                           capture_output=True, text=True, check=True).stdout.strip()
    return head + ("-dirty" if dirty else "")


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def rows(only):
    import faultrun  # here, not at the top: faultrun.py imports commit() and loadavg() from this
    out = []
    for sc in faultrun.SCENARIOS.values():
        for m in sc.modes + sc.ext_modes:
            if not only or re.search(only, "%s.%s" % (sc.id, m)):
                out.append((sc, m))
    return out


def seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def done(path):
    try:
        with open(path) as f:
            return json.load(f).get("verdict") != "skipped"
    except (OSError, ValueError):
        return False  # absent, or cut off mid-write: run it again


STOP, CURRENT = [], []


def on_signal(sig, _frame):
    STOP.append(sig)
    if len(STOP) == 1:
        print("campaign: stopping after the current run (signal again to kill it)", flush=True)
    elif CURRENT:
        os.killpg(CURRENT[0], signal.SIGKILL)


def run_row(tools, sc, mode, seed, out_dir, limit):
    path = os.path.join(out_dir, "%s-%s.json" % (sc.id, mode))
    rev, load = commit(), loadavg()
    cmd = [sys.executable, os.path.join(HERE, "faultrun.py")] + tools + [
        "run", sc.id, mode, "--seed", str(seed), "--results", out_dir]
    if os.path.exists(path):
        os.remove(path)  # a skipped run's file, run again
    start = time.monotonic()
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    CURRENT[:] = [p.pid]
    try:
        log, _ = p.communicate(timeout=limit)
        timed_out = None
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        log, _ = p.communicate()
        timed_out = "the campaign killed the run after %d s" % limit
    CURRENT[:] = []
    if len(STOP) > 1 and p.returncode not in (0, 1, 77):
        return None  # killed by the second signal: no result
    try:
        with open(path) as f:
            res = json.load(f)
        if timed_out:
            raise ValueError(timed_out)
    except (OSError, ValueError):
        res = {"id": sc.id, "mode": mode, "title": sc.title, "checks": sc.checks,
               "expected": sc.outcome.get(mode, ""), "measured": {}, "probes": [],
               "verdict": "NOT as expected", "skipped": None, "seed": seed,
               "error": timed_out or "no result file (exit %s): %s" % (
                   p.returncode, log.strip().splitlines()[-1:] or ""),
               "duration_s": round(time.monotonic() - start, 1),
               "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "report": log}
    res["commit"], res["loadavg"] = rev, load
    if res["verdict"] == "as expected":
        res.pop("artifacts", None)  # a temporary folder faultrun.py already removed
    with open(path + ".tmp", "w") as f:
        json.dump(res, f, indent=1)
    os.replace(path + ".tmp", path)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--only")
    ap.add_argument("--stop-at", help="HH:MM UTC: start no run after it")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "ci"))
    ap.add_argument("--limit", type=int, default=300, help="seconds one run may take")
    a = ap.parse_args()
    fault = os.path.join(a.build, "tests", "fault")
    tools = ["--worker", os.path.join(fault, "dlock_fault_worker"),
             "--proxy", os.path.join(fault, "dlock_fault_proxy"),
             "--check", os.path.join(fault, "dlock_check"),
             "--skew", os.path.join(fault, "libdlock_skew.so")]
    for t in tools[1::2]:
        if not os.path.exists(t):
            print("campaign: %s not built (make dlock_fault_worker dlock_fault_proxy dlock_check "
                  "dlock_skew in %s)" % (t, a.build), file=sys.stderr)
            return 64
    stop_at = None
    if a.stop_at:
        now = datetime.datetime.now(datetime.timezone.utc)
        h, m = (int(x) for x in a.stop_at.split(":"))
        stop_at = now.replace(hour=h, minute=m, second=0, microsecond=0)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    todo = rows(a.only)
    ran = good = 0
    for seed in seeds(a.seeds):
        out_dir = os.path.join(a.out, "seed%d" % seed)
        os.makedirs(out_dir, exist_ok=True)
        for sc, mode in todo:
            if STOP or (stop_at and datetime.datetime.now(datetime.timezone.utc) >= stop_at):
                print("campaign: stopped before %s %s seed %d (%d run, %d as expected)"
                      % (sc.id, mode, seed, ran, good), flush=True)
                return 2
            if done(os.path.join(out_dir, "%s-%s.json" % (sc.id, mode))):
                continue
            res = run_row(tools, sc, mode, seed, out_dir, a.limit)
            if res is None:
                return 2
            ran += 1
            good += res["verdict"] == "as expected"
            print("%s %s seed %d: %s (%.1f s, load %.2f, %s)" % (
                sc.id, mode, seed, res["verdict"], res["duration_s"], res["loadavg"][0],
                res["commit"][:12]), flush=True)
    print("campaign: done (%d run, %d as expected)" % (ran, good), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
