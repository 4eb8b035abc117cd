"""The soak: hours of simulated minutes, several deliver workers, faults, and a proof.

Simulated time advances one minute per step (``--now``). Each step runs 2 to 4
deliver workers (separate processes) at the same instant; every 15 simulated
minutes materialize runs — sometimes twice at once, sometimes beside the
deliver workers; either way its users are split into small slices, so every
run of a cycle takes several and runs at once share them. Meanwhile:

* the fake Twilio and Telegram servers answer a seeded fraction of sends
  with 500/502/503, 429 with ``Retry-After``, answers held past the client
  timeout, and permanent refusals; a few recipients always fail;
* a ``manage.py deliver`` process is SIGKILLed mid-batch while it holds
  claims (and one row marked mid-send);
* a materialize participant is SIGKILLed holding a slice while two others
  share its cycle and two deliver workers send beside them; its slice's lease
  lapses and another participant takes it over in the same cycle;
* another has its database backend terminated (``pg_terminate_backend``)
  between the provider's answer and the settle-up;
* events are moved, cancelled, deleted and re-added, follow-ups done, a
  user's nudges turned off and on again — between materialize runs.

Slow answers are held past the client timeout, half of them after the
provider delivered the message: a read timeout is unconfirmed, so the row is
settled failed ("may have been delivered; not resent") and must never be sent
again — the checker allows such a row, like one interrupted mid-send, at most
one delivery.

Then the sweeps run on past the last nudge plus lease plus grace, and
:func:`check` proves, per queued nudge, from what the fake providers
received: sent at most once; never before ``fire_at`` (which smoothing may
have moved earlier) nor at or after ``intended_at + grace`` (in simulated
time: the step whose runs sent it); and settled — sent, skipped with a
reason, failed with an error, or expired — none left pending or claimed.
Subjects nobody touched must each have had their nudge queued, no nudge may
have two queue rows, and the cycle with the killed participant must be
complete, every user visited.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
import zoneinfo
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from django.db import connection

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent, EventStatus, Provider
from followups.models import FollowUp
from messaging.whatsapp.send import whatsapp_address
from scheduled_sends.failures import FailureKind
from scheduled_sends.models import Kind, MaterializeSlice, ScheduledSend, SweepRun
from scheduled_sends.queue.transitions import EXPIRED_REASON
from sweeps.cycle import cycle_start
from tenancy.scope import support_scope, tenant_scope
from tests.fakes import telegram_server as tg
from tests.fakes import twilio_server as tw
from tests.fakes.fixtures import WHATSAPP_FROM
from tests.soak.channels import EPISODE_BACKENDS
from tests.support.processes import PROJECT_ROOT, manage, subprocess_env

START = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
LEASE = timedelta(seconds=300)
# Several slices per cycle, so the runs of one cycle share it; a lease short enough
# that a killed participant's slice is taken over within the step.
SLICE_USERS = 5
SLICE_LEASE_SECONDS = 3
CLIENT_TIMEOUT_SECONDS = 0.4
SLOW_SECONDS = 0.9  # past the client timeout: a timeout, and the fake delivers nothing
# A 429's Retry-After pauses the channel for every process on the database's real
# clock while a step's simulated clock stands still, so the step's other sends on
# that channel wait it out in wall time. 2 s takes the same paths (the shared pause,
# rows given back or re-slotted behind it) as the providers' usual 5-10 s.
RETRY_AFTER_SECONDS = 2
TIMEZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Asia/Jerusalem",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
]
# Titles carry a unique token first; the rest is what calendars really hold.
DECOR = [
    "",
    "Design review",
    "*standup* _notes_ ~old~ `code`",
    "<b>review</b> & <script>alert(1)</script>",
    "🎉 launch 👩\u200d👩\u200d👧 🇩🇪",
    "פגישה עם דנה",
    "اجتماع الفريق",
    "[agenda](http://127.0.0.1/x) #tag @all",
    "tab\there\nnewline\x07bell\u202eRLO",
    "Quarterly planning " + "very long " * 40,
]
SUMMARY = re.compile(r"retry (\d+)")
SENT = re.compile(r"\bsent (\d+)")
TIME_IN_TEXT = re.compile(r" (?:starts|is due) at (?:\w{3} )?(\d\d:\d\d) \(")

TWILIO_RANDOM_FAULTS = (
    tw.SERVER_ERROR,
    tw.SERVICE_UNAVAILABLE,
    tw.BAD_GATEWAY,
    tw.twilio_error(20429, "Too Many Requests", 429, retry_after=str(RETRY_AFTER_SECONDS)),
    tw.CHANNEL_RATE_LIMIT,  # 429 without Retry-After
    tw.slow(SLOW_SECONDS),
    tw.slow(SLOW_SECONDS, delivers=True),  # accepted, then answered too late
    tw.NOT_MOBILE,  # permanent
)
TELEGRAM_RANDOM_FAULTS = (
    tg.SERVER_ERROR,
    tg.BAD_GATEWAY,
    tg.flood(RETRY_AFTER_SECONDS),
    tg.slow(SLOW_SECONDS),
    tg.slow(SLOW_SECONDS, delivers=True),
    tg.BOT_KICKED,  # permanent
)


@dataclass(frozen=True)
class SoakConfig:
    minutes: int = 60
    tenants: int = 40
    seed: int = 20261203
    workers: int = 4
    fault_rate: float = 0.12
    start: datetime = START

    @property
    def end(self) -> datetime:
        return self.start + timedelta(minutes=self.minutes)

    @property
    def settle_until(self) -> datetime:
        return self.end + LEASE + GRACE + timedelta(minutes=2)


@dataclass
class Subject:
    kind: str
    pk: int
    user_id: int
    token: str
    starts: datetime
    lead: timedelta
    touched: bool = False
    gone: bool = False


@dataclass
class Tenant:
    user_id: int
    channel: str
    address: str  # as the provider sees it
    tz: str
    lead: timedelta
    connection_id: int


@dataclass
class Step:
    now: datetime
    wall_start: float
    wall_end: float = 0.0


@dataclass
class SoakResult:
    counts: dict[str, object] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def render(self, title: str) -> str:
        lines = [f"{title}:"]
        lines += [f"  {key:<34} {value}" for key, value in self.counts.items()]
        lines += [f"  VIOLATION {v}" for v in self.violations[:30]]
        return "\n".join(lines)


def _small_trust_store(tmp: Path) -> Path:
    import certifi

    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    path = tmp / "one-ca.pem"
    path.write_text(bundle[: bundle.index(end) + len(end)] + "\n")
    return path


class Worker:
    """One long-lived sweep process (``tests/soak/worker.py``)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.soak.worker"],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert "ready" in self._read(timeout=60)

    def _read(self, timeout: float) -> dict:
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"soak worker {self.process.pid} did not answer in {timeout}s")
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"soak worker {self.process.pid} exited: {self.process.wait()}")
        return json.loads(line)

    def start(self, command: str, now: datetime) -> None:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps({"cmd": command, "now": now.isoformat()}) + "\n")
        stdin.flush()

    def result(self) -> dict:
        return self._read(timeout=180)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()  # type: ignore[union-attr]
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()  # type: ignore[union-attr]
        self.log.close()


class Soak:
    def __init__(self, config: SoakConfig, make_user, twilio, telegram, tmp: Path) -> None:
        self.config = config
        self.make_user = make_user
        self.twilio = twilio
        self.telegram = telegram
        self.tmp = tmp
        self.rng = random.Random(config.seed)
        self.tenants: list[Tenant] = []
        self.subjects: dict[tuple[str, int], Subject] = {}
        self.steps: list[Step] = []
        self.workers: list[Worker] = []
        self.run_results: list[dict] = []
        self.episodes: Counter[str] = Counter()
        self.mutations: Counter[str] = Counter()
        self.step_seconds: dict[int, float] = {}
        self.killed_cycles: list[datetime] = []  # cycles a participant was killed in
        self.env = subprocess_env(
            TWILIO_ACCOUNT_SID=tw.ACCOUNT_SID,
            TWILIO_AUTH_TOKEN=tw.AUTH_TOKEN,
            TWILIO_WHATSAPP_FROM=WHATSAPP_FROM,
            TWILIO_API_BASE_URL=twilio.url,
            TWILIO_CONTENT_SID="",
            TWILIO_STATUS_CALLBACK_URL="",
            TELEGRAM_BOT_TOKEN=tg.BOT_TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            CHANNEL_TIMEOUT_SECONDS=str(CLIENT_TIMEOUT_SECONDS),
            NUDGE_CHANNEL_BACKENDS="{}",
            NUDGE_GRACE_MINUTES=str(int(GRACE.total_seconds() // 60)),
            NUDGE_LEASE_SECONDS=str(int(LEASE.total_seconds())),
            NUDGE_LOOKAHEAD_MINUTES="180",
            NUDGE_RUN_BUDGET_SECONDS="45",
            NUDGE_BATCH_SIZE="12",
            NUDGE_MATERIALIZE_SLICE_USERS=str(SLICE_USERS),
            NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS=str(SLICE_LEASE_SECONDS),
            # A tiny headroom makes a few nudges a minute "a burst", so smoothing
            # moves rows earlier throughout the soak and exactly-once is proven
            # with it; the send rates themselves stay as configured.
            NUDGE_SMOOTHING_HEADROOM="0.005",
            LOG_LEVEL="WARNING",
            # Every Telegram channel instance builds two httpx clients, each loading the
            # whole CA bundle (~0.12 s of CPU apiece): a third of a soak's CPU. Traffic
            # here is plain HTTP to 127.0.0.1, so a one-certificate trust store changes
            # nothing but the time.
            SSL_CERT_FILE=str(_small_trust_store(tmp)),
        )

    # --- set-up ----------------------------------------------------------------
    def episode_minutes(self) -> dict[int, str]:
        """Simulated minutes (from the start) at which a process-level fault happens."""
        episodes = {}
        for hour in range(0, self.config.minutes, 60):
            if hour + 20 <= self.config.minutes - 10:
                episodes[hour + 20] = "kill"
            if hour + 30 <= self.config.minutes - 10:
                episodes[hour + 30] = "kill materialize"
            if hour + 40 <= self.config.minutes - 10:
                episodes[hour + 40] = "terminate"
        return episodes

    def seed(self) -> None:
        cfg = self.config
        for k in range(cfg.tenants):
            channel = "whatsapp" if k % 2 == 0 else "telegram"
            number, chat = f"+1415555{1000 + k:04d}", str(700000 + k)
            # Tenant 3's provider always fails; a long lead lets its nudges expire
            # (retried through the whole grace window) rather than be overtaken
            # by their subjects' start.
            lead = 30 if k == 3 else (5, 10, 15)[k % 3]
            user = self.make_user(
                f"soak{k}",
                channel=channel,
                whatsapp_number=number if channel == "whatsapp" else "",
                telegram_chat_id=chat if channel == "telegram" else "",
                timezone=TIMEZONES[k % len(TIMEZONES)],
                default_lead_minutes=lead,
            )
            with tenant_scope(user.pk):
                calendar = CalendarConnection.objects.create(user=user, provider=Provider.ICS)
            self.tenants.append(
                Tenant(
                    user.pk,
                    channel,
                    whatsapp_address(number) if channel == "whatsapp" else chat,
                    TIMEZONES[k % len(TIMEZONES)],
                    timedelta(minutes=lead),
                    calendar.pk,
                )
            )
        # Recipients that always fail: two refused for good, one whose provider
        # keeps answering 500 (its nudges retry, then expire). Not "bot was
        # blocked": that marks the user unreachable and stops queueing them
        # (accounts.actions.note_permanent_failure), which tests/portal covers.
        self.twilio.plan.for_recipient(self.tenants[0].address, tw.INVALID_TO)
        self.telegram.plan.for_recipient(self.tenants[1].address, tg.BOT_KICKED)
        self.telegram.plan.for_recipient(self.tenants[3].address, tg.SERVER_ERROR)
        self.twilio.plan.at_rate(cfg.fault_rate, cfg.seed, TWILIO_RANDOM_FAULTS)
        self.telegram.plan.at_rate(cfg.fault_rate, cfg.seed + 1, TELEGRAM_RANDOM_FAULTS)

        per_tenant_events = max(2, round(cfg.minutes / 15))
        per_tenant_follow_ups = max(1, round(cfg.minutes / 40))
        for index, tenant in enumerate(self.tenants):
            for i in range(per_tenant_events):
                reminder = self.rng.choice([[], [], [30], [5]])
                lead = timedelta(minutes=reminder[0]) if reminder else tenant.lead
                starts = self._random_start(lead)
                self._add_event(tenant, f"ev{index}.{i}", starts, reminder)
            for i in range(per_tenant_follow_ups):
                self._add_follow_up(tenant, f"fu{index}.{i}", self._random_start(tenant.lead))
        # Bursts: many nudges due at each episode minute, so a batch is mid-way when it strikes.
        for minute in self.episode_minutes():
            for index, tenant in enumerate(self.tenants[4:16], start=4):
                due = cfg.start + timedelta(minutes=minute) + tenant.lead
                self._add_follow_up(tenant, f"fu{index}.b{minute}", due)

    def _random_start(self, lead: timedelta) -> datetime:
        first = int(lead.total_seconds() // 60) + 1
        minute = self.rng.randint(first, self.config.minutes)
        seconds = self.rng.choice([0, 0, 0, 30])
        return self.config.start + timedelta(minutes=minute, seconds=seconds)

    def _title(self, token: str) -> str:
        return f"{token} {self.rng.choice(DECOR)}"

    def _add_event(self, tenant: Tenant, token: str, starts: datetime, reminder: list[int]):
        with tenant_scope(tenant.user_id):
            event = CalendarEvent.objects.create(
                user_id=tenant.user_id,
                connection_id=tenant.connection_id,
                provider_event_id=token,
                title=self._title(token),
                starts_at=starts,
                ends_at=starts + timedelta(minutes=30),
                reminder_minutes=reminder,
            )
        lead = timedelta(minutes=reminder[0]) if reminder else tenant.lead
        self.subjects[(Kind.EVENT, event.pk)] = Subject(
            Kind.EVENT, event.pk, tenant.user_id, token, starts, lead
        )
        return event

    def _add_follow_up(self, tenant: Tenant, token: str, due: datetime) -> None:
        with tenant_scope(tenant.user_id):
            follow_up = FollowUp.objects.create(
                user_id=tenant.user_id, title=self._title(token), due_at=due
            )
        self.subjects[(Kind.FOLLOW_UP, follow_up.pk)] = Subject(
            Kind.FOLLOW_UP, follow_up.pk, tenant.user_id, token, due, tenant.lead
        )

    # --- faults between runs ------------------------------------------------------
    def mutate(self, now: datetime) -> None:
        """Move, cancel, delete and re-add events; finish follow-ups; toggle a user."""
        tenants = {t.user_id: t for t in self.tenants}
        live = [
            s
            for s in self.subjects.values()
            if not s.gone and s.starts > now + timedelta(minutes=2)
        ]
        self.rng.shuffle(live)
        budget = max(3, self.config.tenants // 6)
        for subject in live[:budget]:
            action = self.rng.choice(["move", "move", "cancel", "readd", "done"])
            subject.touched = True
            if subject.kind == Kind.FOLLOW_UP:
                action = "done" if action in {"cancel", "readd", "done"} else "move"
            if action == "move":
                delta = timedelta(minutes=self.rng.choice([-20, -10, 15, 40]))
                starts = subject.starts + delta
                if not now + timedelta(minutes=2) < starts <= self.config.end:
                    continue
                model = CalendarEvent if subject.kind == Kind.EVENT else FollowUp
                field_name = "starts_at" if subject.kind == Kind.EVENT else "due_at"
                with tenant_scope(subject.user_id):
                    model.objects.filter(pk=subject.pk).update(**{field_name: starts})
                subject.starts = starts
            elif action == "cancel":
                with tenant_scope(subject.user_id):
                    CalendarEvent.objects.filter(pk=subject.pk).update(status=EventStatus.CANCELLED)
                subject.gone = True
            elif action == "done":
                with tenant_scope(subject.user_id):
                    FollowUp.objects.filter(pk=subject.pk).update(done=True)
                subject.gone = True
            else:  # deleted, then re-added as a new event (a new id) at the same time
                with tenant_scope(subject.user_id):
                    old = CalendarEvent.objects.get(pk=subject.pk)
                    reminder = list(old.reminder_minutes)
                    old.delete()
                subject.gone = True
                event = self._add_event(
                    tenants[subject.user_id], f"{subject.token}r", subject.starts, reminder
                )
                self.subjects[(Kind.EVENT, event.pk)].touched = True
            self.mutations[action] += 1

    def toggle_user(self, tenant: Tenant, enabled: bool) -> None:
        with tenant_scope(tenant.user_id):
            DeliverySettings.objects.filter(user_id=tenant.user_id).update(enabled=enabled)
        for subject in self.subjects.values():
            if subject.user_id == tenant.user_id:
                subject.touched = True
        self.mutations["nudges off" if not enabled else "nudges on"] += 1

    # --- process-level faults ---------------------------------------------------
    def _episode_env(self, mode: str, at: int, marker: Path) -> dict[str, str]:
        return {
            **self.env,
            "NUDGE_CHANNEL_BACKENDS": json.dumps(EPISODE_BACKENDS),
            "NUDGE_SOAK_EPISODE": mode,
            "NUDGE_SOAK_EPISODE_AT": str(at),
            "NUDGE_SOAK_MARKER": str(marker),
        }

    @staticmethod
    def _wait_for(marker: Path, process: subprocess.Popen, timeout: float = 60) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker.exists():
                return json.loads(marker.read_text())
            if process.poll() is not None:
                return None
            time.sleep(0.02)
        return None

    def _deliver_until_episode(
        self, now: datetime, mode: str, nth: int, missed: str
    ) -> tuple[subprocess.Popen, dict, Path] | None:
        """Start a deliver process that signals (via a marker file) when it reaches
        its ``nth`` send in ``mode``; None, with the run recorded, if it never does."""
        marker = self.tmp / f"{mode}-{now:%H%M}.json"
        process = manage(
            "deliver",
            "--now",
            now.isoformat(),
            "--simulated-clock",
            "--batch-size",
            "10",
            env=self._episode_env(mode, nth, marker),
        )
        try:
            seen = self._wait_for(marker, process)
            if seen is not None:
                return process, seen, marker
            out, err = process.communicate(timeout=60)
            self.episodes[missed] += 1
            self.run_results.append({"code": process.returncode, "out": out, "err": err})
        except BaseException:
            _reap(process)
            raise
        _reap(process)
        return None

    def kill_mid_batch(self, now: datetime) -> None:
        """A deliver process asleep in its 3rd send, holding the rest of its batch: SIGKILL."""
        started = self._deliver_until_episode(
            now, "sleep-before", 3, "kill: never reached its 3rd send"
        )
        if started is None:
            return
        process, _, _ = started
        try:
            os.kill(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)
            assert process.returncode == -signal.SIGKILL
            self.episodes["SIGKILL mid-batch"] += 1
        finally:
            _reap(process)

    def terminate_backend(self, now: datetime) -> None:
        """A deliver process between its 2nd send and the settle-up loses its connection."""
        started = self._deliver_until_episode(
            now, "hold-after", 2, "terminate: never reached its 2nd send"
        )
        if started is None:
            return
        process, seen, marker = started
        try:
            with connection.cursor() as cursor:  # the same non-superuser role may do this
                cursor.execute("SELECT pg_terminate_backend(%s)", [seen["backend_pid"]])
                assert cursor.fetchone()[0] is True
            marker.with_suffix(".proceed").touch()
            out, err = process.communicate(timeout=60)
            assert process.returncode != 0, (out, err)
            assert "terminat" in err.lower() or "closed" in err.lower(), err[-2000:]
            self.episodes["pg_terminate_backend mid-run"] += 1
        finally:
            _reap(process)

    def kill_materialize_mid_cycle(self, now: datetime) -> None:
        """The step's runs, with a materialize participant SIGKILLed holding a slice.

        It stops on its 3rd user (``tests/soak/worker.py``), the cycle's first
        slice held; then two more participants join the cycle and two deliver
        workers run beside them. Once another participant has a slice the stalled
        one is killed; its lease lapses and it is taken over in this cycle.
        """
        marker = self.tmp / f"stall-{now:%H%M}.json"
        env = {
            **self.env,
            "NUDGE_SOAK_EPISODE": "stall-in-slice",
            "NUDGE_SOAK_EPISODE_AT": "3",
            "NUDGE_SOAK_MARKER": str(marker),
        }
        victim = Worker(env, self.tmp / f"stalled-materialize-{now:%H%M}.log")
        try:
            victim.start("materialize", now)
            seen = self._wait_for(marker, victim.process)
            if seen is None:
                self.episodes["kill materialize: never reached its 3rd user"] += 1
                self._collect([victim])
                return
            shuffled = self.rng.sample(self.workers, len(self.workers))
            materializers, deliverers = shuffled[:2], shuffled[2:4]
            for worker in materializers:
                worker.start("materialize", now)
            for worker in deliverers:
                worker.start("deliver", now)
            self._wait_for_another_participant(cycle_start(now), seen["participant"])
            os.kill(victim.process.pid, signal.SIGKILL)
            assert victim.process.wait(timeout=30) == -signal.SIGKILL
            self.episodes["SIGKILL mid-cycle (materialize)"] += 1
            self.killed_cycles.append(cycle_start(now))
            self._collect([*materializers, *deliverers])
            beside = self.run_results[-len(deliverers) :]
            self.episodes["sent beside the killed cycle"] += sum(
                int(m[1]) for r in beside for m in [SENT.search(r.get("out", ""))] if m
            )
        finally:
            victim.stop()

    @staticmethod
    def _wait_for_another_participant(cycle: datetime, stalled: str, timeout: float = 60) -> None:
        """Until a participant other than the stalled one holds or has done a slice."""
        others = MaterializeSlice.objects.filter(cycle_id=cycle).exclude(
            claimed_by__in=["", stalled]
        )
        deadline = time.monotonic() + timeout
        while not others.exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    # --- the clock ----------------------------------------------------------------
    def step(self, minute: int, *, faults: bool) -> None:
        cfg = self.config
        now = cfg.start + timedelta(minutes=minute)
        step = Step(now, time.time())
        episode = self.episode_minutes().get(minute) if faults else None
        if episode == "kill":
            self.kill_mid_batch(now)
        elif episode == "terminate":
            self.terminate_backend(now)
        elif episode == "kill materialize":
            self.kill_materialize_mid_cycle(now)
            self._stepped(minute, step)
            return
        deliverers = self.rng.sample(self.workers, self.rng.randint(2, min(4, len(self.workers))))
        started: list[Worker] = []
        if minute % 15 == 0:
            # The first mark after the start always overlaps; the others are drawn.
            mode = "overlap" if minute == 15 else self.rng.choice(["overlap", "alongside", "solo"])
            self.episodes[f"materialize {mode}"] += 1
            first, second = self.rng.sample(self.workers, 2)
            first.start("materialize", now)
            started.append(first)
            if mode == "overlap":
                second.start("materialize", now)
                started.append(second)
            if mode != "alongside":
                self._collect(started)
                started = []
            else:
                deliverers = [w for w in deliverers if w is not first] or [second]
        for worker in deliverers:
            worker.start("deliver", now)
            started.append(worker)
        self._collect(started)
        self._stepped(minute, step)

    def _stepped(self, minute: int, step: Step) -> None:
        step.wall_end = time.time()
        self.step_seconds[minute] = step.wall_end - step.wall_start
        self.steps.append(step)

    def _collect(self, workers: list[Worker]) -> None:
        for worker in workers:
            self.run_results.append(worker.result())

    def run(self) -> None:
        cfg = self.config
        self.workers = [Worker(self.env, self.tmp / f"worker{i}.log") for i in range(cfg.workers)]
        try:
            off = self.tenants[5]
            total = int((cfg.settle_until - cfg.start).total_seconds() // 60)
            for minute in range(total + 1):
                in_play = minute <= cfg.minutes
                if in_play and minute % 15 == 7:
                    self.mutate(cfg.start + timedelta(minutes=minute))
                if in_play and minute == 20:
                    self.toggle_user(off, enabled=False)
                if in_play and minute == 40:
                    self.toggle_user(off, enabled=True)
                self.step(minute, faults=in_play)
        finally:
            for worker in self.workers:
                worker.stop()

    # --- the proof --------------------------------------------------------------
    def sim_time_of(self, wall: float) -> datetime | None:
        for step in self.steps:
            if step.wall_start <= wall <= step.wall_end:
                return step.now
        return None

    def check(self) -> SoakResult:
        result = SoakResult()
        violations = result.violations
        tenants = {t.user_id: t for t in self.tenants}
        tokens = {(s.kind, s.pk): s.token for s in self.subjects.values()}
        with support_scope():
            rows = list(ScheduledSend.objects.order_by("fire_at", "pk"))
            runs = list(SweepRun.objects.values_list("sweep", "status"))

        def key(tenant: Tenant, token: str, hhmm: str) -> tuple[str, str, str]:
            return (tenant.address, token, hhmm)

        for queue_key, count in Counter(
            (row.user_id, row.kind, row.ref_id, row.intended_at) for row in rows
        ).items():
            if count > 1:
                violations.append(f"queue key {queue_key} held by {count} rows")

        by_key: dict[tuple[str, str, str], ScheduledSend] = {}
        for row in rows:
            tenant = tenants[row.user_id]
            local = row.subject_starts_at.astimezone(zoneinfo.ZoneInfo(tenant.tz))
            k = key(tenant, tokens[(row.kind, row.ref_id)], f"{local:%H:%M}")
            if k in by_key:
                violations.append(f"two queue rows for one nudge {k}")
            by_key[k] = row

        delivered: dict[int, list[tuple[str, datetime | None]]] = {row.pk: [] for row in rows}
        deliveries = [*self.twilio.delivered, *self.telegram.delivered]
        by_address = {t.address: t for t in self.tenants}
        phantom = 0
        for d in deliveries:
            text = d.text.removeprefix("Reminder: ")
            match = TIME_IN_TEXT.search(text)
            tenant = by_address.get(d.recipient)
            if match is None or tenant is None:
                phantom += 1
                violations.append(f"unrecognised delivery {d.recipient}: {d.text[:80]!r}")
                continue
            row = by_key.get(key(tenant, text.split(" ", 1)[0], match[1]))
            if row is None:
                phantom += 1
                violations.append(f"delivery matches no queued nudge: {d.text[:80]!r}")
                continue
            delivered[row.pk].append((d.message_id, self.sim_time_of(d.at)))

        outcomes: Counter[str] = Counter()
        duplicates = lost = 0
        interrupted_delivered = unconfirmed_delivered = 0
        retried_then_sent = 0
        for row in rows:
            got = delivered[row.pk]
            label = f"row {row.pk} ({row.kind} {row.ref_id}, fire {row.fire_at:%H:%M:%S})"
            duplicates += max(0, len(got) - 1)
            if len(got) > 1:
                violations.append(f"{label} delivered {len(got)} times")
            for _, sim in got:
                if sim is None:
                    violations.append(f"{label} delivered outside any step")
                elif not row.fire_at <= sim < row.intended_at + GRACE:
                    violations.append(f"{label} delivered at simulated {sim:%H:%M}")
            if row.outcome is None:
                lost += 1
                state = "claimed" if row.claimed_at else "pending"
                violations.append(f"{label} left {state} (attempts {row.attempts})")
                continue
            if row.outcome == "failed" and row.failure_kind == FailureKind.INTERRUPTED:
                outcomes["failed (interrupted mid-send)"] += 1
                interrupted_delivered += len(got)
                continue
            if row.outcome == "failed" and row.failure_kind == FailureKind.UNCONFIRMED:
                outcomes["failed (unconfirmed: timed out)"] += 1
                unconfirmed_delivered += len(got)
                continue
            outcomes[row.outcome] += 1
            if row.outcome == "sent":
                retried_then_sent += row.attempts > 0
                if [mid for mid, _ in got] != [row.provider_message_id]:
                    violations.append(f"{label} sent, but the provider has {len(got)} deliveries")
                if not row.fire_at <= row.sent_at < row.intended_at + GRACE:
                    violations.append(f"{label} sent_at {row.sent_at} outside its window")
            elif got:
                violations.append(f"{label} settled {row.outcome} but the provider got it")
            if row.outcome in {"skipped", "failed"} and not row.last_error:
                violations.append(f"{label} {row.outcome} without a reason")
            if row.outcome == "expired" and row.last_error != EXPIRED_REASON:
                violations.append(f"{label} expired with {row.last_error!r}")

        # Nothing nobody touched may go missing from the queue.
        queued = {(row.kind, row.ref_id, row.intended_at) for row in rows}
        unqueued = 0
        for s in self.subjects.values():
            fire = s.starts - s.lead
            if s.touched or not self.config.start <= fire <= self.config.end:
                continue
            if (s.kind, s.pk, fire) not in queued:
                unqueued += 1
                violations.append(f"untouched {s.kind} {s.token} (fire {fire:%H:%M}) never queued")
        lost += unqueued

        killed_cycles = [self._cycle_outcome(starts_at) for starts_at in self.killed_cycles]
        for outcome in killed_cycles:
            if outcome["done"] != outcome["slices"] or outcome["users"] != len(self.tenants):
                violations.append(f"cycle with a killed participant left incomplete: {outcome}")

        skip_reasons = Counter(
            row.last_error.split(";")[0] for row in rows if row.outcome == "skipped"
        )
        faults = Counter(r.outcome for f in (self.twilio, self.telegram) for r in f.sends())
        retry_attempts = sum(
            int(m[1]) for r in self.run_results for m in [SUMMARY.search(r.get("out", ""))] if m
        )
        failed_runs = [r for r in self.run_results if r.get("code")]
        result.counts = {
            "simulated minutes (+ settle)": (
                f"{self.config.minutes} (+{len(self.steps) - self.config.minutes - 1})"
            ),
            "tenants": len(self.tenants),
            "subjects (events + follow-ups)": len(self.subjects),
            "nudges queued": len(rows),
            "moved earlier by smoothing": sum(1 for row in rows if row.fire_at < row.intended_at),
            "sent": outcomes["sent"],
            "skipped": outcomes["skipped"],
            "failed (provider refused)": outcomes["failed"],
            "failed (interrupted mid-send)": outcomes["failed (interrupted mid-send)"],
            "  of which the provider had": interrupted_delivered,
            "failed (unconfirmed: timed out)": outcomes["failed (unconfirmed: timed out)"],
            "  of which the provider had ": unconfirmed_delivered,
            "expired": outcomes["expired"],
            "retried (attempts, all runs)": retry_attempts,
            "sent after >=1 retry": retried_then_sent,
            "duplicates": duplicates,
            "lost": lost,
            "phantom deliveries": phantom,
            "provider deliveries": len(deliveries),
            "provider answers": dict(sorted(faults.items())),
            "skip reasons": dict(skip_reasons.most_common()),
            "mutations": dict(self.mutations),
            "episodes": dict(self.episodes),
            "cycles with a participant killed": killed_cycles,
            "sweep runs": dict(Counter(f"{sweep} {status}" for sweep, status in runs)),
            "worker runs exiting non-zero": len(failed_runs),
            "step seconds (median, max)": _median_max(list(self.step_seconds.values())),
            "slowest steps (minute: s)": ", ".join(
                f"{m}: {sec:.1f}"
                for m, sec in sorted(self.step_seconds.items(), key=lambda i: -i[1])[:6]
            ),
            "run seconds (median, max)": _median_max(
                [r["seconds"] for r in self.run_results if "seconds" in r]
            ),
        }
        for failed in failed_runs[:5]:
            violations.append(f"a steady run failed: {failed.get('err', '')[-500:]}")
        return result

    @staticmethod
    def _cycle_outcome(starts_at: datetime) -> dict[str, object]:
        """What an operator reads of a cycle: slices, done, how many finished them, takeovers."""
        slices = list(MaterializeSlice.objects.filter(cycle_id=starts_at))
        return {
            "cycle": f"{starts_at:%H:%M}",
            "slices": len(slices),
            "done": sum(s.done_at is not None for s in slices),
            "finished by": len({s.claimed_by for s in slices if s.done_at is not None}),
            "taken over": sum(s.takeovers for s in slices),
            "users": sum(s.users for s in slices),
        }


def _reap(process: subprocess.Popen) -> None:
    """Never leave an episode's process behind, whatever failed."""
    if process.poll() is None:
        process.kill()
        process.communicate(timeout=30)


def _median_max(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.2f}, {ordered[-1]:.2f}"
