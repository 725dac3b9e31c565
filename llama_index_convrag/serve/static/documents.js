// The documents panel: the indexed files, upload with progress, remove.

import * as api from "./api.js";
import { clear, el, setText } from "./dom.js";

const $ = (id) => document.getElementById(id);

export async function loadDocuments(notice) {
  let docs;
  try { docs = (await api.call("GET", "/v1/documents")).data; }
  catch (e) { notice(e.message); return; }
  const list = clear($("document-list"));
  if (!docs.length) list.append(el("li", { class: "empty" }, "No documents yet: add a file."));
  for (const d of docs) {
    const name = d.doc_id.split(/[\\/]/).pop();
    list.append(el("li", { dataset: { docId: d.doc_id } },
      el("span", { class: "doc-name", title: d.doc_id }, name),
      el("span", { class: "doc-chunks" }, `${d.chunks} chunk${d.chunks === 1 ? "" : "s"}${d.exists === false ? ", file gone" : ""}`),
      el("button", { type: "button", class: "remove", "aria-label": `Remove ${name}`, onclick: async () => {
        if (!window.confirm(`Remove ${name} from the index?`)) return;
        try { await api.call("DELETE", `/v1/documents/${encodeURIComponent(d.doc_id)}`); }
        catch (e) { notice(e.message); }
        await loadDocuments(notice);
      } }, "Remove")));
  }
}

export function setupDocuments(notice) {
  const input = $("upload");
  const bar = $("upload-progress");
  const status = $("upload-status");
  input.addEventListener("change", async () => {
    const file = input.files[0];
    if (!file) return;
    bar.hidden = false;
    delete status.dataset.done;
    bar.value = 0;
    setText(status, `Uploading ${file.name}…`);
    try {
      const result = await api.upload(file, (fraction) => {
        bar.value = Math.round(fraction * 100);
        if (fraction >= 1) setText(status, `Ingesting ${file.name}…`);
      });
      setText(status, `${file.name}: ${result.status}, ${result.chunks} chunk${result.chunks === 1 ? "" : "s"}`);
      status.dataset.done = "true";
    } catch (e) {
      setText(status, `${file.name}: ${e.message}`);
      status.dataset.done = "error";
    } finally {
      bar.hidden = true;
      input.value = "";
    }
    await loadDocuments(notice);
  });
  loadDocuments(notice);
}
