"""Password hashing for the test process: Django's PBKDF2, at a test's cost.

Django's default PBKDF2 runs a million iterations, about half a second of CPU
for every password set or checked; the suite sets and checks a few hundred,
which was a good part of its run time and all of it CPU the concurrent tests'
clocks then compete for. This is the same hasher — same algorithm, same
``pbkdf2_sha256$<iterations>$<salt>$<hash>`` format, so a stored password
looks and verifies as in production, in ``manage.py`` children too (they read
the iteration count from the hash) — with fewer iterations.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher

DJANGO_PBKDF2 = "django.contrib.auth.hashers.PBKDF2PasswordHasher"
FAST_PBKDF2 = f"{__name__}.FastPBKDF2PasswordHasher"


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000


def with_fast_pbkdf2(configured: list[str]) -> list[str]:
    """``PASSWORD_HASHERS`` with Django's PBKDF2 replaced by the fast one, not
    added to it: the last hasher of an algorithm name is the one that verifies."""
    return [FAST_PBKDF2 if path == DJANGO_PBKDF2 else path for path in configured]
