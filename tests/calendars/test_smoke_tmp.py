from calendars.models import CalendarConnection
from tenancy.scope import tenant_scope


def test_smoke(make_user):
    u = make_user()
    with tenant_scope(u.pk):
        CalendarConnection.objects.create(user=u, provider="ics")
        assert CalendarConnection.objects.count() == 1
