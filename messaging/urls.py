"""Provider callbacks: Twilio's delivery receipts, signed (``receipts``)."""

from django.urls import path

from messaging import receipts

urlpatterns = [
    path("twilio/status", receipts.twilio_status, name="twilio-status"),
]
