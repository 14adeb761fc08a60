"""German, French and Spanish normalization (agent/text/normalize/lang/, #29 item 4): each rule
in words, the dispatch by a voice's language, the keys, bounded work on hostile input, and the
per-language announcement sets read right by their phonemes on the real espeak-ng."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from agent.text.espeak import EspeakPhonemizer
from agent.text.normalize import LanguageNormalizer, Normalizer
from agent.text.normalize.lang import LANGUAGES, rules
from agent.text.normalize.lang.words import GERMAN, SPANISH
from tests.support import REPO

DE, FR, ES = (LanguageNormalizer(code, f"test/{code}") for code in ("de", "fr", "es"))
TARGET = 0.90
MIN_ROWS = 60
KINDS = {"cardinal", "decimal", "ordinal", "currency", "time", "date", "unit", "percent",
         "phone", "temperature"}


@pytest.mark.parametrize(("text", "said"), [
    ("Es gibt 1.250 Plätze.", "Es gibt eintausendzweihundertfünfzig Plätze."),
    ("Ein Plus von 2,5.", "Ein Plus von zwei Komma fünf."),
    ("Im Jahr 1998.", "Im Jahr neunzehnhundertachtundneunzig."),
    ("Der 3. Stock.", "Der dritte Stock."),
    ("Nehmen Sie den 2. Ausgang.", "Nehmen Sie den zweiten Ausgang."),
    ("Unser 21. Fest.", "Unser einundzwanzigster Fest."),
    ("Abfahrt Gleis 3. Vorsicht bitte.", "Abfahrt Gleis drei. Vorsicht bitte."),
    ("Vom 1. bis 14. Juni.", "Vom ersten bis vierzehnten Juni."),
    ("Montag, 7. Juni.", "Montag, den siebten Juni."),
    ("Am 25.12.2026.", "Am fünfundzwanzigsten Dezember zweitausendsechsundzwanzig."),
    ("Ab 15.03. neu.", "Ab fünfzehnten März neu."),
    ("Am 2027-01-15.", "Am fünfzehnten Januar zweitausendsiebenundzwanzig."),
    ("Um 7:15 Uhr.", "Um sieben Uhr fünfzehn."),
    ("Ab 9.30 Uhr.", "Ab neun Uhr dreißig."),
    ("Bis 01:30.", "Bis ein Uhr dreißig."),
    ("Es kostet 12,50 €.", "Es kostet zwölf Euro fünfzig."),
    ("Nur 1 € und €40 und 0,50 € und 5 CHF.",
     "Nur ein Euro und vierzig Euro und fünfzig Cent und fünf Franken."),
    ("Nachts -5 °C.", "Nachts minus fünf Grad."),
    ("Heute 20 % und 7,5%.", "Heute zwanzig Prozent und sieben Komma fünf Prozent."),
    ("Mit 50 km/h und 23 kg.", "Mit fünfzig Kilometer pro Stunde und dreiundzwanzig Kilogramm."),
    ("Tel. 0221 987654.", "Telefon null zwei zwei eins, neun acht sieben sechs fünf vier."),
    ("Aus dem Ausland +49 30 12345.", "Aus dem Ausland plus vier neun, drei null, eins zwei drei "
     "vier fünf."),
    ("Tel.: 030/123456, bitte.", "Telefon: null drei null, eins zwei drei vier fünf sechs, bitte."),
    ("Von 9–17 Uhr, 10-15 Minuten.", "Von neun bis siebzehn Uhr, zehn bis fünfzehn Minuten."),
    ("Fundbüro 089 / 55 66 77.", "Fundbüro null acht neun, fünf fünf, sechs sechs, sieben "
     "sieben."),
])
def test_german(text: str, said: str) -> None:
    assert DE(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Il y a 1 250 places.", "Il y a mille deux cent cinquante places."),
    ("Il y a 10.000 personnes.", "Il y a dix mille personnes."),
    ("Le 3e étage, la 1re, le 1er, la 4ème.",
     "Le troisième étage, la première, le premier, la quatrième."),
    ("Le 01/12/2026.", "Le premier décembre deux mille vingt six."),
    ("Dès le 15/03.", "Dès le quinze mars."),
    ("Ouvert 24/7, format 16/9.", "Ouvert vingt quatre/sept, format seize/neuf."),
    ("Entre 10-15 minutes.", "Entre dix à quinze minutes."),
    ("À 7h15, 21h, 9:30 et 0h05.",
     "À sept heures quinze, vingt et une heures, neuf heures trente et zéro heure cinq."),
    ("Ouvert de 10h à 18h.", "Ouvert de dix heures à dix huit heures."),
    ("Le billet coûte 12,50 €.", "Le billet coûte douze euros cinquante."),
    ("Un euro : 1 €.", "Un euro : un euro."),
    ("Il fait 1°C, puis 22 °C.", "Il fait un degré, puis vingt deux degrés."),
    ("Une hausse de 95%.", "Une hausse de quatre vingt quinze pour cent."),
    ("Encore 1,5 km et 2 Go.", "Encore un virgule cinq kilomètres et deux gigaoctets."),
    ("Appelez le 01 23 45 67 89.",
     "Appelez le zéro un, vingt trois, quarante cinq, soixante sept, quatre vingt neuf."),
    ("Tél. 01.42.68.53.00.",
     "téléphone zéro un, quarante deux, soixante huit, cinquante trois, zéro zéro."),
    ("Depuis +33 1 23 45.", "Depuis plus trente trois, un, vingt trois, quarante cinq."),
])
def test_french(text: str, said: str) -> None:
    assert FR(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Hay 1.250 plazas.", "Hay mil doscientos cincuenta plazas."),
    ("Son 2,4 millones.", "Son dos coma cuatro millones."),
    ("La 3.ª planta, la 2ª salida.", "La tercera planta, la segunda salida."),
    ("Terminó 1º en la carrera.", "Terminó primero en la carrera."),
    ("El 1er tren, el 21.º aniversario.", "El primer tren, el vigésimo primer aniversario."),
    ("Vence el 25/12/2026.", "Vence el veinticinco de diciembre de dos mil veintiséis."),
    ("A las 7:15, a las 1:30, a las 08:00.",
     "A las siete y quince, a las una y treinta, a las ocho."),
    ("A las 21 h.", "A las veintiuna horas."),
    ("Desde las 0:00.", "Desde las cero horas."),
    ("Abierto 24/7, cerrado el 15/03.", "Abierto veinticuatro/siete, cerrado el quince de marzo."),
    ("Cuesta 12,50 € o 1 € o $20.", "Cuesta doce euros con cincuenta o un euro o veinte dólares."),
    ("Aparcar 0,50 €.", "Aparcar cincuenta céntimos."),
    ("Hasta -5 °C.", "Hasta menos cinco grados."),
    ("Devolvemos el 100 %.", "Devolvemos el cien por ciento."),
    ("Quedan 1,5 km y 1 l.", "Quedan uno coma cinco kilómetros y un litro."),
    ("Llame al 912 345 678.", "Llame al nueve uno dos, tres cuatro cinco, seis siete ocho."),
    ("Hay 10 000 personas.", "Hay diez mil personas."),
    ("Desde +34 93 555.", "Desde más tres cuatro, nueve tres, cinco cinco cinco."),
])
def test_spanish(text: str, said: str) -> None:
    assert ES(text) == said


def test_what_is_not_understood_is_left_as_it_was() -> None:
    for normalizer in (DE, FR, ES):
        for text in ("Gleis B", "Zug ICE", "x/y", "a.b", "Wagen A-C"):
            assert normalizer(text) == text
    assert rules.dates("Kein Datum 32.13. oder 31.02", GERMAN) == "Kein Datum 32.13. oder 31.02"
    assert rules.dates("ni 32/01 ni 5/13", SPANISH) == "ni 32/01 ni 5/13"
    assert rules.times("25:00 und 7:75", GERMAN) == "25:00 und 7:75"


def test_the_voice_language_chooses_the_rules() -> None:
    for code, language in (("de_DE", "de"), ("de-at", "de"), ("fr", "fr"), ("fr_CA", "fr"),
                           ("es_ES", "es"), ("es_MX", "es"), ("ES", "es")):
        chosen = Normalizer.for_language(code)
        assert isinstance(chosen, LanguageNormalizer), code
        assert chosen.language == language
        assert chosen.key.endswith(f"/{language}")
    for code in ("it_IT", "nl_NL", "zh_CN", "", "deu"):
        assert Normalizer.for_language(code) is None, code
    assert isinstance(Normalizer.for_language("en_US"), Normalizer)
    chosen_all = [Normalizer.for_language(code) for code in ("de", "fr", "es", "en")]
    assert len({n.key for n in chosen_all if n is not None}) == 4
    assert {"de", "fr", "es"} == LANGUAGES
    with pytest.raises(ValueError, match="no normalization rules"):
        LanguageNormalizer("it", "x")


def test_long_numbers_are_read_digit_by_digit() -> None:
    assert DE("Code " + "1" * 16) == "Code " + " ".join(["eins"] * 16)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", [
    "1", "1,", "1.", "1. ", "€1", "1-", "1:", "12:3", "1/", "-1", "1 ", "1°", "+1 ", "1 km/",
    "2026-", "0800 ", "7.30", "Tel. 1 ", "1h", "1º ", "1e ", "01 ", "01.", "1 000 ", "١", "１,",
])
def test_hostile_input_finishes(unit: str) -> None:
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    for normalizer in (DE, FR, ES):
        assert isinstance(normalizer(text), str)


# --- the per-language sets (bench/corpus/announcements.<code>.tsv) ---------------------------


@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_each_language_set_is_read_right(accuracy: ModuleType, language: str) -> None:
    rows = accuracy.read_corpus(accuracy.language_corpus(language))
    assert len(rows) >= MIN_ROWS
    assert {row.category for row in rows} >= KINDS
    assert len({row.text for row in rows}) == len(rows), "an input appears twice"
    outcomes = accuracy.run_language(language)
    misses = [o for o in outcomes if not o.right]
    share = 1 - len(misses) / len(outcomes)
    listing = "\n".join(f"{o.row.text!r} -> {o.normalized!r}" for o in misses)
    assert share >= TARGET, f"{language}: {share:.1%} read right; misses:\n{listing}"
    path = REPO / "bench" / "results" / "text_accuracy.json"
    recorded = json.loads(path.read_text(encoding="utf-8"))["raw"]["languages"][language]
    now = {(o.row.text, o.right) for o in outcomes}
    assert {(r["input"], r["right"]) for r in recorded["rows"]} == now, (
        "bench/results/text_accuracy.json is stale: run .venv/bin/python bench/text_accuracy.py")


def test_the_comparison_is_in_the_language(accuracy: ModuleType) -> None:
    german = EspeakPhonemizer("de")

    def same(a: str, b: str) -> bool:
        return bool(accuracy.phonemes_of(german.clauses, a)
                    == accuracy.phonemes_of(german.clauses, b))

    assert same("zweihundertfünfzig", "zweihundert fünfzig")
    assert not same("zwölf Euro", "zwanzig Euro")
    assert not same("dritte", "dritten")
