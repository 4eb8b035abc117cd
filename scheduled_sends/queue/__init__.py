"""The queue: its states (``states``), every write that moves a row
(``transitions``) and the raw SQL whose shape matters (``statements``)."""
