"""Zero-install routes beside Colab, for a given GitHub repository: the Binder link and the hub values.

``hisparse-numba lessons binder-badge --repo OWNER/NAME`` prints the Binder badge and link (what
``lessons/README.md`` shows for the repository in ``pyproject.toml``). mybinder.org builds from a
published repository; ``repo2docker .`` builds the same image from a checkout.

``hisparse-numba hub-values --repo OWNER/NAME`` (or ``--image REGISTRY/PATH``) prints
``deploy/hub/values.yaml`` with its single-user images renamed: by default
``ghcr.io/<owner>/<name>-singleuser:cpu`` and ``:gpu``, the images ``deploy/hub/Dockerfile`` builds
from a checkout (the hub needs the images pushed to a registry its nodes can pull from, not the
repository published). Without options the output is the file as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

from .lessons.colab import DEFAULT_BRANCH, github_url

BINDER_BADGE_IMAGE = "https://mybinder.org/badge_logo.svg"
VALUES = Path(__file__).resolve().parents[1] / "deploy" / "hub" / "values.yaml"
IMAGE_TAGS = {"cpu": "lessons", "gpu": "lessons,cuda12"}  # image tag -> the Dockerfile's EXTRAS


def _owner_name(repository: str | None) -> tuple[str, str]:
    owner, name = github_url(repository).removeprefix("https://github.com/").split("/")
    return owner, name


def binder_url(repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """mybinder.org's address for the repository, opening JupyterLab on the learner's lesson copy."""
    owner, name = _owner_name(repository)
    return f"https://mybinder.org/v2/gh/{owner}/{name}/{branch}?urlpath=lab/tree/my-lessons"


def binder_badge(repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    return f"[![Binder]({BINDER_BADGE_IMAGE})]({binder_url(repository, branch)})"


def singleuser_image(repository: str | None = None) -> str:
    """``ghcr.io/<owner>/<name>-singleuser`` (lower case, as registries want) for the repository."""
    owner, name = _owner_name(repository)
    return f"ghcr.io/{owner.lower()}/{name.lower()}-singleuser"


def check_image(image: str) -> str:
    if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+", image):
        raise ValueError(f"--image {image!r}: a lower-case image name without a tag, e.g. "
                         "registry.example.org/class/hisparse-numba-singleuser (the tags are :cpu and :gpu)")
    return image


def hub_values(values_text: str, image: str) -> str:
    """``values_text`` (deploy/hub/values.yaml) with the pyproject repository's images renamed ``image``."""
    default = singleuser_image()
    if default not in values_text:
        raise ValueError(f"the hub values do not name {default} (the images of the pyproject repository)")
    return values_text.replace(default, check_image(image))


def build_commands(image: str) -> list[str]:
    """The commands that build and push both images, run from a checkout's root."""
    builds = ["docker build -f deploy/hub/Dockerfile"
              + (f" --build-arg EXTRAS={extras}" if extras != "lessons" else "") + f" -t {image}:{tag} ."
              for tag, extras in IMAGE_TAGS.items()]
    return builds + [f"docker push {image}:{tag}" for tag in IMAGE_TAGS]
