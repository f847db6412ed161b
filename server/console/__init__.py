"""The web console at `/ui/`: what came in, what ran, what failed, and a rule tester.

Server-rendered Jinja2 templates (Litestar's template engine, autoescaping on) with a little
progressive JavaScript (htmx, shipped in `static/`; no CDN, no build step): every page is readable
without JavaScript. The console reads and writes through the same store interface as the admin
API and adds no state of its own. It is on only when a gateway token is configured, like the admin
API. Module map: `auth` (sessions, CSRF), `headers` (CSP and friends), `pages` (the handlers),
`views` (what records look like on a page).
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.template import TemplateConfig

from .views import FILTERS

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """The console's templates: autoescaped HTML, undefined names an error, its filters."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return TemplateConfig(engine=JinjaTemplateEngine.from_environment(env))
