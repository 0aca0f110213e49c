// The chat page of `sagents chat --web` and of the console's Chat page (docs/chat.md): sends
// AG-UI RunAgentInputs to the page's endpoint and renders the AG-UI event stream. Every text
// from the model, a tool or the user is inserted with textContent: none of it ever becomes
// HTML. The model's text is shown as markdown by renderMarkdown below, which builds elements
// of a fixed list itself (never innerHTML) and links only http(s) and mailto addresses.
"use strict";

const endpoint = document.body.dataset.endpoint;
const conversationUrl = document.body.dataset.conversation;
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const conversation = document.getElementById("conversation");
const statusLine = document.getElementById("status");
const stopButton = document.getElementById("stop");
const sendButton = document.getElementById("send");
const THREAD_KEY = document.body.dataset.threadKey;

let threadId = localStorage.getItem(THREAD_KEY);
if (!threadId) {
  threadId = crypto.randomUUID();
  localStorage.setItem(THREAD_KEY, threadId);
}
let controller = null; // the open stream's AbortController
let waiting = false; // the run waits for a decision
let state = { todo: [], skills: [], expanded_tools: [] };
const texts = new Map(); // message id -> element
const markdown = new Map(); // assistant message id -> its text so far (rendered as markdown)
const cards = new Map(); // tool call id -> card

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- markdown ------------------------------------------------------------------------------------
// A strict subset: paragraphs, headings, fenced code, block quotes, lists, rules; inline code,
// strong, emphasis and links. Anything else stays text. Bounded patterns and a depth limit keep
// hostile input from costing more than linear time.

const MAX_DEPTH = 8;
const INLINE = [
  ["code", /`([^`\n]{1,2000})`/y],
  ["strong", /\*\*([^\n]{1,2000}?)\*\*/y],
  ["strong", /__([^\n]{1,2000}?)__/y],
  ["em", /\*([^*\s][^*\n]{0,2000}?)\*/y],
  ["em", /_([^_\s][^_\n]{0,2000}?)_(?![A-Za-z0-9])/y],
  ["a", /\[([^\[\]\n]{1,500})\]\(([^\s()<>]{1,2000})\)/y],
];

function safeHref(raw) {
  if (!/^(https?:\/\/|mailto:)/i.test(raw)) return null;
  try {
    const url = new URL(raw);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function inline(target, text, depth) {
  let plain = "";
  const flush = () => {
    if (plain) target.appendChild(document.createTextNode(plain));
    plain = "";
  };
  let i = 0;
  outer: while (i < text.length) {
    if ("`*_[".includes(text[i]) && depth < MAX_DEPTH) {
      for (const [tag, pattern] of INLINE) {
        pattern.lastIndex = i;
        const found = pattern.exec(text);
        if (!found) continue;
        const end = i + found[0].length; // read before recursing: the patterns are shared
        if (tag === "a") {
          const href = safeHref(found[2]);
          if (href === null) continue; // not a link: the brackets stay text
          flush();
          const link = el("a");
          link.href = href;
          link.rel = "noopener noreferrer nofollow";
          link.target = "_blank";
          inline(link, found[1], depth + 1);
          target.appendChild(link);
        } else {
          flush();
          const node = el(tag);
          if (tag === "code") node.textContent = found[1];
          else inline(node, found[1], depth + 1);
          target.appendChild(node);
        }
        i = end;
        continue outer;
      }
    }
    plain += text[i];
    i += 1;
  }
  flush();
}

function paragraph(target, lines, depth) {
  const p = el("p");
  lines.forEach((line, n) => {
    if (n) p.appendChild(el("br"));
    inline(p, line, depth);
  });
  target.appendChild(p);
}

const FENCE = /^\s{0,3}(```|~~~)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const ITEM = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;

function blocks(target, lines, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i += 1;
    } else if ((m = FENCE.exec(line))) {
      const code = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(m[1])) code.push(lines[i++]);
      i += 1; // the closing fence (or the end)
      const pre = el("pre", "code");
      pre.appendChild(el("code", "", code.join("\n")));
      target.appendChild(pre);
    } else if ((m = HEADING.exec(line))) {
      const heading = el(`h${Math.min(m[1].length + 2, 6)}`);
      let title = m[2].trimEnd();
      let cut = title.length;
      while (cut > 0 && title[cut - 1] === "#") cut -= 1; // a closing run of #, by hand: linear
      if (cut < title.length && (cut === 0 || title[cut - 1] === " ")) title = title.slice(0, cut).trimEnd();
      inline(heading, title, depth);
      target.appendChild(heading);
      i += 1;
    } else if (RULE.test(line)) {
      target.appendChild(el("hr"));
      i += 1;
    } else if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const quoted = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        quoted.push(m[1]);
        i += 1;
      }
      const quote = el("blockquote");
      blocks(quote, quoted, depth + 1);
      target.appendChild(quote);
    } else if ((m = ITEM.exec(line))) {
      const ordered = /\d/.test(m[1][0]);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && (m = ITEM.exec(lines[i])) && /\d/.test(m[1][0]) === ordered) {
        const item = el("li");
        const text = [m[2]];
        i += 1;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !ITEM.exec(lines[i])) text.push(lines[i++].trim());
        text.forEach((part, n) => {
          if (n) item.appendChild(el("br"));
          inline(item, part, depth);
        });
        list.appendChild(item);
      }
      target.appendChild(list);
    } else {
      const text = [];
      while (
        i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) &&
        !RULE.test(lines[i]) && !QUOTE.test(lines[i]) && !ITEM.test(lines[i])
      ) text.push(lines[i++]);
      if (!text.length) text.push(lines[i++]); // a line no block took (a quote too deep)
      paragraph(target, text, depth);
    }
  }
}

function renderMarkdown(target, source) {
  target.replaceChildren();
  blocks(target, String(source).split(/\r?\n/), 0);
}

function scrollDown() {
  window.scrollTo(0, document.body.scrollHeight);
}

function message(role, text, id) {
  const box = el("div", `msg ${role}`);
  box.appendChild(el("span", "role", role));
  let body;
  if (role === "assistant") {
    body = el("div", "text md");
    renderMarkdown(body, text || "");
    if (id) markdown.set(id, text || "");
  } else body = el("span", "text", text || "");
  box.appendChild(body);
  if (id) {
    box.id = `msg-${id}`;
    texts.set(id, body);
  }
  conversation.appendChild(box);
  scrollDown();
  return body;
}

function card(toolCallId, name) {
  let found = cards.get(toolCallId);
  if (found) return found;
  const box = el("div", "tool");
  box.dataset.toolCallId = toolCallId;
  const head = el("div", "head");
  const title = el("span", "name", name || "tool");
  head.appendChild(title);
  head.appendChild(el("span", "spinner"));
  box.appendChild(head);
  const args = el("pre", "args");
  box.appendChild(args);
  const panes = el("div", "panes");
  const pane = {};
  for (const stream of ["stdout", "stderr", "info"]) {
    const column = el("div", `pane pane-${stream}`);
    column.appendChild(el("div", "label", stream));
    pane[stream] = el("pre", "output");
    column.appendChild(pane[stream]);
    panes.appendChild(column);
  }
  box.appendChild(panes);
  const progress = el("div", "script");
  box.appendChild(progress);
  const result = el("pre", "result");
  box.appendChild(result);
  conversation.appendChild(box);
  found = { box, title, args, pane, progress, result };
  cards.set(toolCallId, found);
  scrollDown();
  return found;
}

function renderState() {
  const todo = document.getElementById("todo");
  todo.replaceChildren(...state.todo.map((item) => el("li", `todo-${item.status}`, `${item.status === "done" ? "✓" : "•"} ${item.content}`)));
  const skills = document.getElementById("skills");
  skills.replaceChildren(...state.skills.map((name) => el("li", "", name)));
}

function renderHistory(messages) {
  conversation.replaceChildren();
  texts.clear();
  markdown.clear();
  cards.clear();
  for (const m of messages) {
    if (m.role === "user") message("user", typeof m.content === "string" ? m.content : JSON.stringify(m.content), m.id);
    else if (m.role === "assistant") {
      if (m.content) message("assistant", m.content, m.id);
      for (const call of m.toolCalls || []) {
        const c = card(call.id, call.function.name);
        c.args.textContent = call.function.arguments;
      }
    } else if (m.role === "tool") {
      const c = card(m.toolCallId);
      c.result.textContent = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
      c.box.classList.add("closed");
    }
  }
}

function approvalCard(request) {
  const box = el("div", "approval");
  box.id = `approval-${request.id}`;
  box.appendChild(el("strong", "", `Approve ${request.tools.join(", ")}?`));
  box.appendChild(el("pre", "request", request.message)); // the whole request, never cut
  const buttons = el("div", "buttons");
  const labels = { allow_once: "Allow once", allow_session: "Allow for the session", deny: "Deny" };
  for (const decision of request.offered || ["allow_once", "deny"]) {
    const button = el("button", `decide decide-${decision}`, labels[decision] || decision);
    button.type = "button";
    button.addEventListener("click", () => {
      buttons.remove();
      box.appendChild(el("div", "answered", labels[decision] || decision));
      send(null, { [request.id]: { decision } });
    });
    buttons.appendChild(button);
  }
  box.appendChild(buttons);
  conversation.appendChild(box);
  scrollDown();
}

function questionnaireForm(request) {
  const form = el("form", "questionnaire");
  form.id = `questionnaire-${request.id}`;
  const q = request.questionnaire;
  form.appendChild(el("strong", "", q.title || "Questions"));
  for (const question of q.questions) {
    const row = el("div", "question");
    row.appendChild(el("label", "", question.prompt));
    let input;
    if (question.kind === "single_choice") {
      input = el("select");
      for (const option of question.options) input.appendChild(Object.assign(el("option", "", option), { value: option }));
    } else if (question.kind === "multiple_choice") {
      input = el("select");
      input.multiple = true;
      for (const option of question.options) input.appendChild(Object.assign(el("option", "", option), { value: option }));
    } else {
      input = el("input");
      input.type = question.kind === "number" ? "number" : "text";
    }
    input.name = question.id;
    row.appendChild(input);
    form.appendChild(row);
  }
  const submit = el("button", "", "Answer");
  submit.type = "submit";
  form.appendChild(submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const answers = {};
    for (const question of q.questions) {
      const input = form.elements[question.id];
      if (question.kind === "multiple_choice") answers[question.id] = [...input.selectedOptions].map((o) => o.value);
      else if (question.kind === "number") answers[question.id] = input.value === "" ? null : Number(input.value);
      else answers[question.id] = input.value;
    }
    submit.disabled = true;
    send(null, { [request.id]: { answers } });
  });
  conversation.appendChild(form);
  scrollDown();
}

function onCustom(name, value) {
  if (name === "tool_progress") {
    const c = card(value.tool_call_id);
    if (value.closed) c.box.classList.add("closed");
    else if (value.text) {
      c.pane[value.stream].textContent += value.text;
      c.box.classList.add(`has-${value.stream}`);
    }
  } else if (name === "script.progress") {
    const c = card(value.tool_call_id || value.script_id, "run_script");
    c.progress.replaceChildren();
    if (value.total) {
      const bar = el("progress");
      bar.max = value.total;
      bar.value = value.done || 0;
      c.progress.appendChild(bar);
    }
    c.progress.appendChild(el("span", "", ` ${value.status}: ${value.calls} calls, ${value.failures} failed ${value.message || ""}`));
  } else if (name === "sagents.approval.request") {
    approvalCard(value);
  } else if (name === "sagents.questionnaire.request") {
    questionnaireForm(value);
  }
}

function onEvent(event) {
  switch (event.type) {
    case "MESSAGES_SNAPSHOT":
      renderHistory(event.messages);
      break;
    case "STATE_SNAPSHOT":
      state = event.snapshot;
      renderState();
      break;
    case "STATE_DELTA":
      for (const op of event.delta) if (op.op === "replace") state[op.path.slice(1)] = op.value;
      renderState();
      break;
    case "TEXT_MESSAGE_START":
      message("assistant", "", event.messageId);
      break;
    case "TEXT_MESSAGE_CONTENT": {
      const body = texts.get(event.messageId) || message("assistant", "", event.messageId);
      const text = (markdown.get(event.messageId) || "") + event.delta;
      markdown.set(event.messageId, text);
      renderMarkdown(body, text);
      scrollDown();
      break;
    }
    case "REASONING_MESSAGE_START":
      message("reasoning", "", event.messageId);
      break;
    case "REASONING_MESSAGE_CONTENT":
      (texts.get(event.messageId) || message("reasoning", "", event.messageId)).textContent += event.delta;
      break;
    case "TOOL_CALL_START":
      card(event.toolCallId, event.toolCallName).title.textContent = event.toolCallName;
      break;
    case "TOOL_CALL_ARGS":
      card(event.toolCallId).args.textContent += event.delta;
      break;
    case "TOOL_CALL_RESULT": {
      const c = card(event.toolCallId);
      c.result.textContent = event.content;
      c.box.classList.add("closed");
      break;
    }
    case "CUSTOM":
      onCustom(event.name, event.value);
      break;
    case "RUN_FINISHED":
      waiting = Boolean(event.result && event.result.sagents && event.result.sagents.waiting);
      statusLine.textContent = waiting ? "waiting for your answer" : "";
      break;
    case "RUN_ERROR":
      conversation.appendChild(el("div", "msg error", `error: ${event.message}`));
      break;
  }
}

async function send(text, decisions, cancel) {
  const messages = [];
  if (text !== null) {
    const id = crypto.randomUUID();
    messages.push({ id, role: "user", content: text });
  }
  const sagents = {};
  if (decisions) sagents.decisions = decisions;
  if (cancel) sagents.cancel = true;
  const body = {
    threadId, runId: crypto.randomUUID(), messages, tools: [], context: [], state: {},
    forwardedProps: { sagents },
  };
  controller = new AbortController();
  stopButton.disabled = false;
  sendButton.disabled = true;
  statusLine.textContent = "running";
  try {
    const response = await fetch(endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({ message: response.statusText }));
      conversation.appendChild(el("div", "msg error", `error: ${problem.message}`));
      statusLine.textContent = "";
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
  } catch (error) {
    if (error.name === "AbortError") statusLine.textContent = "stopped";
    else conversation.appendChild(el("div", "msg error", `error: ${error}`));
  } finally {
    controller = null;
    stopButton.disabled = !waiting;
    sendButton.disabled = false;
  }
}

document.getElementById("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("message");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  message("user", text);
  send(text, null);
});

stopButton.addEventListener("click", () => {
  if (controller) controller.abort(); // the server cancels the run when its stream goes away
  else if (waiting) send(null, null, true);
});

async function load() {
  const response = await fetch(`${conversationUrl}?thread=${encodeURIComponent(threadId)}`, { headers: { "X-CSRF-Token": csrf } });
  if (!response.ok) return;
  const data = await response.json();
  renderHistory(data.messages);
  state = data.state || state;
  renderState();
  for (const request of data.waiting || []) {
    if (request.questionnaire) questionnaireForm(request);
    else approvalCard(request);
  }
  waiting = (data.waiting || []).length > 0;
  stopButton.disabled = !waiting;
  if (waiting) statusLine.textContent = "waiting for your answer";
}

load();
