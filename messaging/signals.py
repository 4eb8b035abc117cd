"""What messaging's commands tell the floors above them.

``manage.py prune_inbound`` is the end-user area's daily retention line, but
the portal sits above messaging, so the command cannot call it; it announces
the run instead, and the portal (its ``AppConfig.ready``) answers by pruning
what it keeps (revoked API tokens past their retention).
"""

from django.dispatch import Signal

# Sent by ``prune_inbound`` once per run. Arguments: ``now`` (the run's instant).
# Each receiver prunes by its own retention and answers (what it pruned, how many).
prune_due = Signal()
