"""The ground floor: what every app may import and that imports no app.

The configuration object, the management commands' shared argument types, the
HTTP helpers shared by calendars and channels, the log format, the read-only
admin base and the one way an instant is written in the console. Nothing here
imports ``tenancy``, ``accounts``, ``calendars``, ``scheduled_sends``,
``portal`` or the site (``nudgeproject``); ``tests/test_layers.py`` holds that.
"""
