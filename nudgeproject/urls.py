from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from portal.signin import ThrottledPasswordResetForm, UnlockingSetPasswordForm

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's own routes: the reset form that limits and mails off the request.
    path(
        "accounts/password_reset/",
        auth_views.PasswordResetView.as_view(form_class=ThrottledPasswordResetForm),
        name="password_reset",
    ),
    # The reset link's form: a new password set there also lifts the sign-in locks.
    path(
        "accounts/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(form_class=UnlockingSetPasswordForm),
        name="password_reset_confirm",
    ),
    # A person changes their password on their account page, not Django's admin form.
    path(
        "accounts/password_change/",
        RedirectView.as_view(pattern_name="portal:account", permanent=False),
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("console.urls")),
    path("", include("sweeps.urls")),
    path("", include("messaging.urls")),
    path("", include("portal.machine_urls")),
    path("calendars/", include("calendars.urls")),
    path("", include("portal.urls")),
]
