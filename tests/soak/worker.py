"""A long-lived sweep worker for the soak: ``python -m tests.soak.worker``.

Starting Django, Twilio's and Telegram's libraries costs about a second per
process; a soak of a few hundred simulated minutes with several workers per
minute cannot start a process per run and still fit in CI. So each steady
worker is one process that runs the real management commands (``deliver``,
``materialize``) through ``call_command``, one per line it is sent:

    {"cmd": "deliver", "now": "2026-12-03T08:00:00+00:00"}

and answers one JSON line on its original stdout: the exit code, and what
the command printed. Everything else (logs, a channel that prints) goes to
stderr. The faults that need a process of its own — SIGKILL mid-batch, a
terminated database connection — use ``manage.py`` processes instead
(``tests/support/processes.py``).

With ``NUDGE_SOAK_EPISODE=stall-in-slice`` the worker is the materialize
participant the soak SIGKILLs mid-cycle: on the N-th user it takes in
(``NUDGE_SOAK_EPISODE_AT``) it stamps the marker file and sleeps, holding its
slice, until it is killed.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
import time
import traceback
from pathlib import Path


def _stall_in_slice_if_asked() -> None:
    """Make this process stop mid-slice, its lease running out, as a dying host would.

    The slice's users are visited in milliseconds, so a kill timed from outside
    would usually land between slices; this makes "killed holding a slice" certain.
    """
    if os.environ.get("NUDGE_SOAK_EPISODE") != "stall-in-slice":
        return
    from sweeps import cycle
    from sweeps.materialize import UserFlow
    from tests.soak.channels import _mark

    at = int(os.environ["NUDGE_SOAK_EPISODE_AT"])
    marker = Path(os.environ["NUDGE_SOAK_MARKER"])
    taken = itertools.count(1)
    take_in = UserFlow.add

    def add(flow: UserFlow, user_id: int, tag: object = None) -> None:
        take_in(flow, user_id, tag)
        if next(taken) == at:
            _mark(marker, participant=cycle.participant_name(), user_id=user_id)
            time.sleep(120)  # killed long before this ends

    UserFlow.add = add  # type: ignore[method-assign]


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = sys.stderr  # nothing but protocol lines on the protocol stream
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nudgeproject.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    _stall_in_slice_if_asked()

    protocol.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        args = [request["cmd"], "--now", request["now"]]
        if request["cmd"] == "materialize":
            args.append("--no-sync")
        if request["cmd"] == "deliver":
            args.append("--simulated-clock")  # the soak's clock runs ahead of the database's
        code = 0
        started = time.perf_counter()
        try:
            if os.environ.get("NUDGE_SOAK_PROFILE"):
                import cProfile

                cProfile.runctx(
                    "call_command(*args, stdout=out, stderr=err)",
                    globals(),
                    {"call_command": call_command, "args": args, "out": out, "err": err},
                    f"{os.environ['NUDGE_SOAK_PROFILE']}.{os.getpid()}.{request['now'][11:16]}",
                )
            else:
                call_command(*args, stdout=out, stderr=err)
        except SystemExit as exc:  # the sweep command exits 1 when its run failed
            code = int(exc.code or 0)
        except Exception:
            code = 2
            err.write(traceback.format_exc())
            connection.close()  # as a fresh cron process would start
        protocol.write(
            json.dumps(
                {
                    "code": code,
                    "out": out.getvalue(),
                    "err": err.getvalue(),
                    "seconds": round(time.perf_counter() - started, 4),
                }
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
