"""Take the README's screenshots of the UI: docs/screenshot-{chat,memories,personas}.png.

    .venv/bin/python -m tests.ui.screenshots [--out docs] [--dark]

Runs the app on a loopback port with scripted models (tests/web/harness.py), seeds a few
memories, has a short conversation through the real page (so the memory panel shows a
real turn report) and photographs the chat and memories pages in headless Chromium
(Debian's /usr/bin/chromium). Needs the vendor files (frontend/install-vendor.sh).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from backend.memory.types import Namespace
from backend.personas import load_personas
from backend.web.ui import vendor_problem
from tests.llm.scripted_server import Reply
from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS, hippocampus_reply, with_two_personas
from tests.web.harness import REPO, AppHarness

NS = Namespace("local", "companion")

# (content, category, importance, days ago, times recalled, pinned)
SEEDS = [
    ("The user's sister is called Anna.", "relationship", 0.85, 40, 6, True),
    (
        "The user loves cooking Italian food, especially fresh pasta.",
        "preference",
        0.6,
        25,
        3,
        False,
    ),
    ("The user works night shifts as a nurse at the city hospital.", "work", 0.8, 60, 8, False),
    ("The user has a job interview on Friday and feels nervous.", "experience", 0.75, 2, 1, False),
    ("The user walks their dog Pepper every morning.", "personal_fact", 0.55, 12, 2, False),
    ("The user finds rainy evenings calming.", "emotion", 0.45, 5, 0, False),
    ("The user is learning to play the cello.", "interest", 0.5, 30, 1, False),
    ("The user's favourite season is autumn.", "preference", 0.35, 70, 0, False),
    ("The user grew up by the sea in Brittany.", "personal_fact", 0.65, 120, 2, False),
    ("The user is allergic to peanuts.", "health", 0.9, 150, 4, True),
    ("The user's best friend Tom is getting married in June.", "relationship", 0.7, 45, 1, False),
    ("The user wants to run a half marathon this year.", "interest", 0.55, 20, 0, False),
    ("The user drinks green tea in the afternoon.", "preference", 0.3, 50, 1, False),
]


def seed(h: AppHarness) -> None:
    long_term = h.services.long_term
    now = h.services.clock.now()
    for content, category, importance, days, used, pinned in SEEDS:
        memory = long_term.new_memory(
            content, category=category, importance=importance, pinned=pinned
        )
        memory = replace(
            memory,
            created_at=now - timedelta(days=days),
            last_accessed=now - timedelta(days=max(0, days - 3 * used)),
            access_count=used,
        )
        long_term.create(NS, memory)
    # A fact that changed: Lyon, then Paris (a version chain).
    old = long_term.new_memory("The user lives in Lyon.", category="personal_fact", importance=0.95)
    new = long_term.new_memory(
        "The user lives in Paris.", category="personal_fact", importance=0.95
    )
    old = replace(old, created_at=now - timedelta(days=90), superseded_by=new.id)
    new = replace(new, created_at=now - timedelta(days=8), supersedes=old.id)
    long_term.create(NS, old)
    long_term.create(NS, new)
    sessions = h.services.sessions
    for title, persona in (("Interview nerves", "companion"), ("Rainy-day verses", "poet")):
        session = sessions.create_session("local", persona, title)
        sessions.append_message(session.id, "user", title)


def conversation(page: Page, h: AppHarness) -> None:
    page.goto(h.base_url + "/?new=1")
    page.get_by_role("button", name="Talk to Companion").click()
    page.wait_for_url(re.compile(r"\?session="))
    turns = [
        (
            "My sister Anna just moved to Berlin and I already miss her.",
            [
                "That's a big change. ",
                "Missing her says a lot about ",
                "how close you two are. ",
                "How are you holding up?",
            ],
            hippocampus_reply(
                background="The user's sister Anna has just moved to Berlin; the user misses her.",
                content="The user's sister Anna moved to Berlin.",
                category="relationship",
            ),
        ),
        (
            "We used to cook pasta together every Sunday. Any idea how to stay close?",
            [
                "Sunday pasta sounds like a lovely ritual. A few ideas:\n\n",
                "- **Cook together on a video call**: same recipe, two kitchens.\n",
                "- Send her a *recipe card* in the post.\n",
                "- Plan a visit around a Sunday.\n\n",
                "Which one feels most like you two?",
            ],
            hippocampus_reply(
                background=(
                    "The user's sister Anna has just moved to Berlin. They used to cook pasta "
                    "together every Sunday and the user wants to stay close."
                ),
                short_term=[
                    {"role": "note", "text": "Anna moved to Berlin; the user misses her."},
                ],
                content="The user and Anna cooked pasta together every Sunday.",
                category="experience",
                importance=0.7,
            ),
        ),
    ]
    for number, (text, chunks, hippocampus) in enumerate(turns, start=1):
        h.hippocampus.enqueue(Reply(chunks=[hippocampus]))
        h.chat.enqueue(Reply(chunks=chunks, chunk_delay_s=0.02))
        page.fill("#composer-text", text)
        page.keyboard.press("Enter")
        wait_for_turn_report(page, number)
    page.locator("#memory-panel .activated-item").first.wait_for()


def wait_for_turn_report(page: Page, number: int) -> None:
    """Until the ``number``-th reply is finished and the panel shows its report."""
    finished = page.locator("#messages article.msg.assistant[id^=turn-]:not(.streaming)")
    finished.nth(number - 1).wait_for()
    turn = (finished.nth(number - 1).get_attribute("id") or "").removeprefix("turn-")
    page.locator(f"#memory-panel .panel-head[data-turn='{turn}']").wait_for()


def demo_transcript(demos_md: Path) -> str:
    """The first recorded demo run in docs/demos.md (a ```console block)."""
    match = re.search(r"```console\n(.*?)```", demos_md.read_text(encoding="utf-8"), re.S)
    return match.group(1) if match else "(no demo transcript recorded in docs/demos.md)"


def terminal(page: Page, text: str) -> None:
    """Show ``text`` as a terminal would (escaped: it is model output)."""
    page.set_viewport_size({"width": 1100, "height": 600})
    page.goto("about:blank")  # leave the app's page: its CSP forbids inline styles
    page.set_content(
        "<body style='margin:0;background:#1e1e2e'><pre id=t style='margin:0;padding:20px;"
        "color:#e0e0e0;font:13px/1.45 monospace;white-space:pre-wrap'></pre></body>"
    )
    page.eval_on_selector("#t", "(el, text) => { el.textContent = text; }", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--dark", action="store_true", help="dark colour scheme")
    args = parser.parse_args(argv)
    problem = vendor_problem()
    if problem is not None:
        print(f"screenshots: {problem}", file=sys.stderr)
        return 1
    if not CHROMIUM.exists():
        print(f"screenshots: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "-dark" if args.dark else ""
    with tempfile.TemporaryDirectory() as tmp, AppHarness(Path(tmp)) as h:
        with_two_personas(h, Path(tmp))
        seed(h)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            context = browser.new_context(
                viewport={"width": 1360, "height": 900},
                device_scale_factor=1,
                color_scheme="dark" if args.dark else "light",
            )
            page = context.new_page()
            conversation(page, h)
            page.mouse.move(0, 0)
            chat = args.out / f"screenshot-chat{suffix}.png"
            page.screenshot(path=str(chat))
            page.goto(h.base_url + "/memories?sort=importance")
            paris = page.locator(".memory-card", has_text="lives in Paris")
            paris.get_by_role("button", name="Versions").click()
            paris.locator(".version-chain").wait_for()
            page.evaluate("window.scrollTo(0, 0)")
            memories = args.out / f"screenshot-memories{suffix}.png"
            page.screenshot(path=str(memories))
            for persona in load_personas(REPO / "personas").values():
                h.services.personas.add(persona)  # the shipped tutor and coach too
            page.goto(h.base_url + "/personas")
            personas = args.out / f"screenshot-personas{suffix}.png"
            page.screenshot(path=str(personas))
            demo = args.out / f"screenshot-demo{suffix}.png"
            terminal(page, demo_transcript(REPO / "docs" / "demos.md"))
            page.screenshot(path=str(demo), full_page=True)
            browser.close()
    print(f"wrote {chat}, {memories}, {personas} and {demo}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
