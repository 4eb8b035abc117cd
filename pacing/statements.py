"""The pacer's SQL: named send and request budgets shared by every process."""

# The ceiling, or after a 429 the lowered ``rate`` plus ``recovery`` x ceiling
# per second since ``rate_since``, capped: computed when read, so nothing runs to raise it.
_RATE_IN_FORCE = """
least({ceiling}, coalesce(p.rate + {ceiling} * %(recovery)s
                                   * extract(epoch FROM clock_timestamp() - p.rate_since),
                          {ceiling}))
"""

# A new budget counts as unused for a day, so a burst is all available at once.
ENSURE_PACING_ROWS = """
INSERT INTO channel_pacing (budget, next_slot_at)
SELECT budget, clock_timestamp() - interval '1 day' FROM unnest(%(budgets)s::text[]) AS b(budget)
ON CONFLICT (budget) DO NOTHING
"""

# Up to ``wanted`` slots per budget ``1/rate`` apart, from the next free slot
# or ``lead`` from now, none beyond ``horizon`` (so processes interleave). A
# budget with a ``burst`` at its full ceiling (generic cell rate algorithm) may
# lag ``burst - 1`` slots behind, so a quiet spell's burst falls at once. Rows
# are locked in name order (no deadlock). Answers the first slot, the count,
# the rate and the database's clock, per budget.
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

# A 429: pause for ``wait`` and multiply the rate by ``backoff`` (not below
# ``floor`` x ceiling), once per ``hold``: requests in flight answer 429 together.
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

# Every budget's rate in force and pause; per-user ones only when lowered or paused.
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
