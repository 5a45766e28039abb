"""Fill deploy/nginx/posenc.conf.template: `python render.py OUT --upstream HOST:PORT ...`."""

from __future__ import annotations

import argparse
from pathlib import Path

TEMPLATE = Path(__file__).with_name("posenc.conf.template")


def render(
    upstreams: list[str], listen: str, state_dir: str, rate: str = "200r/s", burst: int = 400
) -> str:
    servers = "\n        ".join(f"server {u} max_fails=1 fail_timeout=5s;" for u in upstreams)
    values = {
        "UPSTREAMS": servers,
        "LISTEN": listen,
        "STATE_DIR": state_dir,
        "RATE": rate,
        "BURST": str(burst),
    }
    text = TEMPLATE.read_text()
    for key, value in values.items():  # nginx's own $variables stay as they are
        text = text.replace("${" + key + "}", value)
    if "${" in text:
        raise ValueError("a placeholder of the template was not filled")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--upstream", action="append", required=True)
    parser.add_argument("--listen", default="8080")
    parser.add_argument("--state-dir", default="/var/cache/nginx")
    parser.add_argument("--rate", default="200r/s")
    parser.add_argument("--burst", type=int, default=400)
    args = parser.parse_args()
    args.out.write_text(render(args.upstream, args.listen, args.state_dir, args.rate, args.burst))


if __name__ == "__main__":
    main()
