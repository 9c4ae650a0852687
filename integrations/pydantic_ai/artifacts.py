"""The files a run handed back, as the model sees them: every artifact named in the return
(name, MIME type, size), and the images among them as ``BinaryContent`` the model can look at
(a ``ToolReturn`` whose content follows the tool's return).

Only a client-side run loads images: inside a workflow (pydantic-ai's Temporal durability) the
bytes would enter the agent's history, so there the model gets the names only and a person
fetches the files with ``codemode artifacts ID NAME``.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic_ai import BinaryContent, ToolReturn

from codemode.workflows.models import ExecutionOutcome

log = logging.getLogger(__name__)

#: Images shown to the model per run, and the largest one shown.
IMAGES_SHOWN = 4
IMAGE_MAX_BYTES = 5 * 1024 * 1024


def is_shown(artifact: Any) -> bool:
    return artifact.is_image and artifact.size <= IMAGE_MAX_BYTES


async def with_images(client: Any, outcome: ExecutionOutcome, shown: Any) -> Any:
    """``shown`` (the tool's return), with the run's images attached for the model when it
    made any; ``shown`` itself otherwise."""
    from codemode.activities.checkpoints import CheckpointUnusable
    from codemode.client.artifacts import read_artifact

    content: list[Any] = []
    for artifact in [a for a in outcome.artifacts if is_shown(a)][:IMAGES_SHOWN]:
        try:
            data = await read_artifact(client, outcome.execution_id, artifact)
        except CheckpointUnusable as err:
            log.warning("artifact %s not shown to the model: %s", artifact.name, err)
            continue
        content += [f"Artifact {artifact.name}:", BinaryContent(data=data, media_type=artifact.mime_type)]
    return ToolReturn(return_value=shown, content=content) if content else shown
