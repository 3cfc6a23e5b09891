"""The routes: ``POST /ask``, ``GET /cards/{id}``, ``GET /healthz`` and the page at ``/``.

Each route asks the :class:`~cardrag.app.service.Service` for the index it serves; a store it
cannot serve is a 503 with the reason, never a crash.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cardrag.app.context import StaffAccessError, check_staff_access, for_staff
from cardrag.app.graph import answer, check_question
from cardrag.app.reply import Reply
from cardrag.app.service import NOT_SERVABLE, DegradedError, Service
from cardrag.ingest import metadata as md
from cardrag.ingest.cards import valid_card_id
from cardrag.ingest.settings import Settings
from cardrag.retrievers.expansion import visible

STATIC = Path(__file__).resolve().parent / "static"
"""The page: plain HTML, CSS and JavaScript, no build step."""
NOT_FOUND = "card not found"


router = APIRouter()
"""Every route of the API and the page (:func:`cardrag.app.server.create_app` includes it)."""


class Question(BaseModel):
    """The body of ``POST /ask``; any other field is refused (422), not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question, 1 to 2,000 characters after trimming.")
    k: int | None = Field(default=None, ge=1, le=20, description="Cards to retrieve.")
    staff: bool = Field(
        default=False,
        description="Staff access: internal cards too (403 unless the server allows it).",
    )

    @field_validator("question")
    @classmethod
    def _checked(cls, value: str) -> str:
        return check_question(value)


class CardView(BaseModel):
    """A card as ``GET /cards/{id}`` serves it."""

    id: str
    """Card id."""
    title: str
    """Card title."""
    body: str
    """The card text (the offsets in a reply's ``retrieved`` entries index into it)."""
    topics: list[str]
    """Topic tags."""
    license: str
    """Licence of the text."""
    accessed_at: str
    """When the content was last checked."""


class Health(BaseModel):
    """What ``GET /healthz`` reports."""

    loaded: bool
    """Whether an index is open and answering."""
    index: str | None = None
    """The index folder in use."""
    embedding_model: str
    """The model questions are embedded with."""
    cards: int = 0
    """Parent cards in the index."""
    children: int = 0
    """Rows in the children collection (chunks, plus whole-card rows where enabled)."""
    stale: bool = False
    """A newer index exists but cannot be opened; the one in ``index`` is still answering."""
    degraded: bool = False
    """The index served cannot answer now (its stores do not answer, or hold nothing): 503."""
    detail: str | None = None
    """Why nothing is loaded, or why the newer index cannot be served."""


def service_of(request: Request) -> Service:
    """The application's service (set when the application starts)."""
    service: Service = request.app.state.service
    return service


def allow_staff(settings: Settings) -> None:
    """A 403 with the reason unless the server allows staff access (``staff_access``)."""
    try:
        check_staff_access(settings)
    except StaffAccessError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc


@router.get("/healthz", response_model=Health)
def healthz(service: Annotated[Service, Depends(service_of)]) -> Any:
    """Whether an index is loaded and answering (503 with the reason when not)."""
    model = service.settings.embedding_model
    try:
        served = service.current()
    except NOT_SERVABLE as exc:
        degraded = isinstance(exc, DegradedError)
        body = Health(loaded=False, embedding_model=model, detail=str(exc), degraded=degraded)
        return JSONResponse(body.model_dump(), status_code=503)
    problem = served.index.problem()
    if problem is not None:
        body = Health(
            loaded=True,
            index=served.index.generation,
            embedding_model=model,
            degraded=True,
            detail=f"degraded: {problem}",
        )
        return JSONResponse(body.model_dump(), status_code=503)
    return Health(
        loaded=True,
        index=served.index.generation,
        embedding_model=model,
        cards=int(served.index.manifest.get("cards", 0)),
        children=int(served.index.manifest.get("children", 0)),
        stale=service.stale is not None,
        detail=service.stale,
    )


@router.post("/ask", response_model=Reply)
def ask(body: Question, service: Annotated[Service, Depends(service_of)]) -> Reply:
    """Answer a question from the cards, with citations, or refuse and say why."""
    try:
        served = service.current()
    except NOT_SERVABLE as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc
    context = served.context
    if body.staff:
        allow_staff(service.settings)
        context = for_staff(context, service.settings)
    if body.k is not None:
        context = replace(context, k=body.k)
    with service.answering:
        reply = answer(body.question, context)
    if reply.refused:  # a refusal: is it the question, or an index that cannot serve?
        problem = served.index.problem()
        if problem is not None:
            raise HTTPException(status_code=503, detail=f"degraded: {problem}")
    return reply


@router.get("/cards/{card_id}", response_model=CardView)
def card(
    card_id: str, service: Annotated[Service, Depends(service_of)], staff: bool = False
) -> CardView:
    """One card as it is stored (404 for an unknown card and a restricted one alike)."""
    if staff:
        allow_staff(service.settings)
    if not valid_card_id(card_id):  # also keeps over-long names away from the file store
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    try:
        served = service.current()
    except NOT_SERVABLE as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc
    [doc] = served.index.docstore.mget([card_id])
    sensitivity = str(doc.metadata.get(md.SENSITIVITY, "public")) if doc else ""
    if doc is None or not visible(sensitivity, allow_internal=staff, allow_restricted=False):
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    meta = doc.metadata
    return CardView(
        id=card_id,
        title=str(meta.get(md.TITLE, "")),
        body=doc.page_content,
        topics=list(meta.get(md.TOPICS, [])),
        license=str(meta.get(md.LICENSE, "")),
        accessed_at=str(meta.get(md.ACCESSED_AT, "")),
    )


@router.get("/", include_in_schema=False)
def page() -> FileResponse:
    """The web page."""
    return FileResponse(STATIC / "index.html")
