"""What messaging's commands tell the floors above them, which they cannot import."""

from django.dispatch import Signal

# Sent by ``prune_inbound`` once per run with ``now``; each receiver prunes by its
# own retention and answers (what it pruned, how many).
prune_due = Signal()
