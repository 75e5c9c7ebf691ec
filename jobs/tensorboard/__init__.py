"""TensorBoard for a job, behind the console: ``/projects/P/jobs/J/tensorboard/``.

- :mod:`.environment`: TensorBoard's own cached environment, built from ``requirements.txt``
  (hash-locked) the way the executor builds runtimes; TensorBoard never runs in the console's
  interpreter.
- :mod:`.boards`: one TensorBoard process per job dir (or trial dir), started on first use on a
  free port of 127.0.0.1 with ``--path_prefix`` set to its proxied URL, as the trainer user when
  trainers run as one, with the trainers' environment (``gs://`` credentials included); stopped
  after ``TENSORBOARD_IDLE_SECONDS`` without a request; at most ``TENSORBOARD_MAX`` at once.
- :mod:`.proxy`: the streaming HTTP forwarder, and :mod:`.views` the view that checks
  ``ml.jobs.get`` on every request and hands it on.
"""
