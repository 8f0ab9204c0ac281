"""random_tier.py's pure parts: the fault kinds per mode and how long a cut lasts (FO: under
down-after-milliseconds on the master), the fault tally, the quiet time and the liveness bound
(a failover's own recovery), and whether a worker's call met a window (ctest:
random_tier_judges_faults_and_liveness, label unit; no server)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_tier as rt  # noqa: E402


class Tally(unittest.TestCase):
    def test_counts_scheduled_and_fired_per_kind_with_every_kind_listed(self):
        got = rt.tally([{"kind": "drop", "fired": True}, {"kind": "drop", "fired": False},
                        {"kind": "partition", "fired": True}])
        self.assertEqual(got["drop"], {"scheduled": 2, "fired": 1})
        self.assertEqual(got["partition"], {"scheduled": 1, "fired": 1})
        self.assertEqual(got["clock-back"], {"scheduled": 0, "fired": 0})
        self.assertEqual(set(got), set(rt.KINDS))

    def test_lists_the_kinds_of_the_mode_it_is_given(self):
        got = rt.tally([{"kind": "failover", "fired": True}], rt.kinds("FO"))
        self.assertEqual(got["failover"], {"scheduled": 1, "fired": 1})
        self.assertEqual(set(got), set(rt.kinds("FO")))
        self.assertNotIn("clock-back", got)


class Kinds(unittest.TestCase):
    def test_the_modes_without_failover_keep_their_list_and_order(self):
        # the schedule of a seed in S, F and R is the one it was before FO (rng.choice on it)
        before = ["drop", "reset", "hold", "blackhole", "delay-down", "partition", "stall",
                  "crash", "flush", "restart-aof", "clock-back", "worker-clock"]
        self.assertEqual(rt.kinds("S"), before)
        self.assertEqual(rt.kinds("F"), before)
        self.assertEqual(rt.kinds("R"), [k for k in before if k != "restart-aof"])
        self.assertEqual(rt.kinds("F", partitions=False),
                         [k for k in before if k != "partition"])

    def test_fo_adds_the_coordinated_failover_and_drops_restart_and_clock_steps(self):
        fo = rt.kinds("FO")
        self.assertIn("failover", fo)
        self.assertNotIn("restart-aof", fo)
        self.assertNotIn("clock-back", fo)
        for k in ("drop", "reset", "hold", "blackhole", "delay-down", "partition", "stall",
                  "crash", "flush", "worker-clock"):
            self.assertIn(k, fo)
        self.assertNotIn("partition", rt.kinds("FO", partitions=False))


class CutMs(unittest.TestCase):
    def test_a_cut_of_the_fo_master_stays_under_half_of_down_after(self):
        for k in ("blackhole", "partition", "stall"):
            lo, hi = rt.cut_ms(k, "FO", on_master=True)
            self.assertLessEqual(lo, hi)
            self.assertLess(hi, rt.FO_DOWN_AFTER_MS / 2)

    def test_a_replica_and_the_other_modes_keep_the_usual_lengths(self):
        self.assertEqual(rt.cut_ms("partition", "FO", on_master=False), (200, 2000))
        self.assertEqual(rt.cut_ms("stall", "FO", on_master=False), (100, 2000))
        self.assertEqual(rt.cut_ms("blackhole", "F", on_master=True), (200, 2000))
        self.assertEqual(rt.cut_ms("stall", "S", on_master=True), (100, 2000))
        self.assertEqual(rt.cut_ms("delay-down", "FO", on_master=True), (200, 2000))

    def test_the_failover_recovery_adds_one_lease_of_lock_delay(self):
        self.assertEqual(rt.FO_RECOVERY_MS, rt.RECOVERY_MS + 1000)


class Quiet(unittest.TestCase):
    def test_windows_are_stretched_by_the_recovery_and_merged(self):
        self.assertEqual(rt.quiet([(10, 20), (25, 30)], 0, 100, 10), [(0, 10), (40, 100)])

    def test_a_window_past_the_end_leaves_only_what_comes_before(self):
        self.assertEqual(rt.quiet([(50, 200)], 0, 100, 5), [(0, 50)])

    def test_a_window_with_its_own_recovery_is_stretched_by_it(self):
        self.assertEqual(rt.quiet([(10, 20, 30), (60, 70)], 0, 100, 5),
                         [(0, 10), (50, 60), (75, 100)])

    def test_no_window_is_all_quiet_and_a_covered_run_none(self):
        self.assertEqual(rt.quiet([], 0, 100, 5), [(0, 100)])
        self.assertEqual(rt.quiet([(0, 100)], 0, 100, 5), [])


class Liveness(unittest.TestCase):
    def test_acquisitions_in_every_quiet_stretch_pass(self):
        total, longest, bad = rt.liveness([5, 12, 50, 60, 75, 90], [(20, 30)], 0, 100, 10, 20)
        self.assertEqual((total, bad), (80, []))
        self.assertEqual(longest, 15)  # 75 .. 90, and 90 .. 100

    def test_a_quiet_stretch_without_an_acquisition_is_named(self):
        _, longest, bad = rt.liveness([5, 50], [(10, 20)], 0, 100, 10, 20)
        self.assertEqual(bad, [(50, 100)])
        self.assertEqual(longest, 50)

    def test_a_gap_inside_a_stretched_fault_is_not_counted(self):
        # no acquisition from 10 to 45: the fault (10 .. 20) and its recovery (.. 40) cover it
        _, _, bad = rt.liveness([5, 45, 60], [(10, 20)], 0, 70, 20, 20)
        self.assertEqual(bad, [])

    def test_a_failover_gap_inside_its_longer_recovery_is_not_counted(self):
        # a failover (10 .. 20) with recovery 40: no acquisition until 55 is no violation
        _, _, bad = rt.liveness([5, 55, 70], [(10, 20, 40)], 0, 80, 10, 20)
        self.assertEqual(bad, [])
        _, _, bad = rt.liveness([5, 55, 70], [(10, 20)], 0, 80, 10, 20)
        self.assertEqual(bad, [(30, 55)])

    def test_the_time_from_the_end_of_a_recovery_to_the_first_acquisition_counts(self):
        _, _, bad = rt.liveness([70], [(10, 20)], 0, 80, 20, 10)
        self.assertEqual(bad, [(40, 70)])


class InFlight(unittest.TestCase):
    def ev(self, op, typ, t):
        return {"w": 1, "op": op, "type": typ, "t": t}

    def test_a_call_overlapping_the_window_met_it(self):
        evs = [self.ev(1, "invoke", 0), self.ev(1, "ok", 5), self.ev(2, "invoke", 8),
               self.ev(2, "ok", 12)]
        self.assertTrue(rt.in_flight(evs, 10, 20))
        self.assertFalse(rt.in_flight(evs, 6, 7))
        self.assertFalse(rt.in_flight(evs, 13, 20))

    def test_a_call_that_never_completed_met_a_later_window(self):
        self.assertTrue(rt.in_flight([self.ev(1, "invoke", 3)], 10, 20))
        self.assertFalse(rt.in_flight([self.ev(1, "invoke", 30)], 10, 20))


if __name__ == "__main__":
    unittest.main()
