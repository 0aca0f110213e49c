"""The vision model of the ``image_understanding`` built-in tool, from the configuration
(``builtinTools.imageUnderstanding``, docs/configuration.md).

Built here, on the command line's floor, because the model client is the agent loop's
(``sagents.agent.OpenAIChatModel``), which the gateway does not import.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sagents.config._loader import SagentsConfig
from sagents.errors import ModelConfigError

if TYPE_CHECKING:
    from sagents.agent import OpenAIChatModel

__all__ = ["image_model_from_config"]

logger = logging.getLogger(__name__)


def image_model_from_config(config: SagentsConfig) -> OpenAIChatModel | None:
    """The ``OpenAIChatModel`` for ``image_understanding`` when the config enables the tool.

    ``model`` and ``baseUrl`` default to ``$SAGENTS_MODEL`` and ``$OPENAI_BASE_URL``; the key
    is read from the variable ``apiKeyEnv`` names (``OPENAI_API_KEY`` by default). None (with
    a warning) when the tool is not enabled or no model can be configured: the tool then says
    so on every call. The caller closes it (``await model.aclose()``).
    """
    if "image_understanding" not in config.builtin_tools:
        return None
    from sagents.agent import OpenAIChatModel  # the agent loop's client, only when needed

    section = config.image_understanding
    try:
        return OpenAIChatModel(
            section.model,
            base_url=section.base_url,
            api_key=os.environ.get(section.api_key_env) or None,
        )
    except ModelConfigError as error:
        logger.warning("image_understanding has no vision model: %s (%s)", error, error.hint)
        return None
