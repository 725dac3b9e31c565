// The documents panel of the chosen knowledge base: its files by name, upload with progress and remove for
// editors and owners; readers see the list only.

import * as api from "./api.js";
import { clear, el, setText } from "./dom.js";

const $ = (id) => document.getElementById(id);
let current = null;  // {id, name, role} of the knowledge base shown
const CAN_EDIT = new Set(["editor", "owner"]);

function docsPath(name) {
  const base = `/v1/knowledge-bases/${encodeURIComponent(current.id)}/documents`;
  return name === undefined ? base : `${base}/${name.split("/").map(encodeURIComponent).join("/")}`;
}

export async function loadDocuments(notice) {
  if (!current) return;
  const editable = CAN_EDIT.has(current.role);
  $("upload-label").hidden = !editable;
  setText($("docs-role"), editable ? `${current.name}: you can add and remove files (${current.role}).`
                                   : `${current.name}: you can read it (${current.role}); an editor adds files.`);
  let docs;
  try { docs = (await api.call("GET", docsPath())).data; }
  catch (e) { notice(e.message); return; }
  const list = clear($("document-list"));
  if (!docs.length) list.append(el("li", { class: "empty" }, editable ? "No documents yet: add a file." : "No documents yet."));
  for (const d of docs) {
    list.append(el("li", { dataset: { name: d.name } },
      el("span", { class: "doc-name", title: d.name }, d.name),
      el("span", { class: "doc-chunks" }, `${d.chunks} chunk${d.chunks === 1 ? "" : "s"}`),
      editable ? el("button", { type: "button", class: "remove", "aria-label": `Remove ${d.name}`, onclick: async () => {
        if (!window.confirm(`Remove ${d.name} from ${current.name}?`)) return;
        try { await api.call("DELETE", docsPath(d.name)); }
        catch (e) { notice(e.message); }
        await loadDocuments(notice);
      } }, "Remove") : null));
  }
}

/** Show the documents of knowledge base `kb` ({id, name, role}). */
export async function showKnowledgeBase(kb, notice) {
  current = kb;
  await loadDocuments(notice);
}

export function setupDocuments(notice) {
  const input = $("upload");
  const bar = $("upload-progress");
  const status = $("upload-status");
  input.addEventListener("change", async () => {
    const file = input.files[0];
    if (!file || !current) return;
    bar.hidden = false;
    delete status.dataset.done;
    bar.value = 0;
    setText(status, `Uploading ${file.name}…`);
    try {
      const result = await api.upload(docsPath(file.name), file, (fraction) => {
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
}
