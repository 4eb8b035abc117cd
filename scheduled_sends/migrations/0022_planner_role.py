"""Planning in sets (``tenancy.scope.planning_scope``): the planner role's policy
and grants on the queue, each of its day partitions, and the Snooze taps it reads.

A partition carries its own policies (PostgreSQL applies them when it is named
directly), so each existing one gets the planner's too; ``make_partitions``
gives new ones the same (``tenancy.rls.tenant_table_security``).
"""

from django.db import migrations

from tenancy.rls import grant_planner, planner_statements, revoke_planner_statements

PARTITIONS = """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'scheduled_sends'::regclass ORDER BY 1
"""


def _each_partition(statements_for):
    def apply(apps, schema_editor) -> None:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(PARTITIONS)
            for (name,) in cursor.fetchall():
                for statement in statements_for(name):
                    cursor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0021_queue_partitioned_by_intended_day")]

    operations = [
        grant_planner("scheduled_sends"),
        grant_planner("nudge_acts"),
        migrations.RunPython(
            _each_partition(lambda name: planner_statements(name, like="scheduled_sends")),
            _each_partition(revoke_planner_statements),
        ),
    ]
