"""Runs every GoogleTest the bad-input and security table of docs/SAFETY.md names
(safety_doc.COVERAGE: each `suite.test` in backticks) and records each one's result in a small
JSON file that safety_doc.py reads, with the command, the commit and the time.

  python3 tests/fault/coverage_tests.py BUILD_DIR OUT.json

A name is looked up in the test sources (TEST/TEST_F(suite, test) in tests/**.cpp); the
executable is the source's basename (tests/CMakeLists.txt, dlock_test) under BUILD_DIR. Results:
passed, failed, skipped (GTEST_SKIP, e.g. no server), "not built" (no executable), "not found"
(no such test in the sources: the table names a test that does not exist). Integration tests
start their own servers (tests/support); without a server binary they skip.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import safety_doc  # noqa: E402

TEST_DEF = re.compile(r"\bTEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")


def sources():
    """gtest name -> the executable that holds it."""
    out = {}
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.cpp"), recursive=True):
        with open(path, errors="replace") as f:
            for suite, test in TEST_DEF.findall(f.read()):
                out["%s.%s" % (suite, test)] = os.path.basename(path)[:-4]
    return out


def executable(build, name):
    hits = [p for p in glob.glob(os.path.join(build, "tests", "**", name), recursive=True)
            if os.access(p, os.X_OK) and os.path.isfile(p)]
    return hits[0] if hits else None


def run(exe, names, limit):
    """Runs the named tests of one executable; name -> passed, failed or skipped."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "out.json")
        try:
            p = subprocess.run([exe, "--gtest_filter=" + ":".join(names),
                                "--gtest_output=json:" + report], capture_output=True,
                               text=True, timeout=limit)
            code = p.returncode
        except subprocess.TimeoutExpired:
            return {n: "failed (timed out after %d s)" % limit for n in names}
        if not os.path.exists(report):
            return {n: "failed (exit %d, no report)" % code for n in names}
        with open(report) as f:
            data = json.load(f)
    out = {}
    for suite in data.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = "%s.%s" % (suite["name"], t["name"])
            if t.get("failures"):
                out[name] = "failed"
            elif t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
                out[name] = "skipped"
            else:
                out[name] = "passed"
    return {n: out.get(n, "failed (not in the report)") for n in names}


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    build, dest = argv
    where = sources()
    names = []
    for _cid, _case, by, _gap in safety_doc.COVERAGE:
        names += [n for n in safety_doc.coverage_tests(by) if n not in names]
    results, by_exe = {}, {}
    for n in names:
        exe_name = where.get(n)
        if not exe_name:
            results[n] = {"result": "not found"}
            continue
        exe = executable(build, exe_name)
        if not exe:
            results[n] = {"result": "not built", "executable": exe_name}
            continue
        by_exe.setdefault(exe, []).append(n)
    for exe, ns in sorted(by_exe.items()):
        for n, res in run(exe, ns, 600).items():
            results[n] = {"result": res, "executable": os.path.basename(exe)}
        print("%s: %s" % (os.path.basename(exe), ", ".join(
            sorted(set(results[n]["result"] for n in ns)))), flush=True)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=10", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    out = {"command": "python3 tests/fault/coverage_tests.py %s %s" % (build, dest),
           "commit": head, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "tests": results}
    with open(dest, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
