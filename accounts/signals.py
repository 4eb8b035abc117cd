"""What a person's changes tell the floors above them.

``accounts`` and ``followups`` sit below the sweeps, so they cannot call
materialize themselves; a change to what should be queued is announced
instead, and ``sweeps`` (its ``AppConfig.ready``) answers by re-planning that
one user.
"""

from django.dispatch import Signal

# Sent after a change to what a person's nudges are planned from (their delivery
# settings, a follow-up, a linked address) committed.
# Arguments: ``user_id`` (int) and ``now`` (the instant the change was made).
plan_changed = Signal()
