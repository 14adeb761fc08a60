"""The word tables of the German, French and Spanish rules: months, weekdays, units, currencies,
the words of times, signs and phone numbers. One :class:`Words` per language; the rules
(:mod:`agent.text.normalize.lang.rules`) are the same code for all of them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TABLES", "Words"]


@dataclass(frozen=True, slots=True)
class Words:
    """What one language's rules say; a unit or currency is (singular, plural)."""

    code: str
    """num2words's language code."""
    months: tuple[str, ...]
    weekdays: tuple[str, ...]
    comma: str
    """The decimal separator's word (``Komma``)."""
    percent: str
    minus: str
    plus: str
    degree: tuple[str, str]
    hour: tuple[str, str]
    """The word of the clock's hour (``Uhr``, ``heure``)."""
    units: dict[str, tuple[str, str]]
    currencies: dict[str, tuple[str, str]]
    cents: tuple[str, str]
    cents_joiner: str
    """Between the whole units of money and the cents (``con`` in Spanish, else nothing)."""
    abbreviations: dict[str, str] = field(default_factory=dict)
    """Abbreviations before a number (``Tel.``), written out."""


_METRIC = ("km/h", "km", "cm", "mm", "m", "kg", "mg", "g", "ml", "cl", "l", "kWh", "kW", "W",
           "V", "GB", "MB", "TB", "min")


def _units(*names: tuple[str, str]) -> dict[str, tuple[str, str]]:
    return dict(zip(_METRIC, names, strict=True))


_CURRENCY_SIGNS = ("€", "EUR", "$", "USD", "£", "GBP", "CHF")

GERMAN = Words(
    code="de",
    months=("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
            "Oktober", "November", "Dezember"),
    weekdays=("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"),
    comma="Komma", percent="Prozent", minus="minus", plus="plus", degree=("Grad", "Grad"),
    hour=("Uhr", "Uhr"),
    units=_units(*((w, w) for w in (
        "Kilometer pro Stunde", "Kilometer", "Zentimeter", "Millimeter", "Meter", "Kilogramm",
        "Milligramm", "Gramm", "Milliliter", "Zentiliter", "Liter", "Kilowattstunden", "Kilowatt",
        "Watt", "Volt", "Gigabyte", "Megabyte", "Terabyte", "Minuten"))),
    currencies=dict(zip(_CURRENCY_SIGNS, (("Euro", "Euro"),) * 2 + (("Dollar", "Dollar"),) * 2
                        + (("Pfund", "Pfund"),) * 2 + (("Franken", "Franken"),), strict=True)),
    cents=("Cent", "Cent"), cents_joiner="",
    abbreviations={"Tel.": "Telefon", "Nr.": "Nummer", "ca.": "circa"},
)

FRENCH = Words(
    code="fr",
    months=("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
            "octobre", "novembre", "décembre"),
    weekdays=("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    comma="virgule", percent="pour cent", minus="moins", plus="plus",
    degree=("degré", "degrés"), hour=("heure", "heures"),
    units=_units(("kilomètre heure", "kilomètres heure"), ("kilomètre", "kilomètres"),
                 ("centimètre", "centimètres"), ("millimètre", "millimètres"),
                 ("mètre", "mètres"), ("kilogramme", "kilogrammes"),
                 ("milligramme", "milligrammes"), ("gramme", "grammes"),
                 ("millilitre", "millilitres"), ("centilitre", "centilitres"),
                 ("litre", "litres"), ("kilowattheure", "kilowattheures"),
                 ("kilowatt", "kilowatts"), ("watt", "watts"), ("volt", "volts"),
                 ("gigaoctet", "gigaoctets"), ("mégaoctet", "mégaoctets"),
                 ("téraoctet", "téraoctets"), ("minute", "minutes"))
    | {"Go": ("gigaoctet", "gigaoctets"), "Mo": ("mégaoctet", "mégaoctets"),
       "To": ("téraoctet", "téraoctets")},
    currencies=dict(zip(_CURRENCY_SIGNS, (("euro", "euros"),) * 2 + (("dollar", "dollars"),) * 2
                        + (("livre", "livres"),) * 2 + (("franc", "francs"),), strict=True)),
    cents=("centime", "centimes"), cents_joiner="",
    abbreviations={"Tél.": "téléphone", "Tel.": "téléphone", "n°": "numéro"},
)

SPANISH = Words(
    code="es",
    months=("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
            "septiembre", "octubre", "noviembre", "diciembre"),
    weekdays=("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    comma="coma", percent="por ciento", minus="menos", plus="más",
    degree=("grado", "grados"), hour=("hora", "horas"),
    units=_units(("kilómetro por hora", "kilómetros por hora"), ("kilómetro", "kilómetros"),
                 ("centímetro", "centímetros"), ("milímetro", "milímetros"),
                 ("metro", "metros"), ("kilogramo", "kilogramos"),
                 ("miligramo", "miligramos"), ("gramo", "gramos"),
                 ("mililitro", "mililitros"), ("centilitro", "centilitros"),
                 ("litro", "litros"), ("kilovatio hora", "kilovatios hora"),
                 ("kilovatio", "kilovatios"), ("vatio", "vatios"), ("voltio", "voltios"),
                 ("gigabyte", "gigabytes"), ("megabyte", "megabytes"),
                 ("terabyte", "terabytes"), ("minuto", "minutos")),
    currencies=dict(zip(_CURRENCY_SIGNS, (("euro", "euros"),) * 2 + (("dólar", "dólares"),) * 2
                        + (("libra", "libras"),) * 2 + (("franco", "francos"),), strict=True)),
    cents=("céntimo", "céntimos"), cents_joiner="con",
    abbreviations={"Tel.": "teléfono", "Tfno.": "teléfono", "núm.": "número"},
)

TABLES: dict[str, Words] = {"de": GERMAN, "fr": FRENCH, "es": SPANISH}
"""The languages with rules (ISO 639-1): the rest is read by espeak-ng alone."""
