// The HTTP API of `convrag serve` (docs/SERVE.md): JSON calls, SSE turns over fetch, uploads with progress.
// The API key, when the server needs one, is asked for once and kept in localStorage.

const KEY_NAME = "convrag.apiKey";

export class APIError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || null;
  }
}

let askKey = async () => null;

/** Set the function that asks the user for an API key (resolves to the key, or null). */
export function onKeyNeeded(fn) { askKey = fn; }

export function apiKey() { return localStorage.getItem(KEY_NAME); }
export function forgetKey() { localStorage.removeItem(KEY_NAME); }

function headers(extra) {
  const h = Object.assign({}, extra);
  const key = apiKey();
  if (key) h["Authorization"] = `Bearer ${key}`;
  return h;
}

async function readError(response) {
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  return new APIError(response.status, body);
}

let pendingAsk = null;

/** Ask for a key once for every call that got 401 at the same time; null when the person gave none. */
async function newKey(message) {
  if (pendingAsk === null) {
    pendingAsk = askKey(message).then((key) => {
      pendingAsk = null;
      if (key) localStorage.setItem(KEY_NAME, key);
      return key;
    });
  }
  return pendingAsk;
}

/** fetch with the key; a 401 asks for a key (again, while the key given is refused) and tries again. */
async function send(path, init) {
  for (;;) {
    const response = await fetch(path, Object.assign({}, init, { headers: headers(init.headers) }));
    if (response.status !== 401) return response;
    const error = await readError(response);
    if (!(await newKey(error.message))) throw error;
  }
}

/** A JSON call: the parsed body (null for 204), or an APIError. */
export async function call(method, path, body) {
  const init = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { "Content-Type": "application/json" };
  }
  const response = await send(path, init);
  if (!response.ok) throw await readError(response);
  return response.status === 204 ? null : response.json();
}

/** Parse one SSE block ("event: x\ndata: {...}") into [event, data]. */
function parseEvent(block) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("id:")) id = Number(line.slice(3).trim());
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return null;  // keep-alive comments and the retry field carry no data
  return [event, JSON.parse(data.join("\n")), id];
}

/** POST a turn (or GET a turn's events, body null) and call onEvent(name, data, id) for each server-sent event;
 * abort with signal. */
export async function stream(path, body, onEvent, signal, lastEventId) {
  const headers = { "Accept": "text/event-stream" };
  if (body !== null) headers["Content-Type"] = "application/json";
  if (lastEventId) headers["Last-Event-ID"] = String(lastEventId);
  const response = await send(path, {
    method: body === null ? "GET" : "POST", body: body === null ? undefined : JSON.stringify(body), signal, headers,
  });
  if (!response.ok) throw await readError(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const parsed = parseEvent(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (parsed) onEvent(parsed[0], parsed[1], parsed[2]);
    }
  }
}

/** PUT a file's bytes to `path` (a knowledge base's documents/{name}); onProgress(fraction) while it uploads. */
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const xhr = new XMLHttpRequest();
      xhr.open("PUT", path);
      const key = apiKey();
      if (key) xhr.setRequestHeader("Authorization", `Bearer ${key}`);
      xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); };
      xhr.upload.onload = () => onProgress(1);
      xhr.onerror = () => reject(new APIError(0, { error: { message: "the upload failed (network)" } }));
      xhr.onload = async () => {
        let body = null;
        try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
        if (xhr.status === 401 && (await newKey(new APIError(401, body).message))) { attempt(); return; }
        if (xhr.status >= 200 && xhr.status < 300) resolve(body);
        else reject(new APIError(xhr.status, body));
      };
      xhr.send(file);
    };
    attempt();
  });
}
