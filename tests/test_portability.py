"""Numeric profiles: the suite's report names the one it computes with and refuses one that did not
take; experiments/portability/: run.sh runs the suite natively and under both profiles, each
writing a junit report, and margins.py tabulates the values the tests recorded."""

import os
import stat
import subprocess
import sys

from tests.helpers import ROOT

MARGINS = ROOT / "experiments" / "portability" / "margins.py"


def report(path, cases: list[tuple[str, dict[str, float], bool]]) -> None:
    """A junit XML report as pytest writes it: (test, recorded values, failed) per case."""
    rows = []
    for name, values, failed in cases:
        props = "".join(f'<property name="{k}" value="{v}"/>' for k, v in values.items())
        rows.append(f'<testcase classname="tests.e2e.test_x" name="{name}"><properties>{props}</properties>'
                    + ('<failure message="no"/>' if failed else "") + "</testcase>")
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{"".join(rows)}</testsuite>'
                    "</testsuites>")


def test_margins_puts_each_recorded_value_beside_its_others_and_lists_the_failures(tmp_path):
    report(tmp_path / "a.xml", [("test_bleu", {"bleu": 99.04123, "gap": -0.0687}, False), ("test_other", {}, True)])
    report(tmp_path / "b.xml", [("test_bleu", {"bleu": 98.4}, False)])
    result = subprocess.run([sys.executable, str(MARGINS), f"native={tmp_path}/a.xml", f"avx2={tmp_path}/b.xml"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "| test | value | native | avx2 |", "|---|---|---:|---:|",
        "| `test_x::test_bleu` | bleu | 99.04 | 98.4 |", "| `test_x::test_bleu` | gap | -0.0687 | - |",
        "", "native: 1 failed: test_x::test_other", "", "avx2: no test failed"]


def test_margins_refuses_a_missing_report_or_a_label_without_one_in_one_line(tmp_path):
    for arg, message in ((f"native={tmp_path}/none.xml", f"error: {tmp_path}/none.xml: "), ("native", "LABEL=REPORT")):
        result = subprocess.run([sys.executable, str(MARGINS), arg], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and message in result.stderr and len(result.stderr.splitlines()) == 1


def test_run_sh_runs_the_suite_natively_then_under_each_profile_and_tabulates(tmp_path):
    """With a stand-in for make that writes the report its PYTEST_ARGS name: three passes in order,
    then the table, in OUT/margins.md."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "make"
    fake.write_text(f"""#!{sys.executable}
import sys
args = sys.argv[1:]
with open({str(tmp_path / "calls")!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
junit = next(a for a in args if a.startswith("PYTEST_ARGS=")).split("=", 2)[2]
case = '<testcase classname="tests.e2e.test_x" name="test_bleu"><properties>'
case += f'<property name="bleu" value="{{len(args)}}"/></properties></testcase>'
open(junit, "w").write(f'<testsuites><testsuite name="pytest">{{case}}</testsuite></testsuites>')
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(ROOT / "experiments" / "portability" / "run.sh"), str(tmp_path / "out")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"test PYTEST_ARGS=--junitxml={out}/native.xml",
        f"test-portable PORTABLE=avx2 PYTEST_ARGS=--junitxml={out}/avx2.xml",
        f"test-portable PORTABLE=default PYTEST_ARGS=--junitxml={out}/default.xml"]
    assert "| `test_x::test_bleu` | bleu | 2 | 3 | 3 |" in (out / "margins.md").read_text()


def collect(capability: str) -> subprocess.CompletedProcess:
    """pytest --collect-only of this file with ATEN_CPU_CAPABILITY=`capability`."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "test_portability.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_report_names_its_profile_and_one_that_does_not_take_stops_the_suite_in_one_line():
    """The header names the CPU and the profile; ATEN_CPU_CAPABILITY naming a code path torch does
    not take here (zvector: IBM Z's) stops pytest before any test: a second pass computing as the
    first would pass for what it is not."""
    held = collect("default")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "\nnumeric profile: " in held.stdout
    assert "torch computing with DEFAULT, ATEN_CPU_CAPABILITY=default" in held.stdout
    refused = collect("zvector")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "ATEN_CPU_CAPABILITY=zvector, but torch computes with" in refused.stderr
    assert "the numeric profile did not take" in refused.stderr
