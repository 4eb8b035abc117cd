"""Issue 36: the table of phrases a person types in a chat, each read on a fixed clock
in the person's zone: the instant and title expected, or the choices asked back."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from followups.capture import AskBack, Captured, NoTime, parse

# A Thursday: 15:00 in Berlin and Paris, 09:00 in New York, 08:00 in Mexico City,
# 11:00 in São Paulo, 23:00 in Tokyo, Friday 03:00 in Auckland.
NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)

EN, DE, ES, FR, PT = "en", "de", "es", "fr", "pt-br"
NY, BER, MEX, PAR, SAO = (
    "America/New_York",
    "Europe/Berlin",
    "America/Mexico_City",
    "Europe/Paris",
    "America/Sao_Paulo",
)

# (language, zone, phrase, expected local "YYYY-MM-DD HH:MM", expected title)
CAPTURES = [
    (EN, NY, "remind me tomorrow at 9 to call Anna", "2026-12-04 09:00", "call Anna"),
    (EN, NY, "in 2 hours check the oven", "2026-12-03 11:00", "check the oven"),
    (EN, NY, "Friday 14:00 dentist", "2026-12-04 14:00", "dentist"),
    (EN, NY, "at 3pm call Bob", "2026-12-03 15:00", "call Bob"),
    (EN, NY, "remind me to water the plants at 18:30", "2026-12-03 18:30", "water the plants"),
    (EN, NY, "in 30 minutes stand up", "2026-12-03 09:30", "stand up"),
    (EN, NY, "on Monday at 10 team sync", "2026-12-07 10:00", "team sync"),
    (EN, NY, "Dec 10 at 15:00 review", "2026-12-10 15:00", "review"),
    (EN, NY, "2026-12-24 18:00 dinner", "2026-12-24 18:00", "dinner"),
    (EN, NY, "tomorrow 7:45 gym", "2026-12-04 07:45", "gym"),
    (EN, NY, "next Tuesday at 11 dentist", "2026-12-08 11:00", "dentist"),
    (EN, NY, "remind me in 3 days to renew the passport", "2026-12-06 09:00", "renew the passport"),
    (EN, NY, "in 2 days at 5pm call Anna", "2026-12-05 17:00", "call Anna"),
    (EN, NY, "12/24 at 9am presents", "2026-12-24 09:00", "presents"),
    (EN, NY, "tomorrow at noon lunch with Sam", "2026-12-04 12:00", "lunch with Sam"),
    (EN, NY, "tomorrow around noon call Sam", "2026-12-04 12:00", "call Sam"),
    # A written hour beats a noon word, which stays in the title.
    (EN, NY, "tomorrow at 1pm midday walk", "2026-12-04 13:00", "midday walk"),
    (EN, NY, "in 1 hour", "2026-12-03 10:00", ""),
    (EN, NY, "today at 8 pm call mum", "2026-12-03 20:00", "call mum"),
    (EN, NY, "Thursday 10:00 review", "2026-12-03 10:00", "review"),
    # A part of the day apart from the hour settles it.
    (EN, NY, "tomorrow evening at 8 call mom", "2026-12-04 20:00", "call mom"),
    (EN, NY, "tomorrow afternoon at 3 dentist", "2026-12-04 15:00", "dentist"),
    (EN, "Asia/Tokyo", "at 9 call Anna", "2026-12-04 09:00", "call Anna"),
    (EN, "Asia/Tokyo", "tomorrow at 6:30 run", "2026-12-04 06:30", "run"),
    (EN, "America/Los_Angeles", "at 7 breakfast", "2026-12-03 07:00", "breakfast"),
    (EN, "Pacific/Auckland", "tomorrow at 9 call Anna", "2026-12-05 09:00", "call Anna"),
    (DE, BER, "morgen um 9 Anna anrufen", "2026-12-04 09:00", "Anna anrufen"),
    (DE, BER, "in 2 Stunden Ofen prüfen", "2026-12-03 17:00", "Ofen prüfen"),
    (DE, BER, "Freitag 14:00 Zahnarzt", "2026-12-04 14:00", "Zahnarzt"),
    (DE, BER, "erinnere mich morgen um 8:30 an den Müll", "2026-12-04 08:30", "den Müll"),
    (DE, BER, "am 24.12. um 18 Uhr Bescherung", "2026-12-24 18:00", "Bescherung"),
    (DE, BER, "heute um 20 Uhr Sport", "2026-12-03 20:00", "Sport"),
    (DE, BER, "in 30 Minuten Tee", "2026-12-03 15:30", "Tee"),
    (DE, BER, "Montag um 10 Teammeeting", "2026-12-07 10:00", "Teammeeting"),
    (DE, BER, "übermorgen um 7 Flughafen", "2026-12-05 07:00", "Flughafen"),
    (DE, BER, "am 10. Dezember um 15 Uhr Arzt", "2026-12-10 15:00", "Arzt"),
    (DE, BER, "nächsten Dienstag um 11 Friseur", "2026-12-08 11:00", "Friseur"),
    (DE, BER, "in 3 Tagen Pass verlängern", "2026-12-06 15:00", "Pass verlängern"),
    (DE, BER, "in 2 Tagen um 9 Anna anrufen", "2026-12-05 09:00", "Anna anrufen"),
    (DE, BER, "in einer Woche um 10 Zahnarzt", "2026-12-10 10:00", "Zahnarzt"),
    (DE, BER, "um 21 am Freitag Kino", "2026-12-04 21:00", "Kino"),
    (DE, BER, "morgen Abend um 8 Mama anrufen", "2026-12-04 20:00", "Mama anrufen"),
    (DE, BER, "morgen Nachmittag um 3 Arzt", "2026-12-04 15:00", "Arzt"),
    (DE, BER, "morgen Mittag Tom anrufen", "2026-12-04 12:00", "Tom anrufen"),
    (DE, BER, "morgen gegen Mittag Tom anrufen", "2026-12-04 12:00", "Tom anrufen"),
    (DE, BER, "morgen um 13 Uhr Mittag mit Tom", "2026-12-04 13:00", "Mittag mit Tom"),
    (DE, BER, "morgen 12:30 Mittag mit Tom", "2026-12-04 12:30", "Mittag mit Tom"),
    (ES, MEX, "mañana a las 9 llamar a Ana", "2026-12-04 09:00", "llamar a Ana"),
    (ES, MEX, "en 2 horas revisar el horno", "2026-12-03 10:00", "revisar el horno"),
    (ES, MEX, "viernes 14:00 dentista", "2026-12-04 14:00", "dentista"),
    (
        ES,
        MEX,
        "recuérdame mañana a las 8:30 sacar la basura",
        "2026-12-04 08:30",
        "sacar la basura",
    ),
    (ES, MEX, "hoy a las 20:00 gimnasio", "2026-12-03 20:00", "gimnasio"),
    (ES, MEX, "el lunes a las 10 reunión", "2026-12-07 10:00", "reunión"),
    (ES, MEX, "10 de diciembre a las 15:00 cena", "2026-12-10 15:00", "cena"),
    (ES, MEX, "pasado mañana a las 7 aeropuerto", "2026-12-05 07:00", "aeropuerto"),
    (ES, MEX, "en 30 minutos café", "2026-12-03 08:30", "café"),
    (ES, MEX, "el próximo martes a las 11 peluquería", "2026-12-08 11:00", "peluquería"),
    (ES, MEX, "24/12 a las 18:00 cena de Navidad", "2026-12-24 18:00", "cena de Navidad"),
    (ES, MEX, "a las 9 llamar a Ana", "2026-12-03 09:00", "llamar a Ana"),
    (ES, MEX, "esta noche a las 9 cena", "2026-12-03 21:00", "cena"),
    (ES, MEX, "mañana por la tarde a las 5 médico", "2026-12-04 17:00", "médico"),
    (ES, MEX, "mañana a mediodía llamar a Ana", "2026-12-04 12:00", "llamar a Ana"),
    (ES, MEX, "mañana al mediodía llamar a Ana", "2026-12-04 12:00", "llamar a Ana"),
    (
        ES,
        MEX,
        "mañana a las 13:30 reunión de mediodía",
        "2026-12-04 13:30",
        "reunión de mediodía",
    ),
    (FR, PAR, "demain 9h appeler Anna", "2026-12-04 09:00", "appeler Anna"),
    (FR, PAR, "dans 2 heures vérifier le four", "2026-12-03 17:00", "vérifier le four"),
    (FR, PAR, "vendredi 14h dentiste", "2026-12-04 14:00", "dentiste"),
    (
        FR,
        PAR,
        "rappelle-moi demain à 8h30 de sortir les poubelles",
        "2026-12-04 08:30",
        "sortir les poubelles",
    ),
    (FR, PAR, "aujourd'hui à 20h sport", "2026-12-03 20:00", "sport"),
    (FR, PAR, "lundi à 10h réunion", "2026-12-07 10:00", "réunion"),
    (FR, PAR, "le 10 décembre à 15h médecin", "2026-12-10 15:00", "médecin"),
    (FR, PAR, "après-demain à 7h aéroport", "2026-12-05 07:00", "aéroport"),
    (FR, PAR, "dans 30 minutes thé", "2026-12-03 15:30", "thé"),
    (FR, PAR, "dans 2 jours à 8h30 dentiste", "2026-12-05 08:30", "dentiste"),
    (FR, PAR, "mardi prochain à 11h coiffeur", "2026-12-08 11:00", "coiffeur"),
    (FR, PAR, "24/12 à 18h réveillon", "2026-12-24 18:00", "réveillon"),
    (FR, PAR, "demain soir à 8h dîner", "2026-12-04 20:00", "dîner"),
    (FR, PAR, "demain après-midi à 3h médecin", "2026-12-04 15:00", "médecin"),
    (FR, PAR, "demain à midi déjeuner", "2026-12-04 12:00", "déjeuner"),
    (FR, PAR, "demain vers midi appeler Anna", "2026-12-04 12:00", "appeler Anna"),
    (FR, PAR, "demain à 12h30 déjeuner de midi", "2026-12-04 12:30", "déjeuner de midi"),
    (PT, SAO, "amanhã às 9 ligar para Ana", "2026-12-04 09:00", "ligar para Ana"),
    (PT, SAO, "em 2 horas ver o forno", "2026-12-03 13:00", "ver o forno"),
    (PT, SAO, "sexta 14:00 dentista", "2026-12-04 14:00", "dentista"),
    (PT, SAO, "me lembre amanhã às 8:30 de levar o lixo", "2026-12-04 08:30", "levar o lixo"),
    (PT, SAO, "hoje às 20h academia", "2026-12-03 20:00", "academia"),
    (PT, SAO, "segunda-feira às 10 reunião", "2026-12-07 10:00", "reunião"),
    (PT, SAO, "10 de dezembro às 15:00 médico", "2026-12-10 15:00", "médico"),
    (PT, SAO, "depois de amanhã às 7 aeroporto", "2026-12-05 07:00", "aeroporto"),
    (PT, SAO, "em 30 minutos café", "2026-12-03 11:30", "café"),
    (PT, SAO, "próxima terça às 11 cabeleireiro", "2026-12-08 11:00", "cabeleireiro"),
    (PT, SAO, "24/12 às 18:00 ceia", "2026-12-24 18:00", "ceia"),
    (PT, SAO, "amanhã à noite às 8 jantar", "2026-12-04 20:00", "jantar"),
    (PT, SAO, "amanhã meio-dia almoço", "2026-12-04 12:00", "almoço"),
    (PT, SAO, "amanhã ao meio-dia almoço", "2026-12-04 12:00", "almoço"),
    (PT, SAO, "amanhã às 13h almoço do meio-dia", "2026-12-04 13:00", "almoço do meio-dia"),
]

# (language, zone, phrase, the choices offered as local "YYYY-MM-DD HH:MM", title)
ASKS_BACK = [
    # "at 9" after 09:00 and before 21:00: which one?
    (EN, BER, "at 9 call Anna", ("2026-12-03 21:00", "2026-12-04 09:00"), "call Anna"),
    (DE, BER, "um 9 Anna anrufen", ("2026-12-03 21:00", "2026-12-04 09:00"), "Anna anrufen"),
    (FR, PAR, "à 9h appeler Anna", ("2026-12-03 21:00", "2026-12-04 09:00"), "appeler Anna"),
    (PT, SAO, "às 9 ligar para Ana", ("2026-12-03 21:00", "2026-12-04 09:00"), "ligar para Ana"),
    # "next Thursday" on a Thursday: in a week, or in two?
    (EN, NY, "next Thursday 10:00 review", ("2026-12-10 10:00", "2026-12-17 10:00"), "review"),
    (
        DE,
        BER,
        "nächsten Donnerstag um 10 Review",
        ("2026-12-10 10:00", "2026-12-17 10:00"),
        "Review",
    ),
    # A day and no time.
    (
        EN,
        NY,
        "tomorrow dentist",
        ("2026-12-04 09:00", "2026-12-04 14:00", "2026-12-04 18:00"),
        "dentist",
    ),
    (
        ES,
        MEX,
        "mañana dentista",
        ("2026-12-04 09:00", "2026-12-04 14:00", "2026-12-04 18:00"),
        "dentista",
    ),
    # "après-midi" is no hour ("midi" in it is not noon).
    (
        FR,
        PAR,
        "demain après-midi médecin",
        ("2026-12-04 09:00", "2026-12-04 14:00", "2026-12-04 18:00"),
        "après-midi médecin",
    ),
]


def _local(text: str, zone: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))


def test_the_table_reads_at_least_95_percent_exactly_and_nothing_silently_wrong():
    assert len(CAPTURES) + len(ASKS_BACK) >= 60
    exact, asked, wrong = 0, [], []
    for language, zone, phrase, expected, title in CAPTURES:
        result = parse(phrase, language, zone, NOW)
        if result == Captured(title, _local(expected, zone)):
            exact += 1
        elif isinstance(result, AskBack):
            asked.append(phrase)
        else:
            wrong.append((phrase, result))
    assert wrong == []
    assert exact / len(CAPTURES) >= 0.95, asked


@pytest.mark.parametrize(("language", "zone", "phrase", "expected", "title"), CAPTURES)
def test_each_phrase_is_read_as_the_person_meant(language, zone, phrase, expected, title):
    result = parse(phrase, language, zone, NOW)
    assert isinstance(result, Captured), result
    assert result.title == title
    assert result.due_at == _local(expected, zone)  # the same instant


@pytest.mark.parametrize(("language", "zone", "phrase", "choices", "title"), ASKS_BACK)
def test_ambiguous_phrases_are_asked_back_with_choices(language, zone, phrase, choices, title):
    result = parse(phrase, language, zone, NOW)
    assert result == AskBack(title, tuple(_local(choice, zone) for choice in choices))


@pytest.mark.parametrize(
    ("language", "phrase"),
    [
        (EN, "remind me to call Anna"),
        (DE, "erinnere mich Anna anzurufen"),
        (FR, "rappel appeler Anna"),
    ],
)
def test_a_reminder_without_a_time_is_told_so(language, phrase):
    assert parse(phrase, language, BER, NOW) == NoTime()


@pytest.mark.parametrize("phrase", ["hello", "thanks!", "what is this?", "ok 👍"])
def test_chatter_is_not_a_capture(phrase):
    assert parse(phrase, EN, BER, NOW) is None


def test_a_day_across_a_daylight_saving_change_keeps_the_wall_clock():
    # Saturday 2027-03-27 in Berlin (CET); Sunday's 09:00 is CEST.
    now = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
    result = parse("tomorrow at 9:00 call Anna", EN, BER, now)
    assert result == Captured("call Anna", datetime(2027, 3, 28, 7, 0, tzinfo=UTC))
