"""Pure pieces of the executor: bytes to log lines, severities, TF_CONFIG, exit statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.catalogue import ReplicaPlan
from jobs.executor.replicas import (
    Placement,
    cluster_configs,
    exit_description,
    traceback_tail,
    trainer_command,
)
from jobs.logs.lines import LineSplitter, TracebackTracker, detect_severity


def split(chunks: list[bytes], max_bytes: int = 1000) -> list[str]:
    """Feed the chunks one by one, then close, and return every line produced."""
    splitter = LineSplitter(max_bytes)
    lines: list[str] = []
    for chunk in chunks:
        lines += list(splitter.feed(chunk))
    lines += list(splitter.close())
    return lines


# --- LineSplitter -------------------------------------------------------------------------------


def test_progress_bar_redrawn_with_carriage_returns_keeps_only_its_last_state():
    assert split([b"10%\r50%\r100%\ndone\n"]) == ["100%", "done"]


def test_progress_bar_folded_across_chunks_yields_nothing_until_the_line_ends():
    splitter = LineSplitter(1000)

    assert list(splitter.feed(b"10%\r")) == []
    assert list(splitter.feed(b"50%\r60")) == []
    assert list(splitter.feed(b"%\r100%")) == []
    assert list(splitter.feed(b"\n")) == ["100%"]


def test_progress_bar_redrawn_many_times_with_trailing_carriage_returns_stays_one_line():
    # print(f"{percent}%", end="\r") style: each redraw ends with \r. However often it redraws,
    # the bar must not pile up into a cut line full of old states.
    splitter = LineSplitter(1000)
    emitted = []
    for percent in range(100):
        emitted += list(splitter.feed(f"{percent:3d}% [{'#' * (percent // 10):<10}]\r".encode()))

    assert emitted == []
    assert list(splitter.feed(b"\n")) == [" 99% [######### ]"]


def test_crlf_line_endings_give_clean_lines():
    assert split([b"first\r\nsecond\r\n"]) == ["first", "second"]


def test_crlf_split_between_chunks_gives_a_clean_line():
    assert split([b"first\r", b"\nsecond\r\n"]) == ["first", "second"]


def test_line_longer_than_max_is_cut_with_a_marker():
    (line,) = split([b"x" * 25 + b"\n"], max_bytes=10)

    assert line == "x" * 10 + " … [line cut: 15 more bytes]"


def test_long_line_spread_over_several_feeds_is_cut_once_and_the_rest_skipped():
    lines = split([b"a" * 16, b"b" * 16, b"c" * 3 + b"\nnext line\n"], max_bytes=10)

    assert len(lines) == 2, lines
    assert lines[0].startswith("a" * 10 + " … [line cut: ")
    assert lines[1] == "next line"


def test_cut_marker_counts_every_byte_dropped_from_a_line_spread_over_feeds():
    lines = split([b"a" * 16, b"b" * 4 + b"\n"], max_bytes=10)

    # 20 bytes were printed, 10 were kept: 10 were dropped, not just the 6 seen in the first chunk.
    assert lines == ["a" * 10 + " … [line cut: 10 more bytes]"]


def test_invalid_utf8_is_replaced_not_fatal():
    assert split([b"caf\xc3 ok\n", b"\xff\xfe\n"]) == ["caf\ufffd ok", "\ufffd\ufffd"]


def test_utf8_character_split_between_chunks_is_decoded_whole():
    assert split([b"caf\xc3", b"\xa9\n"]) == ["café"]


def test_nul_bytes_are_replaced():
    assert split([b"a\x00b\n"]) == ["a\ufffdb"]


def test_close_flushes_a_final_unterminated_line():
    splitter = LineSplitter(1000)

    assert list(splitter.feed(b"complete\nno newline at the end")) == ["complete"]
    assert list(splitter.close()) == ["no newline at the end"]
    assert list(splitter.close()) == []


def test_close_with_nothing_buffered_yields_nothing():
    assert split([b"one\n"]) == ["one"]


def test_empty_lines_are_kept():
    assert split([b"a\n\nb\n"]) == ["a", "", "b"]


# --- detect_severity ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INFO:root:x", "INFO"),
        ("DEBUG:root:x", "DEBUG"),
        ("WARNING:tf:x", "WARNING"),
        ("WARNING:tensorflow:From train.py:12: deprecated", "WARNING"),
        ("ERROR:root:boom", "ERROR"),
        ("CRITICAL:root:x", "CRITICAL"),
        ("2024-01-01 12:00:00,123 - root - INFO - loading data", "INFO"),
        ("2024-01-01 12:00:00,123 WARNING low disk", "WARNING"),
        ("I1121 12:00:00.000000  1234 file.cc:12] started", "INFO"),
        ("W1121 12:00:00.000000  1234 file.cc:12] slow", "WARNING"),
        ("E1121 12:00:00.000000  1234 file.cc:12] failed", "ERROR"),
        ("F1121 12:00:00.000000  1234 file.cc:12] dead", "CRITICAL"),
        ("[ERROR] something broke", "ERROR"),
        ("[WARN] careful", "WARNING"),
        ("Traceback (most recent call last):", "ERROR"),
    ],
)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_severity_comes_from_the_logging_prefix_on_either_stream(text, expected, stream):
    assert detect_severity(text, stream) == expected


def test_plain_stdout_line_is_info():
    assert detect_severity("epoch 1 loss 0.25", "stdout") == "INFO"


def test_plain_stderr_line_is_info_not_error():
    assert detect_severity("something on stderr", "stderr") == "INFO"


@pytest.mark.parametrize(
    "text",
    [
        " 45%|████▌     | 45/100 [00:02<00:03, 18.2it/s]",
        "Epoch 1/3: 100%|██████████| 10/10 [00:00<00:00, 123.45it/s, loss=0.25]",
        "Downloading data from https://example.com/mnist.npz",
        "",
    ],
)
def test_progress_bars_and_chatter_on_stderr_are_info(text):
    assert detect_severity(text, "stderr") == "INFO"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/usr/lib/python3/site-packages/sklearn/base.py:12: UserWarning: X has feature names", "WARNING"),
        ("train.py:3: DeprecationWarning: use the new API", "WARNING"),
        ("Warning: the learning rate is high", "WARNING"),
        ("ValueError: could not convert string to float: 'x'", "ERROR"),
        ("tensorflow.python.framework.errors_impl.NotFoundError: /data/x.csv", "ERROR"),
        ("KeyError", "ERROR"),
        ("Error: the data file is missing", "ERROR"),
        ("task.py: error: the following arguments are required: --layers", "ERROR"),
        ("During handling of the above exception, another exception occurred:", "ERROR"),
        ("ERROR:root:boom", "ERROR"),
        ("CRITICAL:root:dead", "CRITICAL"),
        ("E0101 12:00:00.000000  1234 file.cc:12] failed", "ERROR"),
        ("the validation error is 0.1", "INFO"),
        ("no errors found", "INFO"),
    ],
)
def test_a_stderr_line_is_an_error_only_when_it_says_so(text, expected):
    assert detect_severity(text, "stderr") == expected


# A runtime environment's site-packages, as a root console's trainers see it: the path alone is
# longer than the first 120 characters that decided a line's severity before.
SITE_PACKAGES = (
    "/var/cache/aiconsole/envs/runtime-2.11-cpu-py3.7-3f9a1c2b7d4e5f60/job-layer-8c1d2e3f4a5b6c7d"
    "/lib/python3.7/site-packages"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"{SITE_PACKAGES}/tensorflow/python/framework/dtypes.py:516: FutureWarning: Passing (type, 1) or "
            "'1type' as a synonym of type is deprecated",
            "WARNING",
        ),
        (
            f"{SITE_PACKAGES}/sklearn/utils/deprecation.py:87: DeprecationWarning: Function load_boston is deprecated",
            "WARNING",
        ),
        (f"{SITE_PACKAGES}/xgboost/core.py:617: UserWarning: Use subset (sliced data) of np.ndarray", "WARNING"),
        (f"{SITE_PACKAGES}/{'deep/' * 700}x.py:12: RuntimeWarning: invalid value", "WARNING"),
        (f"WARNING:tensorflow:From {SITE_PACKAGES}/tensorflow/x.py:12: The name tf.Session is deprecated", "WARNING"),
        ("W1126 10:04:41.123456 140000000 " + "x" * 200 + ".py:12] slow", "WARNING"),
        (f"{SITE_PACKAGES}/sklearn/linear_model/_logistic.py:814: ConvergenceWarning lbfgs failed", "INFO"),
        ("  warnings.warn(" + "x" * 300 + ": UserWarning: indented source line", "INFO"),
        (f"{SITE_PACKAGES}/x.py:12 is where the data lives", "INFO"),
    ],
)
def test_a_python_warning_is_a_warning_however_long_the_path_before_it(text, expected):
    assert len(text) > 120
    assert detect_severity(text, "stderr") == expected


def test_what_a_line_says_is_read_from_its_first_4_kb_only():
    far = "x" * 5000 + "/x.py:12: UserWarning: too far to read"
    assert detect_severity(far, "stderr") == "INFO"


def test_every_line_of_a_traceback_is_an_error_and_it_ends_at_the_exception():
    tracker = TracebackTracker()
    lines = [
        "100%|██████████| 10/10",
        "Traceback (most recent call last):",
        '  File "/job/trainer/task.py", line 12, in <module>',
        "    main()",
        "ZeroDivisionError: division by zero",
        " 10%|█         | 1/10",
    ]
    severities = [tracker.severity(("master-replica-0", "", "stderr"), line, "stderr") for line in lines]
    assert severities == ["INFO", "ERROR", "ERROR", "ERROR", "ERROR", "INFO"]


def test_a_traceback_on_one_replica_does_not_colour_anothers_lines():
    tracker = TracebackTracker()
    tracker.severity(("master-replica-0", "", "stderr"), "Traceback (most recent call last):", "stderr")
    assert tracker.severity(("worker-replica-0", "", "stderr"), "  indented progress", "stderr") == "INFO"
    assert tracker.severity(("master-replica-0", "", "stderr"), '  File "x.py", line 1', "stderr") == "ERROR"


def test_lowercase_words_are_not_mistaken_for_levels():
    assert detect_severity("error rate is 0.1", "stdout") == "INFO"
    assert detect_severity("INFORMATION follows", "stdout") == "INFO"
    assert detect_severity("INFORMATION follows", "stderr") == "INFO"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "2023-01-18 10:04:41.123456: I tensorflow/core/platform/cpu_feature_guard.cc:193] "
            "This TensorFlow binary is optimized",
            "INFO",
        ),
        (
            "2023-01-18 10:04:41.123456: W tensorflow/tsl/platform/profile_utils/cpu_utils.cc:128] "
            "Failed to get CPU frequency",
            "WARNING",
        ),
        (
            "2023-01-18 10:04:41.123456: E tensorflow/compiler/xla/stream_executor/cuda/"
            "cuda_driver.cc:266] failed call to cuInit",
            "ERROR",
        ),
    ],
)
def test_tensorflow_native_log_lines_on_stderr_get_their_own_severity(text, expected):
    # TensorFlow's C++ logging writes "<date> <time>.<micros>: <L> file:line] message" to stderr;
    # every such INFO line must not show up as ERROR.
    assert detect_severity(text, "stderr") == expected


# --- cluster_configs ----------------------------------------------------------------------------


def placements(*roles: tuple[str, int]) -> list[Placement]:
    result = []
    port = 20000
    for task_type, count in roles:
        for index in range(count):
            plan = ReplicaPlan(task_type, index, "n1-standard-4", None, 0)
            result.append(Placement(plan, "127.0.0.1", port))
            port += 1
    return result


TRAINING_INPUT = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "us-central1"}


def test_tf_config_names_the_master_chief_when_asked():
    configs = cluster_configs(
        placements(("master", 1), ("worker", 2)), job_id="j1", training_input=TRAINING_INPUT, use_chief=True
    )

    tf_config, cluster_spec = configs["master-replica-0"]
    assert tf_config["cluster"] == {"chief": ["127.0.0.1:20000"], "worker": ["127.0.0.1:20001", "127.0.0.1:20002"]}
    assert tf_config["task"] == {"type": "chief", "index": 0}
    assert tf_config["environment"] == "cloud"
    assert tf_config["job"]["job_name"] == "j1"
    assert tf_config["job"]["masterType"] == "n1-standard-4"
    # CLUSTER_SPEC always says master.
    assert cluster_spec["task"] == {"type": "master", "index": 0}
    assert cluster_spec["cluster"]["master"] == ["127.0.0.1:20000"]
    assert configs["worker-replica-1"][0]["task"] == {"type": "worker", "index": 1}


def test_tf_config_names_the_master_master_for_old_runtimes():
    configs = cluster_configs(
        placements(("master", 1), ("ps", 1)), job_id="j1", training_input=TRAINING_INPUT, use_chief=False
    )

    tf_config, _ = configs["master-replica-0"]
    assert tf_config["cluster"] == {"master": ["127.0.0.1:20000"], "ps": ["127.0.0.1:20001"]}
    assert tf_config["task"] == {"type": "master", "index": 0}
    assert configs["ps-replica-0"][0]["task"] == {"type": "ps", "index": 0}


def test_evaluator_is_left_out_of_tf_config_cluster_but_listed_in_cluster_spec():
    configs = cluster_configs(
        placements(("master", 1), ("worker", 1), ("evaluator", 1)),
        job_id="j1",
        training_input=TRAINING_INPUT,
        use_chief=True,
    )

    tf_config, cluster_spec = configs["evaluator-replica-0"]
    assert "evaluator" not in tf_config["cluster"]
    assert tf_config["task"] == {"type": "evaluator", "index": 0}
    assert cluster_spec["cluster"]["evaluator"] == ["127.0.0.1:20002"]
    assert set(cluster_spec["cluster"]) == {"master", "worker", "evaluator"}
    assert set(configs) == {"master-replica-0", "worker-replica-0", "evaluator-replica-0"}


def test_trial_id_is_added_to_both_tasks_when_given():
    configs = cluster_configs(
        placements(("master", 1)), job_id="j1", training_input=TRAINING_INPUT, use_chief=True, trial_id="3"
    )

    tf_config, cluster_spec = configs["master-replica-0"]
    assert tf_config["task"] == {"type": "chief", "index": 0, "trial": "3"}
    assert cluster_spec["task"] == {"type": "master", "index": 0, "trial": "3"}


def test_no_trial_key_without_a_trial():
    tf_config, cluster_spec = cluster_configs(
        placements(("master", 1)), job_id="j1", training_input=TRAINING_INPUT, use_chief=True
    )["master-replica-0"]

    assert "trial" not in tf_config["task"]
    assert "trial" not in cluster_spec["task"]


# --- trainer_command, exit_description, traceback_tail -----------------------------------------


def test_trainer_command_puts_job_dir_after_user_args():
    command = trainer_command(Path("/env/bin/python"), "trainer.task", ["out", "--lr", "0.1"], "/data/job")

    assert command == ["/env/bin/python", "-m", "trainer.task", "out", "--lr", "0.1", "--job-dir", "/data/job"]


def test_trainer_command_without_job_dir_has_no_job_dir_flag():
    assert trainer_command(Path("/env/bin/python"), "trainer.task", [], None) == [
        "/env/bin/python",
        "-m",
        "trainer.task",
    ]


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [(-9, "9(SIGKILL)"), (-15, "15(SIGTERM)"), (-11, "11(SIGSEGV)"), (1, "1"), (0, "0"), (-40, "40(signal 40)")],
)
def test_exit_description_writes_signals_as_the_original_does(returncode, expected):
    assert exit_description(returncode) == expected


def test_traceback_tail_returns_the_last_traceback():
    lines = [
        "starting",
        "Traceback (most recent call last):",
        '  File "a.py", line 1',
        "KeyError: 'first'",
        "retrying",
        "Traceback (most recent call last):",
        '  File "task.py", line 9, in <module>',
        "ValueError: bad input",
    ]

    assert traceback_tail(lines) == (
        'Traceback (most recent call last):\n  File "task.py", line 9, in <module>\nValueError: bad input'
    )


def test_traceback_tail_without_a_traceback_gives_the_last_ten_lines():
    lines = [f"line {n}" for n in range(30)]

    assert traceback_tail(lines) == "\n".join(f"line {n}" for n in range(20, 30))


def test_traceback_tail_keeps_only_the_end_of_a_very_long_traceback():
    lines = ["Traceback (most recent call last):"] + [f"  frame {n}" for n in range(100)]

    tail = traceback_tail(lines, limit=5)

    assert tail.splitlines() == [f"  frame {n}" for n in range(95, 100)]
