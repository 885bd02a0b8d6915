"""The short seeded run of the option-space fuzz (tests/e2e/option_space.py; `make fuzz`
runs 100,000 cases): 1,500 random POST /v1/jobs dry runs and 60 `place` processes over every
flag and policy, within and beyond the bounds. 0 signals, 0 exit 70, 0 HTTP 5xx, and every
accepted placement honours the request with no GPU twice."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import option_space  # noqa: E402


class OptionSpace(unittest.TestCase):
    def test_seeded_run(self):
        problems, http_done, cli_done = option_space.run(seed=35, http_cases=1500, cli_cases=60, seconds=600)
        self.assertEqual(problems[:20], [])
        self.assertEqual((http_done, cli_done), (1500, 60), "the run stopped at its time bound")


if __name__ == "__main__":
    unittest.main()
