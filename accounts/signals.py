"""What a person's changes tell the floors above them: ``sweeps`` re-plans the user."""

from django.dispatch import Signal

# Sent after a change to what a person's nudges are planned from (their delivery
# settings, a follow-up, a linked address) committed.
# Arguments: ``user_id`` (int) and ``now`` (the instant the change was made).
plan_changed = Signal()
