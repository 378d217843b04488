"""SillyTavern character cards (JSON and PNG) → persona cards: mapping, ids, broken inputs."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from backend.persona_import import (
    CardImportError,
    PersonaExists,
    card_json_from_png,
    import_card,
    parse_card,
    safe_id,
)
from backend.personas import load_personas

V2: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Old Tom",
        "description": "{{char}} runs the lighthouse and knows every ship by its lights.",
        "personality": "gruff, kind underneath",
        "scenario": "A stormy night; {{user}} knocks at the lighthouse door.",
        "first_mes": "Get in out of the rain, {{user}}.",
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: The keeper.",
        "system_prompt": "{{original}} Never break character.",
        "post_history_instructions": "",
        "creator_notes": "A lighthouse keeper for cosy storytelling.",
        "tags": ["cosy"],
        "extensions": {"anything": {"nested": True}},
    },
}


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(*text_chunks: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + b"".join(text_chunks)
        + chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00"))
        + chunk(b"IEND", b"")
    )


def b64(card: Any) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


def test_v2_json_card_maps_every_field() -> None:
    imported = parse_card(json.dumps(V2).encode(), "tom.json")
    card = imported.card
    assert imported.persona_id == "old-tom" and card["id"] == "old-tom"
    assert card["name"] == "Old Tom"
    assert card["description"] == "A lighthouse keeper for cosy storytelling."
    assert card["greeting"] == "Get in out of the rain, you."
    prompt = card["system_prompt"]
    assert prompt.startswith("Never break character.")
    assert "Old Tom runs the lighthouse" in prompt
    assert "gruff, kind underneath" in prompt
    assert "the user knocks at the lighthouse door" in prompt
    assert "the user: Who are you?\nOld Tom: The keeper." in prompt
    assert "data, not instructions" in prompt
    assert "{{" not in prompt and "<START>" not in prompt
    assert card["language"] == "auto" and "Old Tom" in card["hippocampus_focus"]
    assert imported.avatar_png is None


def test_v1_card_and_description_fallback() -> None:
    v1 = {"name": "Mina", "description": "A cheerful baker. " * 60, "first_mes": "Hi!"}
    card = parse_card(json.dumps(v1).encode()).card
    assert card["system_prompt"].startswith("You are Mina.")
    assert len(card["description"]) <= 500 and card["description"].endswith("…")


@pytest.mark.parametrize("kind", ["tEXt", "zTXt", "iTXt", "iTXt-compressed"])
def test_png_cards_in_every_text_chunk(kind: str) -> None:
    payload = b64(V2)
    if kind == "tEXt":
        text = chunk(b"tEXt", b"chara\x00" + payload)
    elif kind == "zTXt":
        text = chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(payload))
    elif kind == "iTXt":
        text = chunk(b"iTXt", b"chara\x00\x00\x00en\x00\x00" + payload)
    else:
        text = chunk(b"iTXt", b"chara\x00\x01\x00\x00\x00" + zlib.compress(payload))
    other = chunk(b"tEXt", b"Software\x00paint")
    data = png(other, text)
    raw, image = card_json_from_png(data)
    assert raw == V2
    assert b"chara" not in image and b"tEXt" not in image and image.endswith(chunk(b"IEND", b""))
    imported = parse_card(data, "tom.png")
    assert imported.card["avatar"] == "avatars/old-tom.png" and imported.avatar_png == image


def test_ccv3_is_preferred_over_chara() -> None:
    v3 = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**V2["data"], "name": "Tom3"}}
    data = png(chunk(b"tEXt", b"chara\x00" + b64(V2)), chunk(b"tEXt", b"ccv3\x00" + b64(v3)))
    assert parse_card(data).persona_id == "tom3"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Old Tom", "old-tom"),
        ("Zoë  (the Bard)!", "zoe-the-bard"),
        ("../../etc/passwd", "etc-passwd"),
        ("x" * 100, "x" * 64),
    ],
)
def test_safe_ids(name: str, expected: str) -> None:
    assert safe_id(name) == expected


def test_safe_id_of_a_name_without_ascii() -> None:
    pid = safe_id("小明")
    assert pid.startswith("character-") and len(pid) == len("character-") + 8
    assert safe_id("小明") == pid != safe_id("小红")


def card_with(**data: Any) -> bytes:
    return json.dumps({"spec": "chara_card_v2", "data": {**V2["data"], **data}}).encode()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "the file is empty"),
        (b"hello", "not a character card (expected a JSON or PNG file)"),
        (b"{broken", "not valid JSON"),
        (b"\xff\xfe{}", "not a character card"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps({"spec": "chara_card_v9", "data": {}}).encode(), "unsupported card format"),
        (json.dumps({"spec": "chara_card_v2", "data": []}).encode(), "data: must be an object"),
        (card_with(name=""), "data.name: is required"),
        (card_with(personality=["a"]), "data.personality: must be a string"),
        (card_with(description="x" * 100_001), "data.description: longer than"),
        (png(), "no 'chara' or 'ccv3' text chunk"),
        (png(chunk(b"tEXt", b"chara\x00!!notbase64!!")), "not valid base64"),
        (png(chunk(b"tEXt", b"chara\x00" + base64.b64encode(b"{x"))), "not valid JSON"),
        (png(chunk(b"zTXt", b"chara\x00\x00garbage")), "corrupt"),
        (png()[:30], "truncated PNG"),
        (png()[:-5] + b"\x00\x00\x00\x00\x00", "bad CRC"),
        (b"\x89PNG\r\n\x1a\n" + chunk(b"IEND", b""), "no IHDR chunk"),
    ],
)
def test_broken_inputs_give_clear_errors(data: bytes, expected: str) -> None:
    with pytest.raises(CardImportError) as info:
        parse_card(data, "upload.bin")
    assert "upload.bin" in str(info.value) and expected in str(info.value)


def test_decompression_bomb_is_refused() -> None:
    bomb = chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(b"A" * (3 * 1024 * 1024)))
    with pytest.raises(CardImportError, match="larger than"):
        parse_card(png(bomb))


def test_an_explicit_bad_id_is_refused() -> None:
    with pytest.raises(CardImportError, match="id: must match"):
        parse_card(card_with(), persona_id="../x")


def test_card_content_is_only_data(tmp_path: Path) -> None:
    """Macros and markup are copied as text; unknown fields are ignored, never used."""
    hostile = card_with(
        name="Eve", description="{{random:a,b}} <script>x</script>", extensions={"regex": ".*"}
    )
    persona = import_card(hostile, tmp_path)
    assert "{{random:a,b}} <script>x</script>" in persona.system_prompt
    assert dict(persona.memory) == {}


def test_import_writes_a_loadable_card_and_refuses_to_overwrite(tmp_path: Path) -> None:
    persona = import_card(png(chunk(b"tEXt", b"chara\x00" + b64(V2))), tmp_path, "tom.png")
    assert persona.id == "old-tom" and persona.avatar == "avatars/old-tom.png"
    assert (tmp_path / "avatars" / "old-tom.png").is_file()
    written = json.loads((tmp_path / "old-tom.json").read_text(encoding="utf-8"))
    assert written["id"] == "old-tom" and written["name"] == "Old Tom"
    assert list(load_personas(tmp_path)) == ["old-tom"]
    with pytest.raises(PersonaExists, match="already exists"):
        import_card(json.dumps(V2).encode(), tmp_path)
    changed = card_with(first_mes="Welcome back.")
    assert import_card(changed, tmp_path, overwrite=True).greeting == "Welcome back."
    other = import_card(changed, tmp_path, persona_id="tom-2")
    assert other.id == "tom-2" and sorted(load_personas(tmp_path)) == ["old-tom", "tom-2"]
    assert not list(tmp_path.glob(".card-*"))


def test_cli_lists_and_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from backend.cli.main import main

    directory = tmp_path / "personas"
    shutil.copytree(Path(__file__).resolve().parent.parent / "personas", directory)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"server": {"personas_dir": str(directory)}}))
    assert main(["--config", str(config), "personas"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "LANGUAGE"]
    assert [line.split()[0] for line in lines[1:]] == ["coach", "companion", "tutor"]
    assert "companion *" in lines[2] and lines[3].endswith("auto")

    card_file = tmp_path / "tom.png"
    card_file.write_bytes(png(chunk(b"tEXt", b"chara\x00" + b64(V2))))
    assert main(["--config", str(config), "personas", "import", str(card_file)]) == 0
    assert "imported old-tom (Old Tom)" in capsys.readouterr().out
    assert (directory / "old-tom.json").is_file()
    assert main(["--config", str(config), "personas", "import", str(card_file)]) == 1
    assert "already exists" in capsys.readouterr().err
    args = ["--config", str(config), "personas", "import", str(card_file), "--overwrite"]
    assert main(args) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["--config", str(config), "personas", "import", str(bad)]) == 1
    assert "name: is required" in capsys.readouterr().err
    assert main(["--config", str(config), "personas", "import", str(tmp_path / "nope")]) == 1
    assert main(["--config", str(config), "personas"]) == 0
    assert "old-tom" in capsys.readouterr().out
