"""The pacer's SQL: named send and request budgets shared by every process.

Raw SQL lives here because its shape matters (row locks taken in name order,
the rate in force computed when read); ``pacing.pacer`` is its only user.
"""

# --- Pacing: named send/request budgets, shared by every process ---
# (pacing/pacer.py). A budget's rate in force is its ceiling (the
# configured rate, passed by the caller) unless a 429 lowered it: then it is
# the lowered ``rate`` plus ``recovery`` x ceiling for every second since
# ``rate_since``, capped at the ceiling — additive increase computed when read,
# so nothing has to run to raise it again.
_RATE_IN_FORCE = """
least({ceiling}, coalesce(p.rate + {ceiling} * %(recovery)s
                                   * extract(epoch FROM clock_timestamp() - p.rate_since),
                          {ceiling}))
"""

# A new budget has been unused for a day: a budget with a burst has all of it
# at once (see RESERVE_SLOTS); one without starts at its first slot from now.
ENSURE_PACING_ROWS = """
INSERT INTO channel_pacing (budget, next_slot_at)
SELECT budget, clock_timestamp() - interval '1 day' FROM unnest(%(budgets)s::text[]) AS b(budget)
ON CONFLICT (budget) DO NOTHING
"""

# Reserve up to ``wanted`` consecutive slots in each named budget, ``1/rate``
# seconds apart at the rate in force, starting at the budget's next free slot
# (or ``lead`` from now: the time it takes to hand the work over, so a fresh
# slot is not born late), but none further ahead than ``horizon``: a process
# takes only what it can use soon, so concurrent processes interleave instead
# of one hoarding the next minute.
#
# A budget with a ``burst`` (the generic cell rate algorithm: a token bucket)
# may lag behind ``now + lead`` by up to ``burst - 1`` slots when its slots
# went unused: after a quiet spell ``burst`` slots fall at once (the caller
# uses a slot in the past at once) and the next ones ``1/rate`` apart, so any
# T seconds hold at most ``burst + rate x T`` — what a provider counting over
# a sliding window needs, rather than even spacing. Only at the full ceiling:
# a budget a 429 lowered is spaced evenly until it has climbed back. Burst 0
# (or 1) is even spacing.
#
# The rows are locked in name order (no deadlock between two callers of
# several budgets) for this one statement only. Answers, per budget, the first
# slot (in the past when the budget bursts), how many were granted, the rate
# they are spaced at, and the database's clock, which the caller maps to its own.
RESERVE_SLOTS = (
    """
WITH wanted AS (
    SELECT budget, ceiling, burst
      FROM unnest(%(budgets)s::text[], %(ceilings)s::float8[], %(bursts)s::int[])
           AS w(budget, ceiling, burst)
), current AS (
    SELECT p.budget, w.ceiling, w.burst, p.next_slot_at,
           clock_timestamp() AS now,
           """
    + _RATE_IN_FORCE.format(ceiling="w.ceiling")
    + """ AS rate
      FROM channel_pacing AS p
      JOIN wanted AS w USING (budget)
     ORDER BY p.budget
       FOR UPDATE OF p
), scheduled AS (
    SELECT budget, ceiling, now, rate,
           greatest(next_slot_at,
                    now + %(lead)s
                    - CASE WHEN rate >= ceiling THEN greatest(burst - 1, 0) ELSE 0 END
                      * (interval '1 second' / rate)) AS first_slot
      FROM current
), granted AS (
    SELECT budget, ceiling, first_slot, now, rate,
           least(%(wanted)s,
                 greatest(0, ceil(extract(epoch FROM (now + %(horizon)s - first_slot))
                                  * rate)))::int AS slots
      FROM scheduled
)
UPDATE channel_pacing AS p
   SET next_slot_at = g.first_slot + g.slots * (interval '1 second' / g.rate),
       ceiling = g.ceiling
  FROM granted AS g
 WHERE p.budget = g.budget
RETURNING g.budget, g.first_slot, g.slots, g.rate, g.now
"""
)

# A provider said 429 (or a 403 it calls a rate limit): nobody uses the budget
# before ``wait`` has passed, and its rate in force is multiplied by
# ``backoff`` (never below ``floor`` x ceiling). Once per ``hold``: the other
# requests already in flight when the limit was hit answer 429 too, and they
# are the same news, not a reason to lower the rate again.
SLOW_DOWN = (
    """
UPDATE channel_pacing AS p
   SET next_slot_at = greatest(p.next_slot_at, clock_timestamp() + %(wait)s),
       ceiling = %(ceiling)s,
       rate = CASE WHEN p.rate_since IS NULL OR p.rate_since < clock_timestamp() - %(hold)s
                   THEN greatest(%(ceiling)s * %(floor)s, """
    + _RATE_IN_FORCE.format(ceiling="%(ceiling)s")
    + """ * %(backoff)s)
                   ELSE p.rate END,
       rate_since = CASE WHEN p.rate_since IS NULL OR p.rate_since < clock_timestamp() - %(hold)s
                         THEN clock_timestamp() ELSE p.rate_since END
 WHERE p.budget = %(budget)s
RETURNING """
    + _RATE_IN_FORCE.format(ceiling="%(ceiling)s")
)

# Every budget's rate in force and pause, for the console and the run log.
# Per-user budgets (a ``:`` in the name) are many: only the lowered or paused
# ones are listed.
RATES_IN_FORCE = (
    """
SELECT p.budget, p.ceiling, """
    + _RATE_IN_FORCE.format(ceiling="p.ceiling")
    + """ AS rate,
       greatest(0, extract(epoch FROM p.next_slot_at - clock_timestamp()))::float8 AS paused_for
  FROM channel_pacing AS p
 WHERE p.ceiling IS NOT NULL
   AND (strpos(p.budget, ':') = 0 OR p.rate_since > clock_timestamp() - interval '1 hour'
        OR p.next_slot_at > clock_timestamp() + interval '1 second')
 ORDER BY p.budget
"""
)
