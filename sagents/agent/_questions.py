"""The agent loop's questioner: a ``questionnaire`` call becomes an event the application
answers (docs/agent.md, "Questions for the user").

Each questionnaire is emitted as a ``questionnaire.request`` event; the application answers it
on the event (``event.answer({...})``, ``event.decline()``, ``event.cancel()``) or through the
:class:`~sagents.tool.questions.Questioner` it gave ``run_stream`` (``questioner=``), whichever
comes first. No answer within the time limit ends it ``timed_out``; cancelling the run ends it
``cancelled``. Exactly one ``questionnaire.result`` event follows each request.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

import anyio

from sagents.agent._events import QuestionnaireRequestEvent, QuestionnaireResultEvent
from sagents.tool.questions import (
    Questioner,
    Questionnaire,
    QuestionnaireAnswer,
    QuestionnaireSlot,
)

if TYPE_CHECKING:
    from sagents.agent._run import ActiveRun

__all__ = ["EventQuestioner"]

logger = logging.getLogger(__name__)


class EventQuestioner:
    """Asks through the run's events (and the application's questioner, if any).

    Args:
        run: The run whose consumer receives the events.
        application: The ``questioner`` given to ``run_stream``, if any.
    """

    def __init__(self, run: ActiveRun, application: Questioner | None) -> None:
        self._run = run
        self._application = application

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        """Emit the request, wait for the first answer (or the time limit), emit the result."""
        run = self._run
        clock = run.hubs[0].clock
        request_id = f"questionnaire_{uuid.uuid4().hex[:12]}"
        slot = QuestionnaireSlot(questionnaire)
        run.put(
            QuestionnaireRequestEvent(
                request_id=request_id,
                questionnaire=questionnaire,
                time_limit=time_limit,
                ts=clock.time(),
                slot=slot,
            )
        )
        answer = QuestionnaireAnswer(status="timed_out")
        try:
            await run.wait_for_room()  # the request is out: a cancellation from here settles it
            with anyio.move_on_after(time_limit):
                async with anyio.create_task_group() as tg:
                    if self._application is not None:
                        tg.start_soon(self._ask_application, slot, questionnaire, time_limit)
                    answer = await slot.wait()
                    tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # its one result at once, never waiting for room (as an approval's: ActiveRun.ask)
            run.put(
                QuestionnaireResultEvent(request_id=request_id, status="cancelled", ts=clock.time())
            )
            raise
        await run.emit(
            QuestionnaireResultEvent(
                request_id=request_id,
                status=answer.status,
                answers=dict(answer.answers),
                ts=clock.time(),
            )
        )
        return answer

    async def _ask_application(
        self, slot: QuestionnaireSlot, questionnaire: Questionnaire, time_limit: float
    ) -> None:
        assert self._application is not None
        try:
            answer = await self._application.ask(questionnaire, time_limit=time_limit)
        except Exception as error:  # a broken questioner cancels this questionnaire, not the run
            logger.warning("the questioner failed", exc_info=True)
            answer = QuestionnaireAnswer(
                status="cancelled", message=f"the questioner failed: {error!r}"
            )
        try:
            slot.put(answer)
        except ValueError as error:
            slot.put(QuestionnaireAnswer(status="cancelled", message=f"invalid answers: {error}"))
