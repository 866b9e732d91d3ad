"""`--images` and its options (docs/images.md): the flags, and the settings they make."""

from __future__ import annotations

import click

from benchy.cli.options import Decorator
from benchy.load.images import ImageSettings, parse_size

IMAGE_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--images",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        metavar="N",
        help="N images in each request beside its text (chat, responses, messages), each unique unless "
        "--shared-images (docs/images.md).",
    ),
    click.option(
        "--image-size",
        default="448x448",
        show_default=True,
        metavar="WxH",
        help="With --images: each image's size in pixels (a PNG of random blocks, the request's nonce drawn in).",
    ),
    click.option(
        "--shared-images",
        is_flag=True,
        help="With --images: the same images in every request, to see what an image cache does.",
    ),
    click.option(
        "--image-url",
        is_flag=True,
        help="With --images: send http URLs of benchy's own image host on 127.0.0.1 instead of data URLs "
        "(the server must run on this machine to fetch them).",
    ),
)


def image_settings(images: int, image_size: str, shared_images: bool, image_url: bool) -> ImageSettings | None:
    """The settings of --images, or None; UsageError for a bad size or an option without it."""
    if not images:
        if shared_images or image_url or image_size != "448x448":
            raise click.UsageError("--image-size, --shared-images and --image-url need --images N")
        return None
    try:
        width, height = parse_size(image_size)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return ImageSettings(images, width, height, shared=shared_images, url=image_url)
