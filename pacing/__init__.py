"""Send and request rates shared by every process, through PostgreSQL.

A floor of its own (above ``tenancy``, below everything that sends or calls a
provider): the channels and the calendar providers wait for slots of the same
named budgets (``telegram``, ``google``, ``google:user:<id>``, …), a provider's
429 lowers a budget's rate for every process, and the rate climbs back.
"""
