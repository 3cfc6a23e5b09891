// cardrag page: ask, render [cite:card-X] as chips, open a card with the matched passage marked.
// Text from the server is always set with textContent, never parsed as HTML.
"use strict";

const CITE = /\[cite:\s*([^\]]*?)\s*\]/g;
const $ = (id) => document.getElementById(id);
let lastReply = null;

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function chip(cardId, title) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "chip";
  button.dataset.card = cardId;
  button.textContent = title || cardId;
  button.title = cardId;
  button.addEventListener("click", () => openCard(cardId));
  return button;
}

function renderAnswer(reply) {
  const titles = new Map(reply.citations.map((c) => [c.id, c.title]));
  const answer = $("answer");
  answer.replaceChildren();
  let last = 0;
  for (const match of reply.answer.matchAll(CITE)) {
    answer.append(reply.answer.slice(last, match.index));
    answer.append(chip(match[1], titles.get(match[1])));
    last = match.index + match[0].length;
  }
  answer.append(reply.answer.slice(last));
  $("refusal").hidden = !reply.refused;
  $("refusal").textContent = reply.refused
    ? "The cards do not cover this question, so no answer is given from them." +
      (reply.refusal_reason ? " " + reply.refusal_reason : "")
    : "";
  $("answer-section").hidden = false;
}

function renderRetrieved(reply) {
  const list = $("retrieved");
  list.replaceChildren();
  for (const card of reply.retrieved) {
    const item = document.createElement("li");
    // the list is in the retriever's order: rank first, then the score that ordered it
    // (fused), then the dense similarity the gate reads
    const rank = document.createElement("span");
    rank.className = "rank";
    rank.textContent = "#" + card.rank + " ";
    const order = document.createElement("span");
    order.className = "ordering";
    order.textContent = card.ordering_score === null ? "" : "rank score " + card.ordering_score.toFixed(4) + " · ";
    order.title = "reciprocal rank fusion score: what ordered the cards";
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = card.score.toFixed(3);
    score.title = "similarity of the best-matching passage (what the gate reads)";
    const passage = document.createElement("div");
    passage.className = "passage";
    passage.textContent = "matched: " + card.matched_passage;
    item.append(rank, order, "similarity ", score, " ", chip(card.id, card.title), passage);
    list.append(item);
  }
  $("retrieved-section").hidden = reply.retrieved.length === 0;
}

async function openCard(cardId) {
  const response = await fetch("/cards/" + encodeURIComponent(cardId));
  if (!response.ok) {
    setStatus("That card cannot be shown (" + response.status + ").", true);
    return;
  }
  const card = await response.json();
  const hit = lastReply ? lastReply.retrieved.find((c) => c.id === cardId) : null;
  $("card-title").textContent = card.title;
  $("card-meta").textContent = card.id + " · " + card.license + " · checked " + card.accessed_at;
  const body = $("card-body");
  body.replaceChildren();
  const start = hit ? hit.matched_start_index : null;
  const end = hit ? hit.matched_end_index : null;
  if (start !== null && end !== null && start < end) {
    const mark = document.createElement("mark");
    mark.textContent = card.body.slice(start, end);
    body.append(card.body.slice(0, start), mark, card.body.slice(end));
  } else {
    body.append(card.body);
  }
  $("card-section").hidden = false;
  $("card-section").scrollIntoView({ block: "nearest" });
  const marked = body.querySelector("mark");
  if (marked) marked.scrollIntoView({ block: "nearest" });
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value;
  setStatus("Searching the cards…", false);
  $("ask").disabled = true;
  try {
    const response = await fetch("/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question }),
    });
    const data = await response.json();
    if (!response.ok) {
      const detail = Array.isArray(data.detail) ? data.detail.map((d) => d.msg).join("; ") : data.detail;
      setStatus("Cannot answer: " + detail, true);
      return;
    }
    lastReply = data;
    $("card-section").hidden = true;
    renderAnswer(data);
    renderRetrieved(data);
    setStatus(data.refused ? "No card covers this question." : "", false);
  } catch (error) {
    setStatus("The server did not answer: " + error, true);
  } finally {
    $("ask").disabled = false;
  }
}

$("ask-form").addEventListener("submit", ask);
$("card-close").addEventListener("click", () => { $("card-section").hidden = true; });
