"""The queue: one home for its states and for every move a row makes.

* ``states`` — what state a row is in, as queryset conditions (the admin's
  filters, health's counts and materialize's overdue evidence all use these);
* ``transitions`` — every write that moves a row: enqueue and withdraw
  (materialize), the claim and its settle-ups (deliver), release, retry and
  skip (support), expiry, smoothing moves, receipts and pruning;
* ``statements`` — the raw SQL whose exact shape matters (the claim, the
  fenced settle-ups), bound parameters only.
"""
