"""The pacer's SQL: named send and request budgets shared by every process."""


# The ceiling, or after a 429 the lowered ``rate`` grown by ``growth`` (a share
# compounding per second) since ``rate_since``, capped: computed when read, so
# nothing runs to raise it. Growth relative to the learned rate, not the ceiling:
# a ceiling far above the provider's limit would otherwise bring the burst back.
def _rate_in_force(ceiling: str) -> str:
    return f"""
least({ceiling}, coalesce(p.rate * exp(least(50, %(growth)s
                                       * extract(epoch FROM clock_timestamp() - p.rate_since))),
                          {ceiling}))
"""


# The share of what was counted that many seconds ago still counted now.
_DECAY = "exp(-greatest(0, extract(epoch FROM clock_timestamp() - p.counted_at)) / %(tau)s)"

# A new budget counts as unused for a day, so a burst is all available at once. In name
# order, as every statement here locks rows (no deadlock).
ENSURE_PACING_ROWS = """
INSERT INTO channel_pacing (budget, next_slot_at)
SELECT budget, clock_timestamp() - interval '1 day' FROM unnest(%(budgets)s::text[]) AS b(budget)
 ORDER BY budget
ON CONFLICT (budget) DO NOTHING
"""

# Up to ``wanted`` slots per budget ``1/rate`` apart, from the next free slot
# or ``lead`` from now, none beyond ``horizon`` (so processes interleave). A
# budget with a ``burst`` at its full ceiling (generic cell rate algorithm) may
# lag ``burst - 1`` slots behind, so a quiet spell's burst falls at once. Rows
# are locked in name order (no deadlock). Answers the first slot, the count,
# the rate and the database's clock, per budget; nothing, and reserves nothing,
# when a budget has no row yet. Each budget is read by its key (the lateral
# lookup), never by hashing the table: it holds a row per user budget, most made
# during a sync, after the last statistics.
RESERVE_SLOTS = f"""
WITH wanted AS (
    SELECT budget, ceiling, burst
      FROM unnest(%(budgets)s::text[], %(ceilings)s::float8[], %(bursts)s::int[])
           AS w(budget, ceiling, burst)
     ORDER BY budget
), current AS (
    SELECT p.row_id, p.budget, w.ceiling, w.burst, p.next_slot_at,
           clock_timestamp() AS now, {_DECAY} AS decay, p.counted_at, p.sent,
           {_rate_in_force("w.ceiling")} AS rate
      FROM wanted AS w
     CROSS JOIN LATERAL (SELECT ctid AS row_id, * FROM channel_pacing
                          WHERE budget = w.budget FOR UPDATE) AS p
), scheduled AS (
    SELECT row_id, budget, ceiling, now, rate, decay, counted_at, sent,
           greatest(next_slot_at,
                    now + %(lead)s
                    - CASE WHEN rate >= ceiling THEN greatest(burst - 1, 0) ELSE 0 END
                      * (interval '1 second' / rate)) AS first_slot
      FROM current
     WHERE (SELECT count(*) FROM current) = (SELECT count(*) FROM wanted)
), granted AS (
    SELECT row_id, budget, ceiling, first_slot, now, rate, decay, counted_at, sent,
           least(%(wanted)s,
                 greatest(0, ceil(extract(epoch FROM (now + %(horizon)s - first_slot))
                                  * rate)))::int AS slots
      FROM scheduled
)
UPDATE channel_pacing AS p
   SET next_slot_at = g.first_slot + g.slots * (interval '1 second' / g.rate),
       ceiling = g.ceiling,
       sent = coalesce(g.sent * g.decay, 0) + g.slots,
       refused = coalesce(p.refused * g.decay, 0),
       counted_at = g.now,
       counting_since = CASE WHEN g.counted_at IS NULL
                                  OR g.counted_at < g.now - 10 * %(tau)s * interval '1 second'
                             THEN g.now ELSE p.counting_since END
  FROM granted AS g
 WHERE p.ctid = g.row_id
RETURNING g.budget, g.first_slot, g.slots, g.rate, g.now
"""

# A 429: pause for ``wait``, count the refusal, and lower the rate once per
# ``hold`` (requests in flight answer 429 together): to ``backoff`` x what the
# provider accepted lately (slots sent less 429s, over the counting window, at
# least a second: providers count a second or more, so a burst let through in a
# fraction of one is not a rate) when at least ``sample`` were sent and that is
# under ``guess`` x the rate in force (which was then a guess, not a limit), else
# ``backoff`` x the rate in force (the window, pauses included, understates a
# rate near the limit); never below ``minimum`` requests a second.
SLOW_DOWN = f"""
WITH counted AS (
    SELECT p.budget,
           coalesce(p.sent * {_DECAY}, 0) AS sent,
           coalesce(p.refused * {_DECAY}, 0) + 1 AS refused,
           greatest(1, %(tau)s * (1 - exp(-extract(epoch FROM clock_timestamp()
                                                        - p.counting_since) / %(tau)s)))
               AS seconds,
           {_rate_in_force("%(ceiling)s")} AS in_force
      FROM channel_pacing AS p
     WHERE p.budget = %(budget)s
       FOR UPDATE
), lowered AS (
    SELECT budget, sent, refused,
           greatest(%(minimum)s,
                    %(backoff)s * CASE WHEN sent >= %(sample)s AND accepted < %(guess)s * in_force
                                       THEN accepted ELSE in_force END) AS rate
      FROM (SELECT *, greatest(0, sent - refused) / seconds AS accepted FROM counted) AS c
)
UPDATE channel_pacing AS p
   SET next_slot_at = greatest(p.next_slot_at, clock_timestamp() + %(wait)s),
       ceiling = %(ceiling)s,
       sent = l.sent,
       refused = l.refused,
       counted_at = clock_timestamp(),
       counting_since = coalesce(p.counting_since, clock_timestamp()),
       rate = CASE WHEN p.rate_since IS NULL OR p.rate_since < clock_timestamp() - %(hold)s
                   THEN least(l.rate, %(ceiling)s)
                   ELSE p.rate END,
       rate_since = CASE WHEN p.rate_since IS NULL OR p.rate_since < clock_timestamp() - %(hold)s
                         THEN clock_timestamp() ELSE p.rate_since END
  FROM lowered AS l
 WHERE p.budget = l.budget
RETURNING {_rate_in_force("%(ceiling)s")}"""

# Every budget's rate in force and pause; per-user ones only when lowered or paused.
RATES_IN_FORCE = f"""
SELECT p.budget, p.ceiling, {_rate_in_force("p.ceiling")} AS rate,
       greatest(0, extract(epoch FROM p.next_slot_at - clock_timestamp()))::float8 AS paused_for
  FROM channel_pacing AS p
 WHERE p.ceiling IS NOT NULL
   AND (strpos(p.budget, ':') = 0 OR p.rate_since > clock_timestamp() - interval '1 hour'
        OR p.next_slot_at > clock_timestamp() + interval '1 second')
 ORDER BY p.budget
"""

# Each host's learned fetch slots after this process's answers since it last
# shared: a new host starts at ``start``; a limited answer multiplies by its
# ``factor`` (at most once per ``hold``: answers in flight arrive together),
# clean ones add ``grown``; kept within [``fewest``, ``most``]. Answers every
# host's slots and whether it was limited within ``careful``.
LEARN_HOST_SLOTS = """
WITH d AS (
    SELECT host, factor, grown
      FROM unnest(%(hosts)s::text[], %(factors)s::float8[], %(grown)s::float8[])
           AS d(host, factor, grown)
)
INSERT INTO fetch_host_slots AS h (host, slots, limited_at, updated_at)
SELECT host, greatest(%(fewest)s, least(%(most)s, %(start)s * factor + grown)),
       CASE WHEN factor < 1 THEN clock_timestamp() END, clock_timestamp()
  FROM d
 ORDER BY host
ON CONFLICT (host) DO UPDATE
   SET slots = (SELECT greatest(%(fewest)s, least(%(most)s,
                    h.slots * CASE WHEN h.limited_at > clock_timestamp() - %(hold)s
                                   THEN 1 ELSE d.factor END + d.grown))
                  FROM d WHERE d.host = h.host),
       limited_at = CASE WHEN EXCLUDED.limited_at IS NOT NULL
                          AND (h.limited_at IS NULL
                               OR h.limited_at <= clock_timestamp() - %(hold)s)
                         THEN EXCLUDED.limited_at ELSE h.limited_at END,
       updated_at = EXCLUDED.updated_at
RETURNING host, slots, coalesce(limited_at > clock_timestamp() - %(careful)s, false)
"""
