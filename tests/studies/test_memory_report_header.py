#!/usr/bin/env python3
"""studies/memory_report.py's header names the pipelines the ebac workers
used, read from their per-tensor details, not a fixed text (it said `max`
for a month after `auto` became `balanced` on the host).

    /usr/bin/python3 -m unittest tests/studies/test_memory_report_header.py
"""
import os
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "studies"))
import memory_report as mr  # noqa: E402  (no torch at module level)

META = {"smoke": False, "command": "c", "wall_seconds": 60, "date": "d", "git": "g", "torch": "t",
        "torchvision": "tv", "python": "p", "machine": "m", "threads": 2, "device": "cpu", "blas": "b",
        "error_bound": 0.01, "steps": 2, "memory_method": "VmHWM"}


def network(details):
    return {"ways": {"ebac": {"ebac": {"details": details}}, "plain": {}}}


class Header(unittest.TestCase):
    def test_pipelines_from_details(self):
        results = [
            network([{"dtype": "float32", "pipeline": "balanced"},
                     {"dtype": "int64", "pipeline": "fast", "lossless": True},  # integer streams: not the float pipeline
                     {"dtype": "float32", "kept": "tiny"}]),
            network([{"dtype": "bfloat16", "pipeline": "ratio"}]),
            {"ways": {"plain": {}}},  # a network whose ebac worker failed
        ]
        self.assertEqual(mr.ebac_pipelines(results), ["balanced", "ratio"])
        text = "\n".join(mr._r_header(META, results))
        self.assertIn("pipeline `auto`: `balanced` and `ratio` on the host", text)
        self.assertNotIn("`max`", text)

    def test_device_and_nothing_compressed(self):
        text = "\n".join(mr._r_header(dict(META, device="cuda"), [network([])]))
        self.assertIn("pipeline `auto`: no float tensor compressed on the device cuda", text)


if __name__ == "__main__":
    unittest.main()
