"""The providers' calls into us: inbound messages and taps, and delivery receipts."""

from django.urls import path

from messaging import webhooks

urlpatterns = [
    path("telegram/webhook", webhooks.telegram_webhook, name="telegram-webhook"),
    path("twilio/inbound", webhooks.twilio_inbound, name="twilio-inbound"),
    path("twilio/status", webhooks.twilio_status, name="twilio-status"),
]
