"""The labels scripts/known_bug_runs.py gives a known bug's run from the bug's thread (issue 27
item 3): what the release it ran on should do in the bug's scenario."""

from __future__ import annotations

import sys

import pytest

from pulsar_audit.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))

from known_bug_runs import expected, found_labels  # noqa: E402


def test_autorecovery_bug_loses_the_second_disk_only_on_its_affected_release() -> None:
    bug = "apache/pulsar#21987"
    assert expected(bug, "3.0.0") == {"release_affected": True, "acked_loss": True}
    assert expected(bug, "3.0.2") == {"release_affected": False, "acked_loss": False}
    # 3.0.1's BookKeeper is not named in the thread: neither affected nor fixed there
    with pytest.raises(SystemExit, match="3.0.1 is neither affected nor fixed"):
        expected(bug, "3.0.1")


def test_the_earlier_bugs_keep_their_labels() -> None:
    assert expected("apache/pulsar#18236", "2.10.2") == {
        "release_affected": True,
        "acked_loss": True,
    }
    assert expected("apache/pulsar#23307", "4.0.7") == {
        "release_affected": False,
        "key_violations": 0,
    }


def test_found_labels_of_a_reader_that_stopped_short_are_unknown() -> None:
    assert found_labels({}) == {"acked_loss": False, "duplicates": False}
    assert found_labels({"valid": "false", "lost": 3}) == {"acked_loss": True, "duplicates": False}
    # stuck at the first lost entry (3.0.0 does not skip it): neither can be told
    stuck = {"valid": "unknown", "lost": 0, "unseen": 3000, "duplicated": 0}
    assert found_labels(stuck) == {"acked_loss": None, "duplicates": None}
    assert found_labels({**stuck, "duplicated": 2}) == {"acked_loss": None, "duplicates": True}
