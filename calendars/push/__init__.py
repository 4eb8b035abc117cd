"""Push from Google and Microsoft Graph: a calendar is fetched when it changes."""
