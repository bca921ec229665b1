"""CPU ranks share the host's cores: torchrun's OMP_NUM_THREADS=1 (set when the user set none) is not the user's
choice, and the software.torch_threads tag says what the ranks used, not what the launcher had."""

import json
import os
import subprocess
import sys

import pytest

from bridgetower_mlflow.accelerators.cpu import rank_threads

CORES = len(os.sched_getaffinity(0))


@pytest.mark.parametrize("env, parent, expected", [
    ({}, None, 16),  # nobody set it (mpirun, or torchrun with one rank): the cores shared out
    ({"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "r"}, {}, 16),  # torchrun set it: its parent had none
    ({"OMP_NUM_THREADS": "4", "TORCHELASTIC_RUN_ID": "r"}, {"OMP_NUM_THREADS": "4"}, None),  # the user's, kept
    ({"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "r"}, None, None),  # parent unreadable: the user's, kept
    ({"OMP_NUM_THREADS": "2"}, {}, None),  # not a torchrun rank: whoever set it meant it
])
def test_ranks_share_the_cores_unless_the_user_set_the_threads(env, parent, expected):
    assert rank_threads(2, cores=32, env=env, parent_env=lambda: parent) == expected


def test_one_process_keeps_what_torch_chose():
    assert rank_threads(1, cores=32, env={}, parent_env=lambda: {}) is None


def test_more_ranks_than_cores_still_get_one_thread_each():
    assert rank_threads(8, cores=2, env={}, parent_env=lambda: {}) == 1


RANK = """
import json, torch
from bridgetower_mlflow.accelerators.cpu import CpuAccelerator
info = CpuAccelerator("cpu").detect(2, 2)
print(json.dumps([info.software["torch_threads"], torch.get_num_threads()]))
"""
# a launcher that sets OMP_NUM_THREADS for its rank, as torchrun does where the user set none (torchrun's 1
# where that differs from the share the rank should take; torch caps the value at the host's cores)
LAUNCHER = """
import os, subprocess, sys
env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", sys.argv[2]),
           TORCHELASTIC_RUN_ID="truth", LOCAL_WORLD_SIZE="2")
sys.exit(subprocess.run([sys.executable, "-c", sys.argv[1]], env=env).returncode)
"""
LAUNCHERS_OWN = "1" if CORES // 2 != 1 else "2"
USERS_OWN = "2" if CORES // 2 != 2 else "1"


def _rank_threads_through_a_launcher(extra_env: dict) -> list:
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", LAUNCHER, RANK, LAUNCHERS_OWN], env={**env, **extra_env},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_rank_whose_launcher_set_the_threads_uses_its_share_and_says_so():
    expected = max(1, CORES // 2)
    assert _rank_threads_through_a_launcher({}) == [str(expected), expected]


def test_a_rank_keeps_the_threads_the_user_set_and_says_so():
    assert _rank_threads_through_a_launcher({"OMP_NUM_THREADS": USERS_OWN}) == [USERS_OWN, int(USERS_OWN)]
