"""The providers' calls into us: inbound messages and taps, and delivery receipts."""

from django.urls import path

from messaging import receipts, webhooks

urlpatterns = [
    path("telegram/webhook", webhooks.telegram_webhook, name="telegram-webhook"),
    path("twilio/inbound", webhooks.twilio_inbound, name="twilio-inbound"),
    path("twilio/status", receipts.twilio_status, name="twilio-status"),
]
