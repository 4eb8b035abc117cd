"""The ground floor: what every app may import and that imports no app."""
