"""Routes for machines: the follow-ups and calendars API and its schema."""

from django.urls import path, re_path

from portal import api

urlpatterns = [
    # The schema's paths, each to its view: "/api/follow-ups/{id}" is "api/follow-ups/<int:pk>",
    # named "api-follow-up" after the view.
    *(
        path(
            route[1:].replace("{id}", "<int:pk>"),
            view,
            name=f"api-{view.__name__}".replace("_", "-"),
        )
        for route, view in api.ENDPOINTS.items()
    ),
    path("api/schema", api.api_schema, name="api-schema"),
    # Anything else under api/ (``/api/follow-ups/abc``): a JSON 404, not the site's page.
    re_path(r"^api/", api.not_found, name="api-not-found"),
]
