"""The people and pets of the user's life, read from the memories that name them.

A memory about the user's sister says so in its own words ("The user's older sister
Xiaoyu is getting married in October in Chengdu."), and one about the hamster names it
("Tudou, the user's hamster, is a little golden hamster, two years old."). This module
reads those words back into a table of entities, so that the memories page can show each
one with its facts and recall can reach a fact through its entity ("how is my sister
doing?" finds "Xiaoyu's wedding moved to December", which never says "sister").

A **mention** is one of these shapes in a memory's text (English and Chinese):

- "the user's [words] RELATION [Name]": "The user's pug Pixel", "The user's older sister
  Xiaoyu", "The user's friend Chen Jing", "The user's physio" (no name);
- "her/his/their [words] RELATION Name", in a memory about the user: "her sister Xiaoyu's
  wedding" (a relation of someone else's, "her fiancé's grandma", names no one of ours);
- "Name, the user's [words] RELATION": "Tudou, the user's hamster, …";
- "the user has a [words] RELATION called/named Name": "The user has a hamster called
  Tudou."; "the user's RELATION is called/named Name": "The user's cat is called Dumpling.";
- "用户的RELATION[叫NAME]" and "用户有一只RELATION叫NAME": "用户的柯基叫豆豆".

RELATION is one of ``RELATIONS`` (sister, physio, pug, 奶奶, …); each has a canonical
relation (``CANONICAL``: pug → dog, 妹妹 → sister, mom → mum) so that the words of either
language meet, and a kind (``PETS`` are pets; everyone else a person). A Name is one or
two capitalised words that are not months, days or languages (in Chinese, the characters
after 叫 up to punctuation, at most four).

The **table** (``entity_table``): one entity per name (the relation of its oldest
memory wins; the others are kept as ``described_as``); a mention with no name joins the one named
entity of its canonical relation when there is exactly one ("The user's sister is coming
to watch her race" is Xiaoyu's), else an entity of its own, named by the relation.
Each entity lists the ids of the memories that mention it.

The table is read from the memories each time it is needed (pure; no I/O), so it needs no
migration and follows every edit, deletion, export and import of the memories themselves.
Besides its words, a memory written since the save gate resolves subjects carries whom it
is about (``Memory.about``, ``memory.subjects``): a fact that names someone by name alone
("Tudou runs on his wheel all night") joins that entity too.

**The user's edits** (``EntityEdit``, stored per (user, persona) by the session store) are
laid over the derived table: ``entity_table(memories, edits)``. Each edit names a derived
entity by its ``key`` (a name, casefolded; ``~relation`` for one known only by relation),
which stays its key whatever the user renames it to. An edit may:

- fold other entities into it (``merged``: "Tommy" into "Tom", "~grandma" into "Nainai"):
  their memories become its memories and their names its ``aliases``;
- give it names (``name``: the one shown; ``aliases``: others): a memory that says one of
  them is about it too ("奶奶" as an alias of Nainai reaches "奶奶每年秋天做月饼");
- set its ``relation`` or ``kind``;
- hide it (``deleted``): it leaves the table, so recall no longer reaches anyone through it
  and notes no longer introduce it (the web layer forgets its memories first:
  ``forgotten_with``).

``merge_edits`` and ``edit_entity`` compute the new edits of a merge or an edit; the
caller stores what they return.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from backend.memory.types import Memory

Kind = Literal["person", "pet"]

# Surface word → canonical relation. English and Chinese words for one relation meet here.
CANONICAL: dict[str, str] = {
    **{w: w for w in (
        "sister", "brother", "sibling", "cousin", "aunt", "uncle", "niece", "nephew", "son",
        "daughter", "baby", "husband", "wife", "partner", "boyfriend", "girlfriend", "ex",
        "friend", "flatmate", "neighbour", "boss", "manager", "colleague", "teammate",
        "client", "teacher", "tutor", "coach", "physio", "doctor", "therapist", "dog", "cat",
        "hamster", "rabbit", "parrot", "bird", "fish", "horse", "pet", "grandma", "grandpa",
        "mum", "dad", "fiancé", "kid",
    )},
    "neighbor": "neighbour", "roommate": "flatmate", "housemate": "flatmate",
    "coworker": "colleague", "co-worker": "colleague", "auntie": "aunt",
    "mom": "mum", "mother": "mum", "dad": "dad", "father": "dad",
    "grandmother": "grandma", "nan": "grandma", "nana": "grandma", "granny": "grandma",
    "grandfather": "grandpa", "fiance": "fiancé", "fiancee": "fiancé", "fiancée": "fiancé",
    "child": "kid", "kids": "kid", "children": "kid", "puppy": "dog", "pug": "dog",
    "corgi": "dog", "labrador": "dog", "kitten": "cat", "tabby": "cat", "bunny": "rabbit",
    # Chinese
    "姐姐": "sister", "妹妹": "sister", "哥哥": "brother", "弟弟": "brother",
    "妈妈": "mum", "母亲": "mum", "爸爸": "dad", "父亲": "dad",
    "奶奶": "grandma", "外婆": "grandma", "姥姥": "grandma", "爷爷": "grandpa",
    "外公": "grandpa", "姥爷": "grandpa", "男朋友": "boyfriend", "女朋友": "girlfriend",
    "老公": "husband", "丈夫": "husband", "老婆": "wife", "妻子": "wife", "儿子": "son",
    "女儿": "daughter", "朋友": "friend", "同事": "colleague", "室友": "flatmate",
    "老板": "boss", "领导": "boss", "教练": "coach", "老师": "teacher", "未婚夫": "fiancé",
    "未婚妻": "fiancé", "猫": "cat", "小猫": "cat", "狗": "dog", "小狗": "dog",
    "柯基": "dog", "仓鼠": "hamster", "兔子": "rabbit",
}  # fmt: skip
RELATIONS = frozenset(CANONICAL)
PETS = frozenset(("dog", "cat", "hamster", "rabbit", "parrot", "bird", "fish", "horse", "pet"))

_NOT_NAMES = frozenset(
    (
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December", "Monday", "Tuesday", "Wednesday",
        "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Easter", "English",
        "Chinese", "The", "She", "He", "They", "It", "His", "Her", "Their", "User",
    )
)  # fmt: skip
_LATIN = sorted((w for w in RELATIONS if w.isascii()), key=len, reverse=True)
_CJK_RELATIONS = sorted((w for w in RELATIONS if not w.isascii()), key=len, reverse=True)
_REL = "(?P<rel>" + "|".join(re.escape(w) for w in _LATIN) + ")"
_NAME = r"(?P<name>[A-Z][a-z]+(?:\s[A-Z][a-z]+)?)"
_WORDS = r"(?:[a-z][\w-]*\s){0,2}?"  # "older ", "swim ", "little golden "
_TAIL = r"(?![\w-])"
# Case matters: a name is capitalised, a relation is not ("The user's sister is…").
_POSSESSED = re.compile(
    rf"\b(?P<whose>[Tt]he user's|[Hh]er|[Hh]is|[Tt]heir)\s{_WORDS}{_REL}{_TAIL}(?:,?\s{_NAME})?"
)
_APPOSITION = re.compile(rf"{_NAME},\s(?:the user's|their|her|his)\s{_WORDS}{_REL}{_TAIL}")
_HAS_A = re.compile(rf"\b[Tt]he user has an?\s{_WORDS}{_REL}{_TAIL}\s(?:called|named)\s{_NAME}")
_CALLED = re.compile(
    rf"\b[Tt]he user's\s{_WORDS}{_REL}{_TAIL}\s(?:is|was)\s(?:called|named)\s{_NAME}"
)
_CJK_REL = "(?P<rel>" + "|".join(re.escape(w) for w in _CJK_RELATIONS) + ")"
_CJK_MENTION = re.compile(
    rf"用户(?:的|有(?:一|两|几)?(?:只|个|位|条)?){_CJK_REL}(?:(?:叫|名叫|叫做)(?P<name>[\u3400-\u9fff]{{1,4}}))?"
)
# Words a query names a relation with: "my sister", "我妹妹", "my dog" (bare: "the dog").
_QUERY_WORDS = re.compile(
    r"[a-zé'-]+|" + "|".join(re.escape(w) for w in _CJK_RELATIONS), re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity named in one memory's text."""

    relation: str  # canonical ("sister", "dog")
    said: str  # the word the memory used ("older sister" → "sister"; "pug")
    name: str | None


@dataclass(slots=True)
class Entity:
    """Someone (or a pet) of the user's life, with the memories that name them."""

    name: str | None  # None: known only by relation ("the user's physio")
    relation: str  # canonical relation to the user
    kind: Kind
    described_as: list[str] = field(default_factory=list)  # words used, first first
    memory_ids: list[str] = field(default_factory=list)
    # Its key in the derived table (``entity_key``); edits name it by this, renamed or not.
    key: str = ""
    aliases: list[str] = field(default_factory=list)  # other names: merged ones, the user's

    def __post_init__(self) -> None:
        if not self.key:
            self.key = entity_key(self.name, self.relation)

    @property
    def names(self) -> list[str]:
        """Every name it goes by: the one shown first, then its aliases."""
        return [*([self.name] if self.name else []), *self.aliases]

    @property
    def label(self) -> str:
        """How the memories page names it: "Pixel (dog: pug)", "physio"."""
        said = [w for w in self.described_as if w != self.relation]
        detail = f"{self.relation}: {', '.join(said)}" if said else self.relation
        return f"{self.name} ({detail})" if self.name else detail

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "relation": self.relation,
            "kind": self.kind,
            "described_as": list(self.described_as),
            "memory_ids": list(self.memory_ids),
            "key": self.key,
            "aliases": list(self.aliases),
        }


def entity_key(name: str | None, relation: str) -> str:
    """The key of a derived entity: its name casefolded, or ``~relation`` without one."""
    return name.casefold() if name else f"~{relation}"


MAX_NAME = 60  # characters of a name or alias the user gives


@dataclass(frozen=True, slots=True)
class EntityEdit:
    """The user's edit of one entity of the derived table (module docstring)."""

    key: str  # the entity it edits (``entity_key``)
    name: str | None = None  # the name shown instead of the derived one
    relation: str | None = None  # canonical, or any word the user chose
    kind: Kind | None = None
    aliases: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()  # keys of the entities folded into it
    deleted: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "name": self.name,
            "relation": self.relation,
            "kind": self.kind,
            "aliases": list(self.aliases),
            "merged": list(self.merged),
            "deleted": self.deleted,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> EntityEdit:
        kind = data.get("kind")
        return cls(
            key=str(data["key"]),
            name=_opt_str(data.get("name")),
            relation=_opt_str(data.get("relation")),
            kind="pet" if kind == "pet" else "person" if kind == "person" else None,
            aliases=tuple(str(a) for a in _list(data.get("aliases"))),
            merged=tuple(str(k) for k in _list(data.get("merged"))),
            deleted=bool(data.get("deleted", False)),
        )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def _name(raw: str | None) -> str | None:
    if not raw:
        return None
    words = raw.split()
    while words and words[-1] in _NOT_NAMES:
        words.pop()
    if not words or words[0] in _NOT_NAMES:
        return None
    return " ".join(words)


def mentions(content: str) -> list[Mention]:
    """The entities ``content`` names, in order of their first word (module docstring)."""
    content = content.replace("’", "'")
    found: list[tuple[int, Mention]] = []
    for pattern in (_POSSESSED, _APPOSITION, _HAS_A, _CALLED):
        for match in pattern.finditer(content):
            said = match.group("rel").lower()
            name = _name(match.groupdict().get("name"))
            whose = (match.groupdict().get("whose") or "the user's").lower()
            if name is None and whose != "the user's":
                continue  # "her fiancé's grandma": someone else's relation, no one of ours
            # "The user's sister Xiaoyu's wedding": the name is the sister's all the same.
            found.append((match.start(), Mention(CANONICAL[said], said, name)))
    for match in _CJK_MENTION.finditer(content):
        said = match.group("rel")
        found.append((match.start(), Mention(CANONICAL[said], said, match.group("name"))))
    found.sort(key=lambda item: item[0])
    # "Tudou, the user's hamster": the relation said beside the name is the named one.
    named = {m.relation for _, m in found if m.name}
    out: list[Mention] = []
    for _, mention in found:
        if mention not in out and (mention.name or mention.relation not in named):
            out.append(mention)
    return out


def memory_mentions(memory: Memory) -> list[Mention]:
    """Whom ``memory`` names: its words' mentions, then those recorded when it was written
    (``Memory.about``: "Tudou is a little golden guy" names the hamster by name alone)."""
    found = mentions(memory.content)
    keys = {(m.name or f"~{m.relation}").casefold() for m in found}
    named = {m.relation for m in found if m.name}
    for recorded in memory.about:
        key = (recorded.name or f"~{recorded.relation}").casefold()
        if key in keys or (recorded.name is None and recorded.relation in named):
            continue
        keys.add(key)
        found.append(Mention(CANONICAL.get(recorded.relation, recorded.relation),
                             recorded.relation, recorded.name))  # fmt: skip
    return found


def entity_table(memories: Iterable[Memory], edits: Sequence[EntityEdit] = ()) -> list[Entity]:
    """The people and pets the memories name, most mentioned first, with the user's
    ``edits`` laid over them (module docstring)."""
    memories = sorted(memories, key=lambda m: (m.created_at, m.id))
    by_key = {edit.key: edit for edit in edits}
    owner = _owners(edits)
    named: dict[str, Entity] = {}
    unnamed: list[tuple[str, Mention]] = []
    # Oldest first, whatever order they come in: the first words said of someone lead.
    for memory in memories:
        for mention in memory_mentions(memory):
            if mention.name is None:
                unnamed.append((memory.id, mention))
                continue
            key = entity_key(mention.name, mention.relation)
            entity = named.setdefault(
                key, Entity(mention.name, mention.relation, _kind(mention.relation))
            )
            _add(entity, memory.id, mention.said)
    table: dict[str, Entity] = {}
    for key, entity in named.items():  # merged entities fold into the one they joined
        _fold(table, owner.get(key, key), entity)
    for key, entity in table.items():
        if key in by_key:
            _apply(entity, by_key[key])
    by_relation: dict[str, list[Entity]] = {}
    for entity in table.values():
        if entity.name:
            by_relation.setdefault(entity.relation, []).append(entity)
    for memory_id, mention in unnamed:
        key = entity_key(None, mention.relation)
        target = owner.get(key, key)
        owners = by_relation.get(mention.relation, [])
        if target == key and key not in by_key and len(owners) == 1:
            _add(owners[0], memory_id, mention.said)  # "the user's sister" is Xiaoyu
            continue
        if target not in table:
            table[target] = Entity(None, mention.relation, _kind(mention.relation), key=target)
            if target in by_key:
                _apply(table[target], by_key[target])
        _add(table[target], memory_id, mention.said)
    for key, entity in table.items():  # the names the user gave reach the memories saying them
        edit = by_key.get(key)
        given = [] if edit is None else [*edit.aliases, *([edit.name] if edit.name else [])]
        for memory in memories:
            if memory.id not in entity.memory_ids and any(
                _name_in(memory.content, name) for name in given
            ):
                entity.memory_ids.append(memory.id)
    shown = [
        e for k, e in table.items() if not (k in by_key and by_key[k].deleted) and e.memory_ids
    ]
    shown.sort(key=lambda e: (-len(e.memory_ids), e.name is None, e.name or e.relation))
    return shown


def _owners(edits: Sequence[EntityEdit]) -> dict[str, str]:
    """Each merged key → the key of the entity it was folded into (chains followed)."""
    parent = {key: edit.key for edit in edits for key in edit.merged if key != edit.key}
    owner: dict[str, str] = {}
    for key in parent:
        seen = {key}
        target = parent[key]
        while target in parent and target not in seen:  # a cycle stops where it closes
            seen.add(target)
            target = parent[target]
        owner[key] = target
    return owner


def _fold(table: dict[str, Entity], key: str, entity: Entity) -> None:
    into = table.get(key)
    if into is None:
        entity.key = key
        table[key] = entity
        return
    for memory_id in entity.memory_ids:
        if memory_id not in into.memory_ids:
            into.memory_ids.append(memory_id)
    for said in entity.described_as:
        if said not in into.described_as:
            into.described_as.append(said)
    if entity.name:
        into.aliases.append(entity.name)
    if into.name is None:  # a name joins one known only by relation ("~grandma")
        into.name = entity.name


def _apply(entity: Entity, edit: EntityEdit) -> None:
    names = [*([entity.name] if entity.name else []), *entity.aliases, *edit.aliases]
    if edit.name:
        entity.name = edit.name
    if edit.relation:
        entity.relation = CANONICAL.get(edit.relation.lower(), edit.relation)
        entity.kind = _kind(entity.relation)
    if edit.kind:
        entity.kind = edit.kind
    shown = (entity.name or "").casefold()
    aliases: list[str] = []
    for name in names:
        if name.casefold() != shown and name.casefold() not in {a.casefold() for a in aliases}:
            aliases.append(name)
    entity.aliases = aliases


def find_entity(table: Sequence[Entity], key: str) -> Entity | None:
    """The entity of ``key``, or the one that goes by ``key`` as a name (casefolded)."""
    wanted = key.casefold()
    for entity in table:
        if entity.key == key:
            return entity
    for entity in table:
        if wanted in {name.casefold() for name in entity.names}:
            return entity
    return None


def merge_edits(
    edits: Sequence[EntityEdit], table: Sequence[Entity], into: str, others: Sequence[str]
) -> list[EntityEdit]:
    """The edits once the entities ``others`` are folded into ``into`` (keys of ``table``):
    their names become its aliases, and their own edits are folded into its edit."""
    by_key = {edit.key: edit for edit in edits}
    target = by_key.get(into, EntityEdit(into))
    merged = list(target.merged)
    aliases = list(target.aliases)
    for key in others:
        if key == into:
            continue
        gone = by_key.pop(key, EntityEdit(key))
        merged += [k for k in (key, *gone.merged) if k not in merged and k != into]
        entity = find_entity(table, key)
        for name in [*gone.aliases, *([gone.name] if gone.name else [])] + (
            entity.names if entity else []
        ):
            if name.casefold() not in {a.casefold() for a in aliases}:
                aliases.append(name)
    by_key[into] = EntityEdit(
        into, target.name, target.relation, target.kind, tuple(aliases), tuple(merged),
        target.deleted,
    )  # fmt: skip
    return list(by_key.values())


def edit_entity(edits: Sequence[EntityEdit], key: str, **changes: object) -> list[EntityEdit]:
    """The edits with ``changes`` (``name``, ``relation``, ``kind``, ``aliases``,
    ``deleted``) made to the edit of ``key``."""
    by_key = {edit.key: edit for edit in edits}
    data = by_key.get(key, EntityEdit(key)).to_dict()
    data.update(changes)
    by_key[key] = EntityEdit.from_dict(data)
    return list(by_key.values())


def forgotten_with(entity: Entity, table: Sequence[Entity]) -> list[str]:
    """The ids of the memories about ``entity`` alone: those no other entity claims."""
    others = {i for e in table if e.key != entity.key for i in e.memory_ids}
    return [i for i in entity.memory_ids if i not in others]


def _kind(relation: str) -> Kind:
    return "pet" if relation in PETS else "person"


def _add(entity: Entity, memory_id: str, said: str) -> None:
    if memory_id not in entity.memory_ids:
        entity.memory_ids.append(memory_id)
    if said not in entity.described_as:
        entity.described_as.append(said)


def asked_relations(query: str) -> set[str]:
    """The canonical relations a message names ("how is my sister doing?" → sister;
    "我妹妹最近怎么样" → sister; "what's my dog called?" → dog)."""
    words = [w.lower() for w in _QUERY_WORDS.findall(query)]
    asked = {CANONICAL[w] for w in words if w in CANONICAL}
    return asked | PETS if "pet" in asked else asked  # "my pet" is the dog, the cat…


def surface_words(relations: Iterable[str]) -> list[str]:
    """Every word, in either language, that names one of ``relations``."""
    wanted = set(relations)
    return sorted(word for word, canonical in CANONICAL.items() if canonical in wanted)


def names_for(relations: Iterable[str], table: Sequence[Entity]) -> list[str]:
    """The names of the entities of ``relations``, aliases too ("sister" → ["Xiaoyu"];
    "grandma" → ["Nainai", "奶奶"])."""
    wanted = set(relations)
    return [name for e in table if e.relation in wanted for name in e.names]


def about(memory: Memory, table: Sequence[Entity]) -> list[Entity]:
    """The entities a memory names (none: it is about the user alone)."""
    return [e for e in table if memory.id in e.memory_ids]


def introduce(content: str, table: Sequence[Entity]) -> str:
    """``content`` with each entity it names by name alone introduced by its relation, so
    that the note reads on its own: "Xiaoyu moved the wedding to December." → "The user's
    sister Xiaoyu moved the wedding to December."; "小雨下个月结婚" → "用户的妹妹小雨下个月结婚".
    A note that already says the relation (any word of it, in either language) is left as
    it is, and so is every name after the first of each entity."""
    for entity in table:
        if not entity.name:
            continue
        # The words of its relation (as the user may have changed it: "friend" → "grandma").
        own = [w for w in entity.described_as if CANONICAL.get(w) == entity.relation]
        words = [*surface_words({entity.relation}), *own, entity.relation]
        if any(_says(content, word) for word in words):
            continue
        found = [m for m in (_name_in(content, name) for name in entity.names) if m]
        if not found:
            continue
        match = min(found, key=lambda m: m.start())
        said = own[0] if own else entity.relation
        if said.isascii():
            lead = "the user's" if match.start() else "The user's"
            intro = f"{lead} {said} "
        else:
            intro = f"用户的{said}"
        content = content[: match.start()] + intro + content[match.start() :]
    return content


def _says(content: str, word: str) -> bool:
    if word.isascii():
        return (
            re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", content, re.IGNORECASE) is not None
        )
    return word in content


def _name_in(content: str, name: str) -> re.Match[str] | None:
    if name.isascii():
        return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", content)
    return re.search(re.escape(name), content)
