"""English text handling shared by ingestion and queries: word lists, the tokeniser, word forms.

Everything here is pure: no store, no model. Word forms come from ``lemminflect``'s bundled
English lexicon (no download, no model).

Word lists, each for one purpose (they differ on purpose, see each one's comment):

- :data:`STOP_WORDS`: function words and fillers dropped from tags and running text before they
  are indexed; :data:`QUERY_STOP_WORDS` adds the words of asking for videos ("show", "clips");
  :data:`KEYWORD_STOP_WORDS` is the short list of the keyword matcher, which must keep words that
  tell answers apart ("not", "yes", "no", "after").
- :data:`PLACE_NOUNS` and :data:`SCENE_PREPOSITIONS` find scenes in running text;
  :data:`QUERY_PLACE_WORDS` and :data:`PLACE_PREPOSITIONS` find them in search queries.
- :data:`LIGHT_VERBS`, :data:`COMMON_VERBS`, :data:`INSTRUCTION_VERBS` and :data:`ING_NOUNS` tell
  actions from other words.

Canonical forms (:func:`canonical_form`) are how a tag is stored in the concept vocabulary: lower
case, stop-words and filler dropped, nouns singular ("dogs" -> "dog"), the verb of an action as a
gerund ("runs"/"ran"/"run" -> "running") while nouns keep their part of speech ("spring", "posts"
-> "post", "map" stay nouns even as action tags); a tag of vague nouns only ("thing", "kind of")
or an action of a light verb alone ("go", "make") is no concept.
"""

from __future__ import annotations

import functools
import re

#: The three dimensions a tag describes (the sub-libraries of the semantic index).
DIMENSIONS = ("scene", "object", "action")
#: Words kept of a canonical concept ("man riding red bicycle" is already long).
MAX_CONCEPT_WORDS = 4


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` as a set (keeps long word lists readable)."""
    return frozenset(text.split())


# ============================================================================ word lists

#: Function words and fillers: dropped from tags (canonical forms) and from running text.
STOP_WORDS = word_set("""
    a an the this that these those some any each every all both either neither no none another other
    such own same so than too very just only also even still then now here there where when while
    i me my mine myself we us our ours you your yours he him his she her hers it its they them their
    theirs one ones someone something anything everything nothing somebody anybody everybody
    who whom whose which what whatever
    am is are was were be been being have has had having do does did doing done
    will would shall should can could may might must ought
    and or but nor if because as of at by for with about against between into through during before
    after above below to from up down in out on off over under again further once onto upon within
    without near inside outside across around along toward towards behind beside beyond among via
    not don't doesn't didn't isn't aren't wasn't weren't can't won't let's it's that's there's
    oh ok okay yes yeah hey hi hello please thanks thank uh um well like really actually maybe
    """) | word_set("""
    gonna wanna gotta kinda sorta basically literally totally honestly seriously anyway anyways
    alright right let lots whatever etc yep nope hmm mhm uh-huh er ah
    """)  # spoken filler: narration is full of it and none of it is a thing, place or action

#: Nouns too general to be a concept on their own ("thing", "kind" of "kind of", "lot" of "a lot");
#: in a longer phrase they stay ("parking lot").
VAGUE_NOUNS = word_set("""
    thing stuff way time lot kind sort bit part today tomorrow yesterday moment day week year
    minute second hour end start side point number case fact idea reason question answer video
    channel everyone episode
    """)

#: Words of a search query that carry no search intent: the stop words and the words of asking
#: for videos ("show me clips of ...").
QUERY_STOP_WORDS = STOP_WORDS | word_set(
    "how show find search video videos clip clips footage scene scenes shot shots"
)

#: The keyword matcher's stop words. Short on purpose: negations, yes/no and prepositions tell
#: the options of a multiple-choice question apart, so they must stay matchable.
KEYWORD_STOP_WORDS = word_set("""
    a an and are as at be but by did do does for from had has have he her his how i in is it its
    of on or she so that the their them then there they this to was what when where which who why
    will with you your
    """)

#: Articles, dropped when names are compared ("the man in red" is "man in red").
ARTICLES = word_set("a an the")

#: Nouns naming places: a noun among them is a scene in running text (the signals parse).
PLACE_NOUNS = word_set("""
    kitchen bedroom bathroom office classroom school street road highway city town village park
    garden yard beach sea ocean lake river forest wood mountain desert field farm stadium gym
    restaurant cafe bar shop store supermarket market mall hospital church airport station
    studio stage theater theatre library museum home house apartment room hall lobby corridor
    garage parking factory warehouse lab laboratory court pool playground bridge tunnel harbor
    port island countryside downtown campus hotel
    """)

#: Words that make a query phrase a scene before the library's vocabulary knows it: the place
#: nouns, their plurals a query may use, and settings (times of day, weather, indoors/outdoors).
QUERY_PLACE_WORDS = PLACE_NOUNS | word_set("""
    mountains woods harbour arena cave jungle track lot living sky underwater indoors outdoors
    night sunset snow
    """)

#: Prepositions after which a noun of running text is a place. Narrower than
#: :data:`PLACE_PREPOSITIONS`: in speech "on", "over" and "through" follow verbs too often
#: ("turn on the oven", "go through the steps").
SCENE_PREPOSITIONS = word_set("in at inside outside into near")

#: Prepositions after which a phrase of a search query is taken as a place.
PLACE_PREPOSITIONS = SCENE_PREPOSITIONS | word_set("on beside along across through under over onto around")

#: Verbs too general to index as actions when found in running text (the signals parse).
LIGHT_VERBS = word_set(
    "be have do get go let know think want need mean guess say tell make seem become use try "
    "like love hope feel come give take put keep begin start show call ask find"
)

#: Frequent verbs in their base and inflected forms (gerunds are recognised by their ending).
COMMON_VERBS = word_set("""
    run runs ran jump jumps jumped walk walks walked swim swims swam ride rides rode dance dances
    danced cook cooks cooked eat eats ate drink drinks drank play plays played sing sings sang
    drive drives drove fly flies flew climb climbs climbed throw throws threw catch catches caught
    kick kicks kicked sleep sleeps slept sit sits sat stand stands stood talk talks talked fight
    fights fought laugh laughs laughed cry cries cried chase chases chased crash crashes crashed
    fall falls fell hug hugs hugged kiss kisses kissed surf surfs surfed skate skates skated ski
    skis skied chat chats chatted
    """)

#: Verbs that open instructions, recipes and signs ("MIX FLOUR", "PRESS BUTTON"). A two-word sign
#: whose first word is both a noun and a verb is a command only when that verb is one of these (or
#: a :data:`COMMON_VERBS` form); otherwise it is a compound noun ("SPRING TIMETABLE", "POST OFFICE",
#: "MAP ROOM"): without a part-of-speech tagger, nothing else tells the two apart.
INSTRUCTION_VERBS = word_set("""
    add bake beat blend boil break brush chop clean close combine cook cool cover cut dice drain
    dry fill fold fry grate grill heat hold insert knead lift melt mix open peel place pour press
    pull push remove rinse roast roll rub scan season serve shake simmer slice soak spread sprinkle
    squeeze stir strain switch tap tighten toast turn twist unplug wait wash whisk wipe wrap
    """)

#: Words ending in -ing that are things or places, not actions. (A noun that is also a verb,
#: "spring", "post", "map", stays a noun unless :func:`canonical_form` reads it as an action.)
ING_NOUNS = word_set(
    "building ceiling morning evening ring thing king wedding painting clothing spring "
    "string wing swing sibling pudding stuffing icing awning bedding railing"
)


# ============================================================================ tokens

#: An English word as lemminflect knows them: hyphenated words and contractions stay whole.
_ENGLISH_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
#: A word of any script (speech and on-screen text may be in any language); apostrophes inside
#: a word keep it whole ("don't", "o'brien"), quotes around it do not stick to it.
_ANY_WORD = re.compile(r"\w+(?:'\w+)*")


def tokens(text: str | None, *, any_script: bool = False) -> list[str]:
    """Lower-case word tokens of ``text``.

    By default English words for the lexicon (tags, queries): ASCII letters and digits,
    hyphenated words one token, possessive "'s" dropped ("the dog's bowl" -> the, dog, bowl).
    With ``any_script`` the letters of every script count and hyphens split words, for free text
    that need not be English (keyword search over speech and on-screen text, subject names).
    """
    text = (text or "").lower().replace("\u2019", "'")
    if any_script:
        return _ANY_WORD.findall(text)
    return [w[:-2] if w.endswith("'s") else w for w in _ENGLISH_WORD.findall(text)]


def keywords(text: str | None) -> list[str]:
    """The words of ``text`` a keyword matcher compares: any script, without
    :data:`KEYWORD_STOP_WORDS`."""
    return [t for t in tokens(text, any_script=True) if t not in KEYWORD_STOP_WORDS]


# ============================================================================ word forms


@functools.lru_cache(maxsize=65_536)
def _lemma_items(word: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    import lemminflect  # here: only a question or search that needs a word's forms imports it

    return tuple(lemminflect.getAllLemmas(word).items())


def lemmas(word: str) -> dict[str, tuple[str, ...]]:
    """The lexicon's lemmas of ``word`` by part of speech (``{}`` when it does not know it)."""
    return dict(_lemma_items(word))


#: Plurals the lexicon lists as lemmas of their own but detectors and people use as plurals.
_SUPPLETIVE_PLURALS = {"people": "person", "persons": "person"}


def singular(word: str) -> str:
    """The singular of a noun ("dogs" -> "dog", "people" -> "person"); unknown and uncountable
    words are kept."""
    if word in _SUPPLETIVE_PLURALS:
        return _SUPPLETIVE_PLURALS[word]
    nouns = lemmas(word).get("NOUN")
    if nouns:
        return word if word in nouns else nouns[0]
    if not lemmas(word) and len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        import lemminflect

        guess = lemminflect.getAllLemmasOOV(word, "NOUN").get("NOUN")
        if guess:
            return guess[0]
    return word


def verb_lemma(word: str) -> str | None:
    """The verb a word is a form of ("ran" -> "run"), or ``None`` when it has no verb reading."""
    verbs = lemmas(word).get("VERB")
    return verbs[0] if verbs else None


def gerund(word: str) -> str:
    """The -ing form of a verb form ("runs", "ran", "run" -> "running"); other words unchanged."""
    lemma = verb_lemma(word)
    if lemma is None:
        return word
    import lemminflect

    forms = lemminflect.getInflection(lemma, tag="VBG")
    return forms[0] if forms else word


def _action_verb_index(words: list[str]) -> int | None:
    """Which word of an action phrase is its verb: an -ing form first, then a word that is only a
    verb ("ran"), then an inflected verb form ("walks"), then any word with a verb reading."""
    readings = [lemmas(w) for w in words]
    for i, (w, r) in enumerate(zip(words, readings, strict=True)):
        if w.endswith("ing") and "VERB" in r:
            return i
    for i, r in enumerate(readings):
        if "VERB" in r and "NOUN" not in r and "ADJ" not in r:
            return i
    for i, (w, r) in enumerate(zip(words, readings, strict=True)):
        if "VERB" in r and w not in r["VERB"]:
            return i
    return next((i for i, r in enumerate(readings) if "VERB" in r), None)


def canonical_form(word_or_phrase: str, dimension: str) -> str:
    """The canonical form of a tag: lower case, stop-words dropped, at most
    :data:`MAX_CONCEPT_WORDS` words; for scenes and objects the head (last) noun singular, for
    actions the verb as a gerund followed by its (singular) object ("walks the dogs" ->
    "walking dog"). Returns ``""`` when nothing is left."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; one of {', '.join(DIMENSIONS)}")
    words = [w for w in tokens(word_or_phrase) if w not in STOP_WORDS and not w.isdigit()]
    if not words:
        return ""
    if all(singular(w) in VAGUE_NOUNS for w in words):
        return ""
    if dimension == "action":
        verb = _action_verb_index(words)
        if verb is not None and verb == len(words) - 1 and verb_lemma(words[verb]) in LIGHT_VERBS:
            return ""  # "go", "make", "doing": too general to be an action without an object
        if verb is not None and _acts(words, verb):
            words = [gerund(words[verb])] + [singular(w) for w in words[verb + 1 :]]
        else:
            words = [*words[:-1], singular(words[-1])]
    else:
        words = [*words[:-1], singular(words[-1])]
    return " ".join(words[:MAX_CONCEPT_WORDS])


def reads_as_command(verb: str, bare_object: bool) -> bool:
    """Whether ``verb``, the first word of a clause, is a command rather than the first noun of a
    compound. With a determiner, pronoun or number after it ("spring the trap", "bake 40 min") it
    is; before a bare noun ("MIX FLOUR" vs "SPRING TIMETABLE") only a word with no noun reading,
    a :data:`COMMON_VERBS` form or an :data:`INSTRUCTION_VERBS` verb is."""
    if not bare_object or "NOUN" not in lemmas(verb):
        return True
    return verb in COMMON_VERBS or verb_lemma(verb) in INSTRUCTION_VERBS


def _acts(words: list[str], i: int) -> bool:
    """Whether ``words[i]``, a word with a verb reading, is the verb of an action phrase rather
    than a noun: it is an -ing form, has no noun reading ("ran", "chatted"), takes an object
    ("map the route"), or is a common action verb ("run", "walks"). A bare noun that can be
    verbed ("spring", "posts", "map") stays a noun: turned into a gerund it names nothing seen."""
    word = words[i]
    return (
        (word.endswith("ing") and verb_lemma(word) != word)  # "running", not "spring"
        or "NOUN" not in lemmas(word)
        or i + 1 < len(words)
        or word in COMMON_VERBS
    )
