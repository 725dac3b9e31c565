// "What the assistant remembers": the open conversation's running summary (edit: a new version; clear) and the
// user's facts (forget one, or all), from the memory API (docs/SERVE.md, "Memory"). Memory is written after each
// answer, so the panel reads it again when it opens, after each turn, and on Refresh.

import * as api from "./api.js";
import { clear, el, setText } from "./dom.js";

const $ = (id) => document.getElementById(id);
let conversationId = null;
let report = () => {};

function summaryPath() { return `/v1/conversations/${encodeURIComponent(conversationId)}/summary`; }

async function loadSummary() {
  const text = $("memory-summary");
  const meta = $("memory-summary-meta");
  $("edit-summary").hidden = !conversationId;
  $("clear-summary").hidden = true;
  if (!conversationId) {
    setText(text, "Start a conversation: its summary shows here once earlier messages leave the recent window.");
    setText(meta, "");
    return;
  }
  const body = await api.call("GET", summaryPath());
  const s = body.summary;
  text.dataset.empty = String(!s);
  setText(text, s ? s.text : "No summary yet.");
  setText(meta, s ? `Version ${s.version} (${s.source === "edit" ? "your edit" : "written by the assistant"}), ` +
                    `covers ${s.covered} message${s.covered === 1 ? "" : "s"}, ${s.tokens} of ${body.max_tokens} tokens`
                  : "");
  $("clear-summary").hidden = !s;
  $("summary-text").value = s ? s.text : "";
}

async function loadFacts() {
  const facts = (await api.call("GET", "/v1/memory/facts")).data;
  const list = clear($("fact-list"));
  $("forget-facts").hidden = !facts.length;
  if (!facts.length) list.append(el("li", { class: "empty" }, "No facts about you."));
  for (const f of facts) {
    list.append(el("li", { dataset: { id: f.id } },
      el("span", { class: "fact-text" }, f.text),
      el("button", { type: "button", class: "remove", "aria-label": `Forget: ${f.text}`, onclick: async () => {
        if (!window.confirm(`Forget "${f.text}"?`)) return;
        await act(() => api.call("DELETE", `/v1/memory/facts/${encodeURIComponent(f.id)}`));
      } }, "Forget")));
  }
}

/** Read the panel again (when it is open). */
export async function refreshMemory() {
  if ($("memory").hidden) return;
  try {
    const status = await api.call("GET", "/v1/memory");
    setText($("memory-parts"), status.parts.length ? `On this server: ${status.parts.join(", ")}.`
                                                    : "Memory is off on this server; what is stored shows here.");
    await loadSummary();
    await loadFacts();
  } catch (e) { report(e.message); }
  $("memory").dataset.loaded = "true";
}

async function act(fn) {
  try { await fn(); } catch (e) { report(e.message); }
  await refreshMemory();
}

/** Show the memory of conversation `id` (null: a new conversation). */
export async function showMemory(id) {
  conversationId = id;
  $("summary-editor").hidden = true;
  await refreshMemory();
}

export function setupMemory(notice) {
  report = notice;
  const toggle = $("toggle-memory");
  toggle.addEventListener("click", async () => {
    const open = $("memory").hidden;
    $("memory").hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) { delete $("memory").dataset.loaded; await refreshMemory(); }
  });
  $("refresh-memory").addEventListener("click", () => { delete $("memory").dataset.loaded; refreshMemory(); });
  $("edit-summary").addEventListener("click", () => {
    $("summary-editor").hidden = false;
    $("summary-text").focus();
  });
  $("cancel-summary").addEventListener("click", () => { $("summary-editor").hidden = true; });
  $("summary-editor").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("summary-text").value.trim();
    if (!text) return;
    try {
      await api.call("PUT", summaryPath(), { text });
      $("summary-editor").hidden = true;
    } catch (err) { report(err.message); }
    await refreshMemory();
  });
  $("clear-summary").addEventListener("click", async () => {
    if (!window.confirm("Clear this conversation's summary (every version)?")) return;
    await act(() => api.call("DELETE", summaryPath()));
  });
  $("forget-facts").addEventListener("click", async () => {
    if (!window.confirm("Forget every fact about you?")) return;
    await act(() => api.call("DELETE", "/v1/memory/facts?confirm=true"));
  });
}
