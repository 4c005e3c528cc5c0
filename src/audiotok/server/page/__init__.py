"""The demo page (plain HTML/JS/CSS, package data; no CDN, works offline): GET / and /page/*."""

from __future__ import annotations

from importlib import resources

FILES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
         "style.css": "text/css; charset=utf-8"}


def mount_page(app, state) -> None:
    from fastapi.responses import Response

    folder = resources.files(__name__)
    # read once; only these names are served (no path from the client reaches the disk)
    pages = {name: (folder.joinpath(name).read_bytes(), media) for name, media in FILES.items()}

    @app.get("/", include_in_schema=False)
    async def index():
        body, media = pages["index.html"]
        return Response(body, media_type=media)

    @app.get("/page/{name}", include_in_schema=False)
    async def page(name: str):
        if name not in pages:
            return Response(b'{"error": "no such page file"}', 404,
                            media_type="application/json")
        body, media = pages[name]
        return Response(body, media_type=media)
