"""Reading trial metrics from TF event files without TensorFlow: both scalar forms, runs, polls."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from tensorboard.compat.proto import (
    event_pb2,
    summary_pb2,
    tensor_pb2,
    tensor_shape_pb2,
    types_pb2,
)
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from jobs.metrics.tfevents import EventScanner, Scalar, scalars_under

WALL = 1_700_000_000.0


def simple(tag: str, value: float) -> summary_pb2.Summary.Value:
    """A TF 1.x / Estimator / tf.compat.v1 scalar."""
    return summary_pb2.Summary.Value(tag=tag, simple_value=value)


def tensor_value(tag: str, plugin: str, tensor: tensor_pb2.TensorProto) -> summary_pb2.Summary.Value:
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin))
    return summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)


def shape(*dims: int) -> tensor_shape_pb2.TensorShapeProto:
    return tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=size) for size in dims])


def keras_scalar(tag: str, value: float) -> summary_pb2.Summary.Value:
    """As tf.summary.scalar (Keras' TensorBoard callback) writes it: float32 bytes, shape []."""
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT, tensor_shape=shape(), tensor_content=struct.pack("<f", value)
    )
    return tensor_value(tag, "scalars", tensor)


def event(step: int, *values: summary_pb2.Summary.Value) -> event_pb2.Event:
    return event_pb2.Event(step=step, wall_time=WALL + step, summary=summary_pb2.Summary(value=list(values)))


def write_events(folder: Path, *events: event_pb2.Event) -> Path:
    """Write one event file with tensorboard's own writer and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    writer = EventFileWriter(str(folder))
    for each in events:
        writer.add_event(each)
    writer.close()
    (path,) = set(folder.iterdir()) - before
    return path


def values(scalars: list[Scalar]) -> list[tuple[str, str, int, float]]:
    return [(s.run, s.tag, s.step, s.value) for s in scalars]


def test_simple_value_scalars_are_read_with_step_and_wall_time(tmp_path):
    write_events(tmp_path, event(1, simple("loss", 0.5)), event(2, simple("loss", 0.25)))

    assert scalars_under(tmp_path) == [
        Scalar(tag="loss", step=1, value=0.5, wall_time=WALL + 1, run=""),
        Scalar(tag="loss", step=2, value=0.25, wall_time=WALL + 2, run=""),
    ]


def test_keras_tensor_scalars_are_read(tmp_path):
    write_events(tmp_path, event(0, keras_scalar("epoch_accuracy", 0.75)))

    assert values(scalars_under(tmp_path)) == [("", "epoch_accuracy", 0, 0.75)]


@pytest.mark.parametrize(
    "tensor",
    [
        tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape(), float_val=[0.75]),
        tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_shape=shape(), double_val=[0.75]),
        tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_shape=shape(), tensor_content=struct.pack("<d", 0.75)),
        tensor_pb2.TensorProto(
            dtype=types_pb2.DT_HALF,
            tensor_shape=shape(),
            half_val=[0x3A00],  # 0.75 as float16
        ),
    ],
    ids=["float32-val", "float64-val", "float64-content", "half"],
)
def test_float32_float64_and_half_tensor_scalars_are_read(tmp_path, tensor):
    write_events(tmp_path, event(3, tensor_value("epoch_accuracy", "scalars", tensor)))

    assert values(scalars_under(tmp_path)) == [("", "epoch_accuracy", 3, 0.75)]


def test_integer_scalar_tensor_without_plugin_is_read(tmp_path):
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT64, tensor_shape=shape(), int64_val=[7])
    write_events(tmp_path, event(1, tensor_value("examples", "", tensor)))

    assert values(scalars_under(tmp_path)) == [("", "examples", 1, 7.0)]


def test_train_and_validation_subfolders_give_run_names(tmp_path):
    write_events(tmp_path / "train", event(1, keras_scalar("epoch_loss", 0.5)))
    write_events(tmp_path / "validation", event(1, keras_scalar("epoch_loss", 0.75)))
    write_events(tmp_path / "eval" / "nested", event(1, simple("accuracy", 0.25)))

    assert sorted(values(scalars_under(tmp_path))) == [
        ("eval/nested", "accuracy", 1, 0.25),
        ("train", "epoch_loss", 1, 0.5),
        ("validation", "epoch_loss", 1, 0.75),
    ]


def test_images_histograms_and_text_are_skipped(tmp_path):
    image = summary_pb2.Summary.Value(
        tag="image", image=summary_pb2.Summary.Image(height=1, width=1, encoded_image_string=b"x")
    )
    histogram = summary_pb2.Summary.Value(tag="histo", histo=summary_pb2.HistogramProto(num=3))
    tf2_image = tensor_value(
        "tf2_image",
        "images",
        tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=shape(3), string_val=[b"1"] * 3),
    )
    tf2_histogram = tensor_value(
        "tf2_histo",
        "histograms",
        tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_shape=shape(2, 3), double_val=[0.0] * 6),
    )
    text = tensor_value(
        "text",
        "text",
        tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=shape(), string_val=[b"hi"]),
    )
    write_events(
        tmp_path,
        event(1, image, histogram, tf2_image, tf2_histogram, text, simple("loss", 0.5)),
    )

    assert values(scalars_under(tmp_path)) == [("", "loss", 1, 0.5)]


def test_incremental_polls_return_only_new_scalars(tmp_path):
    scanner = EventScanner(tmp_path)
    assert scanner.poll() == []

    writer = EventFileWriter(str(tmp_path / "train"))
    writer.add_event(event(1, keras_scalar("epoch_loss", 0.5)))
    writer.flush()
    assert values(scanner.poll()) == [("train", "epoch_loss", 1, 0.5)]
    assert scanner.poll() == []

    writer.add_event(event(2, keras_scalar("epoch_loss", 0.25)))
    writer.close()
    write_events(tmp_path / "validation", event(2, keras_scalar("epoch_loss", 0.75)))
    assert values(scanner.poll()) == [
        ("train", "epoch_loss", 2, 0.25),
        ("validation", "epoch_loss", 2, 0.75),
    ]
    assert scanner.poll() == []


@pytest.mark.parametrize("cut", [5, 12, 20], ids=["mid-header", "after-header", "mid-data"])
def test_record_truncated_mid_write_is_read_after_the_rest_is_appended(tmp_path, cut):
    source = write_events(tmp_path / "scratch", event(1, simple("loss", 0.5)), event(2, simple("loss", 0.25)))
    data = source.read_bytes()
    last_record = 8 + 4 + struct.unpack("<Q", data[:8])[0] + 4  # after the file_version event
    last_record += 8 + 4 + struct.unpack("<Q", data[last_record : last_record + 8])[0] + 4
    target = tmp_path / "job" / "events.out.tfevents.1.host"
    target.parent.mkdir()
    target.write_bytes(data[: last_record + cut])

    scanner = EventScanner(tmp_path / "job")
    assert values(scanner.poll()) == [("", "loss", 1, 0.5)]
    assert scanner.poll() == []

    with target.open("ab") as stream:
        stream.write(data[last_record + cut :])
    assert values(scanner.poll()) == [("", "loss", 2, 0.25)]
    assert scanner.poll() == []


def test_tag_filter_compares_tags_exactly(tmp_path):
    write_events(
        tmp_path,
        event(
            1,
            simple("accuracy", 0.5),
            simple("evaluation/accuracy", 0.75),
            simple("Taxi Model Accuracy", 0.25),
            keras_scalar("epoch_accuracy", 0.125),
        ),
    )

    found = scalars_under(tmp_path, tags={"Taxi Model Accuracy", "epoch_accuracy"})
    assert sorted(s.tag for s in found) == ["Taxi Model Accuracy", "epoch_accuracy"]
    assert [s.tag for s in scalars_under(tmp_path, tags={"accuracy"})] == ["accuracy"]
    assert scalars_under(tmp_path, tags=set()) == []


def test_symlink_loop_under_the_root_is_not_followed(tmp_path):
    write_events(tmp_path / "train", event(1, simple("loss", 0.5)))
    os.symlink(tmp_path, tmp_path / "train" / "loop")
    outside = write_events(tmp_path.parent / f"{tmp_path.name}-outside", event(1, simple("x", 1)))
    os.symlink(outside, tmp_path / "events.out.tfevents.linked")

    assert values(scalars_under(tmp_path)) == [("train", "loss", 1, 0.5)]


def test_corrupt_record_skips_the_rest_of_its_file_with_a_warning(tmp_path, caplog):
    bad = write_events(tmp_path / "bad", *(event(step, simple("loss", step / 4)) for step in range(1, 4)))
    write_events(tmp_path / "good", event(1, simple("loss", 0.5)))
    data = bytearray(bad.read_bytes())
    data[-5] ^= 0xFF  # the last byte of the last record's data
    bad.write_bytes(bytes(data))

    scanner = EventScanner(tmp_path)
    with caplog.at_level(logging.WARNING, logger="jobs.metrics.tfevents"):
        found = values(scanner.poll())
    assert found == [("bad", "loss", 1, 0.25), ("bad", "loss", 2, 0.5), ("good", "loss", 1, 0.5)]
    assert "Skipping the rest of event file" in caplog.text and str(bad) in caplog.text

    with bad.open("ab") as stream:
        stream.write(b"more")
    assert scanner.poll() == []


def test_bad_length_checksum_does_not_crash(tmp_path):
    path = write_events(tmp_path, event(1, simple("loss", 0.5)))
    path.write_bytes(path.read_bytes() + b"\xff" * 16)

    assert values(scalars_under(tmp_path)) == [("", "loss", 1, 0.5)]


def test_files_and_entries_past_the_bounds_are_left_quietly(tmp_path):
    for name in ("a", "b", "c"):
        write_events(tmp_path / name, event(1, simple("loss", 0.5)))

    assert len(EventScanner(tmp_path, max_files=2).poll()) == 2
    assert len(EventScanner(tmp_path, max_entries=4).poll()) == 1  # 3 folders, then 1 file
    assert EventScanner(tmp_path / "missing").poll() == []


def test_a_gs_job_dir_is_read_incrementally_through_cloud_storage(tmp_path, gcs_emulator, db):
    local = write_events(tmp_path / "train", event(0, simple("loss", 1.0)), event(1, simple("loss", 0.5)))
    data = local.read_bytes()
    first_record = 12 + struct.unpack("<Q", data[:8])[0] + 4  # the file-version event alone
    name = f"jobs/gs_scan/train/{local.name}"
    gcs_emulator.upload("tfevents-bucket", name, data[: first_record + 5])  # a torn record at the tail
    scanner = EventScanner("gs://tfevents-bucket/jobs/gs_scan")

    assert scanner.poll() == []
    gcs_emulator.upload("tfevents-bucket", name, data)  # the trainer flushed the rest
    assert values(scanner.poll()) == [("train", "loss", 0, 1.0), ("train", "loss", 1, 0.5)]
    assert scanner.poll() == []  # nothing new: nothing read twice
    assert EventScanner("gs://no-such-bucket-here/jobs").poll() == []  # a listing that fails reads nothing


def test_event_files_last_written_before_the_job_was_created_are_another_jobs(tmp_path):
    """A job dir a clone reuses: the original's event files are there already and are not this
    job's curves; what this job writes after its creation is."""
    old = write_events(tmp_path / "train", event(1, simple("loss", 9.0)))
    os.utime(old, (1_000_000, 1_000_000))  # written long before
    scanner = EventScanner(tmp_path, since=2_000_000)
    assert scanner.poll() == [] and scanner.earlier_files == 1
    write_events(tmp_path / "mine", event(1, simple("loss", 0.5)))
    assert values(scanner.poll()) == [("mine", "loss", 1, 0.5)]
    assert values(EventScanner(tmp_path).poll()) == [("mine", "loss", 1, 0.5), ("train", "loss", 1, 9.0)]
