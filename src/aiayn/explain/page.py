"""The explain page as one self-contained HTML file: its style, words, script and data inlined, so it
opens from the file system, offline. The server's page shows the same view as a tab, from the same
files (`STATIC`)."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from aiayn.files import write_atomically

STATIC = resources.files("aiayn.explain") / "static"
# The claims the panels link to, where aiayn runs from a checkout (its docs/ beside src/).
CLAIMS = Path(__file__).resolve().parents[3] / "docs" / "experiments" / "experiments.md"
SCRIPTS = ("words.js", "explain.js")  # in this order: explain.js reads the words
LANGUAGES = ("en", "zh")

PAGE = """<!doctype html>
<html lang="{html_lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 0 auto; max-width: 64rem; padding: 1rem 1.5rem; }}
{style}
</style>
</head>
<body>
<main id="explain" class="explain"></main>
<script type="application/json" id="explain-data">{data}</script>
{scripts}
<script>
AiaynExplain.render(document.getElementById("explain"),
                    JSON.parse(document.getElementById("explain-data").textContent), {lang});
</script>
</body>
</html>
"""


def page(data: dict[str, Any], lang: str = "en") -> str:
    """The page's HTML for `data` (`explain`), its words first in `lang` (en or zh)."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang={lang!r}: the page speaks {' and '.join(LANGUAGES)}")
    scripts = "\n".join(f"<script>\n{_static(name)}\n</script>" for name in SCRIPTS)
    return PAGE.format(html_lang="zh-CN" if lang == "zh" else "en", title=html.escape(data["sentence"]),
                       style=_static("explain.css"), data=_script_safe(json.dumps(data, ensure_ascii=False)),
                       scripts=scripts, lang=json.dumps(lang))


def write_page(data: dict[str, Any], out: str | Path, lang: str = "en") -> Path:
    """Write the page for `data` to OUT/index.html (directories made as needed); -> its path. Its panels
    link to the experiments that test the paper's claims when this checkout has them."""
    if CLAIMS.exists():
        data = {**data, "claims_url": CLAIMS.as_uri()}
    path = Path(out) / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, page(data, lang).encode("utf-8"))
    return path


def _static(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """JSON inside a <script> element: no "</" may close it early."""
    return text.replace("</", "<\\/")
