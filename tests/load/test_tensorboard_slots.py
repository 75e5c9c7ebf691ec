"""One user holding a request open on every TensorBoard the console may run: another user still
gets one (the holder's board idle the longest among theirs is stopped), and the holder asking for
yet another is told why not. Real TensorBoards, from their own environment."""

from __future__ import annotations

import pytest
from django.conf import settings

from jobs.tensorboard.boards import Boards, Busy
from tests.helpers.metrics import write_event_file


@pytest.fixture
def logdirs():
    folders = [settings.STORAGE_DIR / "boards" / f"run-{n}" for n in range(4)]
    for folder in folders:
        write_event_file(folder / "train" / "events.out.tfevents.1700000000.host", 3)
    return [str(folder) for folder in folders]


@pytest.mark.executor
def test_one_user_holding_every_tensorboard_leaves_another_user_one(logdirs, settings):
    settings.TENSORBOARD_MAX = 2
    boards = Boards()
    try:
        # The holder's requests never end (a client that reads nothing of TensorBoard's answer).
        held = [boards.acquire(f"p/holder_{n}", logdirs[n], f"/tb/holder_{n}", user="holder") for n in range(2)]
        assert all(board.alive for board in held)

        theirs = boards.acquire("p/other", logdirs[2], "/tb/other", user="other")

        assert theirs.alive
        assert sorted(boards.running()) == ["p/holder_1", "p/other"]  # the holder's older one made room
        with pytest.raises(Busy, match="AICONSOLE_TENSORBOARD_MAX"):
            boards.acquire("p/holder_2", logdirs[3], "/tb/holder_2", user="holder")  # one each now: even
    finally:
        boards.stop_all()
