"""A training job's own part of its page: its input in words (the runtime and the Python it ran,
packages or container images, machines, GPUs), its metric curves, and the same job written as a
command line and a REST body (``equivalent``). Tuning and built-in algorithm jobs show these too,
after their own sections."""
