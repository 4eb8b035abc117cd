#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nudgeproject.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting the deployment must give (SECRET_KEY, a database address…): one
        # line that names it, not a traceback through Django's start-up.
        sys.stderr.write(f"nudge: {exc} (docs/OPERATIONS.md lists the settings)\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
