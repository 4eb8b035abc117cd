"""Planning in sets (``tenancy.scope.planning_scope``): the planner role's policy
and grants on the connections, events and follow-ups it reads."""

from django.db import migrations

from tenancy.rls import grant_planner


class Migration(migrations.Migration):
    dependencies = [("calendars", "0007_follow_up_repeat_reminders_and_calendar_switches")]

    operations = [
        grant_planner("calendar_connections"),
        grant_planner("calendar_events"),
        grant_planner("follow_ups"),
    ]
