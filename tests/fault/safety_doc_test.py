"""safety_doc.py's merging of result folders and campaign.py's resume rules, on made-up result
files in a temporary folder (ctest: fault.safety_doc_test, label unit)."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import campaign  # noqa: E402
import safety_doc  # noqa: E402


class Sc:
    def __init__(self, sid, modes, ext=()):
        self.id, self.title, self.checks = sid, sid + " title", sid + " checks"
        self.modes, self.ext_modes = list(modes), list(ext)
        self.expect, self.outcome = {}, {m: "SAFE" for m in self.modes + self.ext_modes}


SCENARIOS = {"F01": Sc("F01", ["S", "F"]), "Z01": Sc("Z01", [], ["ZK"])}


def result(sid, mode, seed, verdict="as expected", commit=None, when="2026-11-27 10:00:00 UTC",
           probes=None, measured=None):
    r = {"id": sid, "mode": mode, "title": sid, "checks": "", "expected": "SAFE",
         "expect": {"MUTEX": "ok", "DEADLINE": "any"},
         "measured": measured or {"MUTEX": "ok", "DEADLINE": "violated"},
         "probes": probes or [], "verdict": verdict, "error": None,
         "skipped": "no server" if verdict == "skipped" else None, "seed": seed,
         "duration_s": 1.0, "when": when, "report": ""}
    if commit:
        r["commit"] = commit
    return r


def write(folder, r):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "%s-%s.json" % (r["id"], r["mode"])), "w") as f:
        json.dump(r, f)


def line_of(text, start):
    return next(ln for ln in text.splitlines() if ln.startswith(start))


class Merge(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        self.old, self.new = os.path.join(t, "old"), os.path.join(t, "new")
        write(os.path.join(self.old, "seed1"), result("F01", "S", 1))
        write(os.path.join(self.new, "seed2"),
              result("F01", "S", 2, commit="0123456789abcdef", when="2026-11-27 11:00:00 UTC"))
        write(os.path.join(self.new, "seed3"), result(
            "F01", "S", 3, "NOT as expected", commit="fedcba9876543210-dirty",
            when="2026-11-27 12:00:00 UTC", measured={"MUTEX": "violated"},
            probes=[{"name": "the fault landed", "passed": False, "detail": "no hold"}]))
        write(os.path.join(self.new, "seed4"), result("F01", "S", 4, "skipped"))
        for seed in range(1, 6):
            write(os.path.join(self.new, "seed%d" % seed), result("F01", "F", seed, commit="ab"))
        write(os.path.join(self.new, "seed1"), result("F99", "S", 1))  # no longer registered
        write(os.path.join(self.new, "seed1"), result("RND", "F", 1))  # the randomised tier's

    def tearDown(self):
        self.tmp.cleanup()

    def test_rows_merge_every_folder_and_count_each_file_once(self):
        # self.new given twice and the parent of both: still one count per file
        rows, stray = safety_doc.merge(safety_doc.load_results(
            [self.old, self.new, self.new, self.tmp.name]), SCENARIOS)
        self.assertEqual([r["seed"] for r in rows[("F01", "S")]], [1, 4, 2, 3])
        self.assertEqual(len(rows[("F01", "F")]), 5)
        self.assertEqual(rows[("Z01", "ZK")], [])
        self.assertEqual([r["id"] for r in stray], ["F99"])
        n, good, skipped, seeds, commits = safety_doc.summary(rows[("F01", "S")])
        self.assertEqual((n, good, skipped), (3, 2, 1))
        self.assertEqual(seeds, "1, 2, 3")
        self.assertEqual(commits, "unrecorded, 0123456789, fedcba9876-dirty")

    def test_the_page_marks_short_rows_and_names_the_failed_run(self):
        page = safety_doc.render([self.old, self.new], SCENARIOS)
        self.assertIn("| 2 / 3 (fewer than 5), 1 skipped | 1, 2, 3 |",
                      line_of(page, "| F01 | S |"))
        self.assertIn("| 5 / 5 | 1, 2, 3, 4, 5 | ab |", line_of(page, "| F01 | F |"))
        self.assertIn("| 0 / 0 (no run) |", line_of(page, "| Z01 | ZK (ext) |"))
        bad = line_of(page, "- **F01 S seed 3**")
        self.assertIn("MUTEX (expected ok, measured violated)", bad)
        self.assertIn("the fault landed (no hold)", bad)
        self.assertIn("commit fedcba9876-dirty", bad)
        self.assertIn("2 rows; 8 runs: 7 as expected, 1 NOT as expected, 1 skipped; "
                      "1 rows with fewer than 5 runs, 0 of them without any.", page)
        # the old folder's file and the skipped run's have no commit
        self.assertIn("(2 of the 9 files here", page)

    def test_random_folders_show_commit_faults_fired_and_liveness_then_their_notes(self):
        tally = {"drop": {"scheduled": 2, "fired": 1}, "partition": {"scheduled": 2, "fired": 2},
                 "stall": {"scheduled": 0, "fired": 0}}
        rnd = dict(result("RND", "F", 7, commit="0123456789abcdef", measured={"MUTEX": "ok"}),
                   faults=tally,
                   liveness={"quiet_s": 31.4, "longest_quiet_gap_ms": 229})
        write(os.path.join(self.tmp.name, "rnd", "seed7"), rnd)
        with open(os.path.join(self.tmp.name, "rnd", "NOTES.md"), "w") as f:
            f.write("what was found\n")
        old = os.path.join(self.tmp.name, "old-rnd")
        os.makedirs(old)
        with open(os.path.join(old, "NOTES.md"), "w") as f:
            f.write("kept notes\n")
        page = safety_doc.render([self.new], SCENARIOS,
                                 [old, os.path.join(self.tmp.name, "rnd")])
        self.assertIn("| F | 7 | 1 s | 0123456789 | 3/4 (drop 1/2, partition 2/2) | 31 s, "
                      "229 ms | no violation | as expected |", line_of(page, "| F | 7 |"))
        self.assertLess(page.index("kept notes"), page.index("| F | 7 |"))
        self.assertLess(page.index("| F | 7 |"), page.index("what was found"))

    def test_a_case_without_a_test_says_so_and_results_are_read(self):
        cases = [("B1", "x", "`suite.one`, `suite.two`; fault F01", ""),
                 ("B2", "y", "nothing named", "all of it")]
        tests = {"tests": {"suite.one": {"result": "passed"},
                           "suite.two": {"result": "failed"}}}
        rows, _ = safety_doc.merge(safety_doc.load_results([self.new]), SCENARIOS)
        got = {c[0]: c[4] for c in safety_doc.coverage_results(cases, tests, rows, SCENARIOS)}
        self.assertEqual(got["B1"], "1 passed; 1 failed (suite.two); fault F01: 6 / 7 as "
                                    "expected")
        self.assertEqual(got["B2"], "no test")


class Campaign(unittest.TestCase):
    def test_seed_ranges(self):
        self.assertEqual(campaign.seeds("1-3,7"), [1, 2, 3, 7])

    def test_a_present_result_is_done_unless_skipped_or_cut_off(self):
        with tempfile.TemporaryDirectory() as t:
            p = os.path.join(t, "F01-S.json")
            self.assertFalse(campaign.done(p))
            with open(p, "w") as f:
                f.write('{"verdict": "as exp')
            self.assertFalse(campaign.done(p))
            for verdict, want in (("NOT as expected", True), ("skipped", False)):
                with open(p, "w") as f:
                    json.dump({"verdict": verdict}, f)
                self.assertEqual(campaign.done(p), want)

    def test_every_mode_of_every_row_is_a_campaign_row(self):
        got = {"%s.%s" % (sc.id, m) for sc, m in campaign.rows(None)}
        self.assertIn("F11.FOW", got)  # extended
        self.assertIn("Z01.ZK", got)   # another backend
        self.assertEqual({"%s.%s" % (sc.id, m) for sc, m in campaign.rows(r"^F0[12]\.S$")},
                         {"F01.S", "F02.S"})


if __name__ == "__main__":
    unittest.main()
