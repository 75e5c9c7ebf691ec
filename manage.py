#!/usr/bin/env python
"""Django's command-line utility, for development tasks."""

import os
import sys

if __name__ == "__main__":
    os.umask(0o077)  # as ``aiconsole``'s commands: what the console creates is private to its user
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    from aiconsole import datadir

    datadir.prepare()

    execute_from_command_line(sys.argv)
