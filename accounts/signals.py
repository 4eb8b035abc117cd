"""What ``accounts`` tells the floors above it.

``accounts`` sits below the queue, so it cannot call materialize itself; a
change to what should be queued is announced instead, and ``scheduled_sends``
(its ``AppConfig.ready``) answers by re-materializing that one user.
"""

from django.dispatch import Signal

# Sent after a person's delivery settings changed and the change committed.
# Arguments: ``user_id`` (int) and ``now`` (the instant the change was made).
delivery_settings_changed = Signal()
