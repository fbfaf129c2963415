"""Importing a whole SillyTavern user folder, against importing its files one by one.

Run from the repository root::

    .venv/bin/python bench/import_sillytavern.py            # 50 characters x 4 chats x 300 messages
    .venv/bin/python bench/import_sillytavern.py --quick    # 10 x 2 x 100

The folder is generated from a seed, laid out as SillyTavern keeps a user
(``characters/``, ``chats/<character>/``, ``worlds/``, ``settings.json``): each
character a JSON card linking one World Info book of 20 entries (``extensions.world``)
with a greeting and an alternate one, each chat a 1.15 header then user and character
messages alternating (200-700 and 400-1,500 characters), every fifth reply with three
swipes.

- **ours** -- ``clotho.stfolder.plan_folder`` then ``write_plan`` into a fresh SQLite
  file: a session per chat with its card, its book and the persona; then the same
  again (``second_s``: every session already there, nothing written).
- **peer** -- the same files the way the file-by-file commands bring them in, in this
  process (no command start-up counted): for each chat, ``import_chat`` then
  ``import_card`` of its character's card then ``import_lorebook`` of the book the card
  links, into a second fresh SQLite file.

Both must end with the same sessions (titles and node counts), asserted. Wall times,
one run each, on whatever else the machine is doing: compare the two of one run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clotho.formats.stchat import import_chat
from clotho.lore import import_card, import_lorebook
from clotho.stfolder import plan_folder, write_plan
from mnemosyne import Store

WORDS = [
    "the",
    "gate",
    "wall",
    "ale",
    "road",
    "north",
    "inn",
    "rain",
    "fire",
    "sword",
    "lantern",
    "map",
    "tower",
    "night",
]


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def make_folder(root: Path, characters: int, chats: int, messages: int, seed: int) -> int:
    """The folder; returns its size in bytes."""
    rng = random.Random(seed)
    for folder in ("characters", "chats", "worlds", "groups", "group chats"):
        (root / folder).mkdir(parents=True)
    settings = {"username": "User", "power_user": {"personas": {"a.png": "Alex"}}}
    settings["power_user"]["default_persona"] = "a.png"
    (root / "settings.json").write_text(json.dumps(settings))
    for c in range(characters):
        name = f"Char{c:03d}"
        book = {
            "entries": {
                str(i): {"uid": i, "key": [f"{name.lower()}{i}"], "content": _text(rng, 100, 400)}
                for i in range(20)
            }
        }
        (root / "worlds" / f"{name} lore.json").write_text(json.dumps(book))
        data = {
            "name": name,
            "first_mes": _text(rng, 200, 600),
            "alternate_greetings": [_text(rng, 200, 600)],
            "extensions": {"world": f"{name} lore"},
        }
        card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}
        (root / "characters" / f"{name}.json").write_text(json.dumps(card))
        (root / "chats" / name).mkdir()
        for k in range(chats):
            header = {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
            lines = [header]
            for i in range(messages):
                if i % 2:
                    lines.append({"name": "Alex", "is_user": True, "mes": _text(rng, 200, 700)})
                    continue
                reply = {"name": name, "is_user": False, "mes": _text(rng, 400, 1500)}
                if i % 10 == 4:
                    swipes = [reply["mes"], _text(rng, 400, 1500), _text(rng, 400, 1500)]
                    reply |= {"swipes": swipes, "swipe_id": 0, "swipe_info": []}
                lines.append(reply)
            chat = root / "chats" / name / f"{name} - 2026-01-{k + 1:02d}@10h00m00s.jsonl"
            chat.write_text("\n".join(json.dumps(line) for line in lines))
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def ours(folder: Path, url: str) -> tuple[float, float, list[tuple[str, int]]]:
    store = Store.open(url)
    start = time.perf_counter()
    plan = plan_folder(folder, store)
    write_plan(store, plan)
    first = time.perf_counter() - start
    assert {p.status for p in plan.sessions} == {"imported"}, plan.as_dict()
    start = time.perf_counter()
    again = plan_folder(folder, store)
    write_plan(store, again)
    second = time.perf_counter() - start
    assert {p.status for p in again.sessions} == {"already there"}
    sessions = _sessions(store)
    store.close()
    return first, second, sessions


def peer(folder: Path, url: str) -> tuple[float, list[tuple[str, int]]]:
    store = Store.open(url)
    start = time.perf_counter()
    for chat_folder in sorted((folder / "chats").iterdir()):
        card = (folder / "characters" / f"{chat_folder.name}.json").read_bytes()
        book = (folder / "worlds" / f"{chat_folder.name} lore.json").read_bytes()
        for chat in sorted(chat_folder.iterdir()):
            session = import_chat(store, chat.read_bytes(), chat.name, title=chat.stem)
            import_card(store, session.id, card, f"{chat_folder.name}.json")
            import_lorebook(store, session.id, book, f"{chat_folder.name} lore")
    took = time.perf_counter() - start
    sessions = _sessions(store)
    store.close()
    return took, sessions


def _sessions(store: Store) -> list[tuple[str, int]]:
    counts = store.node_counts()
    return sorted((s.title or "", counts.get(s.id, 0)) for s in store.sessions())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    characters, chats, messages = (10, 2, 100) if args.quick else (50, 4, 300)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "default-user"
        size = make_folder(folder, characters, chats, messages, args.seed)
        first, second, mine = ours(folder, f"sqlite:///{root / 'ours.db'}")
        theirs_s, theirs = peer(folder, f"sqlite:///{root / 'peer.db'}")
        assert mine == theirs, "the two imports ended with different sessions"
        nodes = sum(count for _, count in mine)
        print(
            f"folder: {characters} characters x {chats} chats x {messages} messages, "
            f"{size / 1e6:.1f} MB, {len(mine)} sessions, {nodes:,} nodes"
        )
        print(f"ours  import sillytavern: {first:.2f} s; second run (all there): {second:.2f} s")
        print(f"peer  import chat + card + lorebook, file by file: {theirs_s:.2f} s")
        print(f"ratio peer/ours: {theirs_s / first:.2f}")


if __name__ == "__main__":
    main()
