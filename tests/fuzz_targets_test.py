#!/usr/bin/env python3
"""The fuzz targets are one list, CMakeLists.txt's FEDPROF_FUZZ_TARGETS: it names every
fuzz/fuzz_*.cc, each with a seed corpus and a row in fuzz/README.md, and `make fuzz`
(scripts/fuzz.sh) runs each target of it, as the build writes it to fuzz_targets.txt."""

import glob
import os
import re
import stat
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "fuzz", "fuzz_*.cc")))


def cmake_list():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"set\(FEDPROF_FUZZ_TARGETS\s+([^)]*)\)", text).group(1).split()


def test_the_list_names_every_file_of_fuzz_once():
    listed = cmake_list()
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == TARGETS


def test_every_target_has_a_corpus_and_a_row():
    assert len(TARGETS) >= 13
    readme = open(os.path.join(ROOT, "fuzz", "README.md")).read()
    for t in TARGETS:
        assert os.listdir(os.path.join(ROOT, "fuzz", "corpus", t)), t
        assert f"| `{t}` |" in readme, t


def test_no_second_list():
    # A target's own setting (fuzz_cifar's input length) may name it; a list would name several.
    text = open(os.path.join(ROOT, "scripts", "fuzz.sh")).read()
    named = [t for t in TARGETS if t in text]
    assert len(named) <= 1, f"scripts/fuzz.sh names {named}: the list is CMakeLists.txt's"


def test_make_fuzz_runs_every_target(tmp_path):
    # A build of stand-ins that say which target ran, as libFuzzer prints its end.
    ran = tmp_path / "ran"
    for t in TARGETS:
        stub = tmp_path / t
        stub.write_text(f"#!/bin/sh\necho {t} >> {ran}\necho '#1 DONE cov: 1 ft: 1 corp: 1/1b'\n"
                        "echo 'stat::number_of_executed_units: 1'\n")
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "fuzz_targets.txt").write_text("".join(t + "\n" for t in cmake_list()))
    done = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fuzz.sh"), str(tmp_path), "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(ran.read_text().split()) == TARGETS
    assert f"fuzz: {len(TARGETS)} targets" in done.stdout
