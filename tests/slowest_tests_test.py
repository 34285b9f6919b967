"""scripts/slowest_tests.py, which `make test` ends with: the slowest tests
of a ctest log, passed or failed, and nothing else of the log."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("slowest_tests", os.path.join(ROOT, "scripts", "slowest_tests.py"))
slowest_tests = importlib.util.module_from_spec(spec)
spec.loader.exec_module(slowest_tests)

LOG = """Test project /work/build
    Start  51: DeployTest.ForeignCertificatesAndVersionsAreRefused
  1/583 Test  #51: DeployTest.ForeignCertificatesAndVersionsAreRefused .....   Passed   31.63 sec
  2/583 Test #151: SecAggAdversary.* ......................................   Passed   39.55 sec
 37/583 Test #403: FedProfCliTest.CompareRunsEveryStrategyOnTheSameClients ***Failed    6.21 sec
100/583 Test  #17: WireTest.* .............................................   Passed    0.68 sec
583/583 Test #577: python.api .............................................   Passed   65.90 sec

99% tests passed, 1 tests failed out of 583
Total Test time (real) = 779.31 sec
"""


def test_the_slowest_come_first_failed_ones_included():
    assert slowest_tests.slowest(LOG, 3) == [
        (65.9, "python.api"), (39.55, "SecAggAdversary.*"),
        (31.63, "DeployTest.ForeignCertificatesAndVersionsAreRefused")]
    assert (6.21, "FedProfCliTest.CompareRunsEveryStrategyOnTheSameClients") in slowest_tests.slowest(LOG)
    assert len(slowest_tests.slowest(LOG)) == 5  # the total and the start lines are no tests


def test_a_missing_log_is_one_line_naming_it(tmp_path):
    import subprocess
    import sys
    missing = str(tmp_path / "ctest.log")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "slowest_tests.py"), missing],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == f"slowest_tests: cannot read the ctest log {missing}: No such file or directory\n"
