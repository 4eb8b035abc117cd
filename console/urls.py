"""The console's machine routes: the health verdict and Prometheus' metrics."""

from django.urls import path

from console import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics_view, name="metrics"),
]
