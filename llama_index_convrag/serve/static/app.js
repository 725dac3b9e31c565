// The chat page of `convrag serve`: conversations, streamed answers with clickable [n] sources, Stop / Retry,
// versions, feedback, and the documents panel. Talks only to the HTTP API (docs/SERVE.md).

import * as api from "./api.js";
import { answerNodes, clear, el, setText } from "./dom.js";
import { setupDocuments, showKnowledgeBase } from "./documents.js";
import { setupMemory, showMemory } from "./memory.js";
import { showPassageText } from "./passage.js";

const $ = (id) => document.getElementById(id);
const state = { conversationId: null, cursor: null, turn: null, versions: new Map(), bases: [], kb: null };
const KB_STORAGE = "convrag.knowledgeBase";

// ---- notices and the API key -------------------------------------------------------------------------------
function notice(text) {
  const box = $("notice");
  setText(box, text || "");
  box.hidden = !text;
}

function askKey(message) {
  const dialog = $("key-dialog");
  setText($("key-error"), message || "");
  $("key-input").value = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const key = $("key-input").value.trim();
      $("forget-key").hidden = !key;
      resolve(key || null);
    }, { once: true });
  });
}

async function showMode() {
  try {
    const health = await api.call("GET", "/v1/health");
    const badge = $("mode");
    if (typeof health.llm === "string" && health.llm) setText(badge, `Answers by ${health.llm}`);
    else if ("llm" in health) setText(badge, "Extractive answers (no LLM configured)");
    else return;
    badge.dataset.llm = health.llm ? "yes" : "no";
    badge.hidden = false;
  } catch (e) { /* the badge stays hidden */ }
}

// ---- knowledge bases ----------------------------------------------------------------------------------------
/** The knowledge bases this key may read; the picker chooses the one new conversations answer from. */
async function loadBases() {
  state.bases = (await api.call("GET", "/v1/knowledge-bases")).data;
  const picker = clear($("kb-picker"));
  for (const kb of state.bases) picker.append(el("option", { value: kb.id }, kb.name));
  const kept = localStorage.getItem(KB_STORAGE);
  const chosen = state.bases.find((kb) => kb.id === kept) || state.bases.find((kb) => kb.default) || state.bases[0];
  if (chosen) await pickBase(chosen.id);
}

function baseOf(id) { return state.bases.find((kb) => kb.id === id) || null; }

async function pickBase(id) {
  const kb = baseOf(id);
  if (!kb) return;
  state.kb = kb;
  $("kb-picker").value = kb.id;
  localStorage.setItem(KB_STORAGE, kb.id);
  setText($("kb-role"), kb.role);
  $("kb-role").dataset.role = kb.role;
  await showKnowledgeBase(kb, notice);
}

function showConversationBase(id) {
  const kb = baseOf(id);
  setText($("conversation-kb"), kb ? `answers from ${kb.name}` : "");
}

// ---- conversations -------------------------------------------------------------------------------------------
function titleOf(conversation) { return conversation.title || "Untitled conversation"; }

function conversationItem(c) {
  const open = el("button", { type: "button", class: "open", "aria-current": c.id === state.conversationId ? "true" : null,
                              onclick: () => openConversation(c.id) }, titleOf(c));
  const item = el("li", { dataset: { id: c.id } }, open,
    el("button", { type: "button", class: "rename", "aria-label": `Rename ${titleOf(c)}`, title: "Rename", onclick: () => rename(item, c) }, "✎"),
    el("button", { type: "button", class: "delete", "aria-label": `Delete ${titleOf(c)}`, title: "Delete", onclick: () => remove(c) }, "✕"));
  return item;
}

async function loadConversations(more) {
  const query = more && state.cursor ? `?limit=20&cursor=${encodeURIComponent(state.cursor)}` : "?limit=20";
  const page = await api.call("GET", `/v1/conversations${query}`);
  const list = $("conversation-list");
  if (!more) clear(list);
  for (const c of page.data) list.append(conversationItem(c));
  state.cursor = page.next_cursor;
  $("more-conversations").hidden = !page.next_cursor;
}

function rename(item, c) {
  const input = el("input", { type: "text", class: "title-input", value: titleOf(c), "aria-label": "New title" });
  const finish = async (save) => {
    if (save && input.value.trim()) {
      try { await api.call("PATCH", `/v1/conversations/${c.id}`, { title: input.value.trim() }); }
      catch (e) { notice(e.message); }
    }
    await loadConversations(false);
    if (c.id === state.conversationId) await openConversation(c.id);
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); finish(true); }
    if (e.key === "Escape") { e.preventDefault(); finish(false); }
  });
  item.replaceChildren(input, el("button", { type: "button", class: "save", onclick: () => finish(true) }, "Save"));
  input.focus();
  input.select();
}

async function remove(c) {
  if (!window.confirm(`Delete "${titleOf(c)}" and its messages?`)) return;
  try { await api.call("DELETE", `/v1/conversations/${c.id}`); } catch (e) { notice(e.message); }
  if (c.id === state.conversationId) newConversation();
  await loadConversations(false);
}

function newConversation() {
  state.conversationId = null;
  history.replaceState(null, "", location.pathname);
  setText($("conversation-title"), "New conversation");
  showConversationBase(state.kb ? state.kb.id : null);
  clear($("messages"));
  for (const b of document.querySelectorAll("#conversation-list .open")) b.removeAttribute("aria-current");
  showMemory(null);
  $("question").focus();
}

function isSuperseded(m) {
  if (m.superseded_by) return true;
  return Boolean(m.versions && m.versions.length && m.versions[m.versions.length - 1] !== m.id);
}

async function openConversation(id) {
  let conversation;
  try { conversation = await api.call("GET", `/v1/conversations/${id}`); }
  catch (e) {
    if (e.status === 404) { newConversation(); return; }
    throw e;
  }
  state.conversationId = id;
  history.replaceState(null, "", `#c=${id}`);
  showMemory(id);
  setText($("conversation-title"), titleOf(conversation));
  showConversationBase(conversation.knowledge_base);
  if (conversation.knowledge_base && baseOf(conversation.knowledge_base) && (!state.kb || state.kb.id !== conversation.knowledge_base)) {
    await pickBase(conversation.knowledge_base);
  }
  for (const b of document.querySelectorAll("#conversation-list li")) {
    const open = b.querySelector(".open");
    if (open) open.setAttribute("aria-current", b.dataset.id === id ? "true" : "false");
  }
  state.versions.clear();
  const list = clear($("messages"));
  for (const m of conversation.messages) {
    // A regenerated reply lists its versions; show the newest one, older ones stay one click away.
    if (m.role === "assistant" && isSuperseded(m)) continue;
    list.append(m.role === "user" ? userItem(m.content) : assistantItem(m));
  }
  markLastReply();
  const last = conversation.messages[conversation.messages.length - 1];
  if (last && last.role === "assistant" && last.status === "pending" && !state.turn && state.followed !== last.id) {
    state.followed = last.id;  // once: an answer another worker writes cannot be followed here
    // an answer still being written (the page was reloaded mid-answer): follow it from its events
    const items = document.querySelectorAll("#messages .msg.assistant");
    await runTurn(`/v1/messages/${last.id}/events`, null, items[items.length - 1], last.id);
  }
}

// ---- messages --------------------------------------------------------------------------------------------------
function userItem(text) {
  return el("li", { class: "msg user" }, el("div", { class: "role" }, "You"), el("div", { class: "content" }, text));
}

function assistantItem(m) {
  const item = el("li", { class: "msg assistant" });
  fillAssistant(item, m);
  return item;
}

/** The passage behind marker [n]: the citation with that marker, else source n (numbered from 1, as [n]). */
function sourceOf(m, n) {
  const cited = (m.citations || []).find((c) => c.marker === n);
  if (cited) return cited;
  const refs = m.references && m.references.length ? m.references : m.citations || [];
  return refs.find((r) => r.source_index === n) || null;
}

/** A source's document: its name inside the knowledge base (the server never sends its path). */
function fileOf(source) { return source.document || source.node_id || "(unknown document)"; }

function showPassage(source, n) {
  const box = $("passage");
  if (!source) { notice(`Source [${n}] is not known yet.`); return; }
  const meta = source.metadata || {};
  setText($("passage-heading"), `Source [${n}]`);
  setText($("passage-file"), fileOf(source));
  const chunk = meta.chunk_index !== undefined ? `#${meta.chunk_index} (${source.node_id})` : source.node_id || "";
  setText($("passage-chunk"), chunk);
  setText($("passage-score"), typeof source.score === "number" ? source.score.toFixed(3) : "-");
  const mark = showPassageText($("passage-text"), source);
  box.hidden = false;
  $("passage-text").scrollTop = mark ? Math.max(0, mark.offsetTop - $("passage-text").offsetTop - 24) : 0;
  $("passage-heading").setAttribute("tabindex", "-1");
  $("passage-heading").focus();
}

const STATUS_TEXT = { cancelled: "cancelled", error: "failed", pending: "answering…",
                      interrupted: "interrupted (the server stopped; the text so far is kept)" };

/** Fill an assistant <li> from a message-like object {id, content, status, error, citations, references, ...}. */
function fillAssistant(item, m) {
  item.dataset.id = m.id || "";
  item.dataset.status = m.status;
  const open = (n) => showPassage(sourceOf(m, n), n);
  const parts = [el("div", { class: "role" }, "Assistant"),
                 el("div", { class: "content" }, answerNodes(m.content || "", open))];
  if (STATUS_TEXT[m.status]) {
    const why = m.status === "error" && m.error ? `: ${typeof m.error === "string" ? m.error : m.error.message}` : "";
    parts.push(el("p", { class: `status ${m.status}` }, `${STATUS_TEXT[m.status]}${why}`));
  }
  const sources = m.citations && m.citations.length ? m.citations : m.references || [];
  if (sources.length) {
    parts.push(el("div", { class: "sources" }, "Sources: ", sources.map((s, i) => {
      const n = typeof s.source_index === "number" ? s.source_index : i + 1;
      return el("button", { type: "button", class: "source", title: fileOf(s),
                            onclick: () => showPassage(s, n) }, `[${n}] ${fileOf(s)}`);
    })));
  }
  if (m.status !== "pending") parts.push(toolsOf(item, m));
  item.replaceChildren(...parts);
}

function toolsOf(item, m) {
  const query = el("p", { class: "query", hidden: true });
  const tools = el("div", { class: "tools" });
  tools.append(el("button", { type: "button", class: "searched", "aria-expanded": "false", onclick: async (e) => {
    const button = e.currentTarget;
    if (!query.hidden) { query.hidden = true; button.setAttribute("aria-expanded", "false"); return; }
    let text = m.retrieval_query;
    let strategy = m.rewrite_strategy;
    if (text === undefined) {
      try {
        const record = await api.call("GET", `/v1/messages/${m.id}/turn`);
        text = record.retrieval_query;
        strategy = record.rewrite_strategy;
      } catch (err) { text = null; }
    }
    const how = strategy ? ` (rewrite: ${strategy})` : "";
    setText(query, text ? `searched for: ${text}${how}` : "no retrieval query was recorded for this answer");
    query.hidden = false;
    button.setAttribute("aria-expanded", "true");
  } }, "Searched for…"));
  if ((m.versions && m.versions.length > 1) || m.version > 1) tools.append(versionNav(item, m));
  const rating = m.feedback ? m.feedback.rating : null;
  for (const [value, label, glyph] of [["up", "Good answer", "▲ Good"], ["down", "Bad answer", "▼ Bad"]]) {
    tools.append(el("button", { type: "button", class: `rate ${value}`, "aria-label": label,
                                "aria-pressed": rating === value ? "true" : "false",
                                onclick: () => rate(tools, m, value) }, glyph));
  }
  const retry = m.status === "cancelled" || m.status === "error" || m.status === "interrupted";
  tools.append(el("button", { type: "button", class: retry ? "retry" : "regenerate",
                              onclick: () => regenerate(item, m) }, retry ? "Retry" : "Regenerate"));
  tools.append(query);
  return tools;
}

/** "version k of n" with ‹ › (a message lists its versions' ids, or at least its own version number). */
function versionNav(item, m) {
  const total = m.versions ? m.versions.length : m.version;
  const at = m.versions ? Math.max(0, m.versions.indexOf(m.id)) : m.version - 1;
  const go = async (to) => {
    const key = m.reply_to || m.id;
    let all = state.versions.get(key);
    if (!all) {
      try { all = (await api.call("GET", `/v1/messages/${m.id}/versions`)).data; }
      catch (e) { notice(e.message); return; }
      state.versions.set(key, all);
    }
    const shown = all[to];
    if (shown) fillAssistant(item, Object.assign({}, shown, { versions: all.map((v) => v.id) }));
    markLastReply();
  };
  return el("span", { class: "versions" },
    el("button", { type: "button", class: "prev-version", "aria-label": "Earlier version", disabled: at === 0,
                   onclick: () => go(at - 1) }, "‹"),
    el("span", { class: "version-label" }, `version ${at + 1} of ${total}`),
    el("button", { type: "button", class: "next-version", "aria-label": "Later version", disabled: at === total - 1,
                   onclick: () => go(at + 1) }, "›"));
}

async function rate(tools, m, value) {
  try {
    await api.call("POST", `/v1/messages/${m.id}/feedback`, { rating: value });
    m.feedback = { rating: value };
    for (const b of tools.querySelectorAll(".rate")) b.setAttribute("aria-pressed", String(b.classList.contains(value)));
  } catch (e) { notice(e.message); }
}

/** Only the newest reply of a conversation can be regenerated (the API answers 400 otherwise). */
function markLastReply() {
  const replies = document.querySelectorAll("#messages .msg.assistant");
  replies.forEach((r, i) => {
    for (const b of r.querySelectorAll(".retry, .regenerate")) b.hidden = i !== replies.length - 1;
  });
}

// ---- turns -------------------------------------------------------------------------------------------------------
function busy(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
  $("question").disabled = on;
  if (!on) $("question").focus();
}

/** Stream one turn into `item` (`body` null: follow the events of answer `resumeId`); a dropped connection is
 * resumed from the last event id. After it ends (done, error, Stop), read the conversation back from the API. */
async function runTurn(path, body, item, resumeId) {
  const controller = new AbortController();
  const m = { id: resumeId || null, content: "", status: "pending", references: [], citations: [] };
  state.turn = { controller, message: m };
  busy(true);
  fillAssistant(item, m);
  let lastId = 0;
  const onEvent = (event, data, id) => {
      if (id) lastId = id;
      if (event === "start") {
        m.id = data.assistant_message_id;
        if (!state.conversationId) state.conversationId = data.conversation_id;
      } else if (event === "retrieval") {
        m.references = data.references || [];
        m.retrieval_query = data.retrieval_query;
        m.rewrite_strategy = data.rewrite ? data.rewrite.strategy : null;
      } else if (event === "delta") {
        m.content += data.text;
      } else if (event === "done") {
        Object.assign(m, { status: data.status, content: data.content, citations: data.citations || [] });
      } else if (event === "error") {
        Object.assign(m, { status: "error", error: data.error });
      }
      fillAssistant(item, m);
    };
  try {
    try {
      await api.stream(path, body, onEvent, controller.signal);
    } catch (e) {
      if (e.name === "AbortError" || !(e instanceof TypeError) || !m.id) throw e;
      // the connection dropped mid-answer: read on from the last event the page got
      await api.stream(`/v1/messages/${m.id}/events`, null, onEvent, controller.signal, lastId);
    }
  } catch (e) {
    if (e.name !== "AbortError") {
      m.status = "error";
      m.error = e.message;
      fillAssistant(item, m);
      notice(e.message);
    }
  } finally {
    state.turn = null;
  }
  try {
    if (controller.signal.aborted && m.id) await settle(m.id);
    if (state.conversationId) {
      await openConversation(state.conversationId);
      await loadConversations(false);
    }
  } catch (e) {
    notice(e.message);
  } finally {
    busy(false);  // Stop hides only once the stored conversation is shown again
  }
}

/** After Stop the server stores the message `cancelled`; wait (briefly) until it is no longer pending. */
async function settle(id) {
  for (let i = 0; i < 40; i++) {
    try {
      const message = await api.call("GET", `/v1/messages/${id}`);
      if (message.status !== "pending") return;
    } catch (e) { return; }
    await new Promise((r) => setTimeout(r, 150));
  }
}

async function ask(question) {
  notice("");
  if (!state.conversationId) {
    const title = question.length > 60 ? `${question.slice(0, 57)}…` : question;
    const c = await api.call("POST", "/v1/conversations", { title, knowledge_base: state.kb ? state.kb.id : undefined });
    state.conversationId = c.id;
    history.replaceState(null, "", `#c=${c.id}`);
    setText($("conversation-title"), titleOf(c));
    await loadConversations(false);
  }
  const list = $("messages");
  list.append(userItem(question));
  const item = el("li", { class: "msg assistant" });
  list.append(item);
  await runTurn(`/v1/conversations/${state.conversationId}/messages`, { content: question, stream: true }, item);
}

async function regenerate(item, m) {
  notice("");
  await runTurn(`/v1/messages/${m.id}/regenerate`, { stream: true }, item);
}

// ---- wiring --------------------------------------------------------------------------------------------------------
function wire() {
  api.onKeyNeeded(askKey);
  $("forget-key").hidden = !api.apiKey();
  $("forget-key").addEventListener("click", () => { api.forgetKey(); $("forget-key").hidden = true; });
  $("new-conversation").addEventListener("click", newConversation);
  $("more-conversations").addEventListener("click", () => loadConversations(true));
  $("close-passage").addEventListener("click", () => { $("passage").hidden = true; });
  $("stop").addEventListener("click", stop);
  $("kb-picker").addEventListener("change", async (e) => {
    await pickBase(e.target.value);
    if (state.conversationId) newConversation();  // a conversation keeps its own knowledge base
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const question = $("question").value.trim();
    if (!question || state.turn) return;
    $("question").value = "";
    ask(question).catch((err) => { notice(err.message); busy(false); });
  });
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && state.turn) stop();
  });
  setupMemory(notice);
  const toggle = $("toggle-docs");
  toggle.addEventListener("click", () => {
    const open = $("docs").hidden;
    $("docs").hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
  });
}

/** Stop the answer being written: the server stores it `cancelled` with its text so far. */
function stop() {
  if (!state.turn) return;
  const { controller, message } = state.turn;
  if (message.id) api.call("POST", `/v1/messages/${message.id}/cancel`).catch(() => {}).finally(() => controller.abort());
  else controller.abort();
}

async function start() {
  wire();
  setupDocuments(notice);
  await showMode();
  await loadBases();
  await loadConversations(false);
  const match = /#c=([\w-]+)/.exec(location.hash);
  if (match) await openConversation(match[1]);
  document.body.dataset.ready = "true";
}

start().catch((e) => { notice(e.message); document.body.dataset.ready = "true"; });
