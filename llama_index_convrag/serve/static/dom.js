// DOM helpers. Every piece of text goes in through text nodes (textContent), never as HTML:
// an answer or a passage that contains markup or a script shows as text.

/** el("button", {class: "x", onclick: f}, "text", child) */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) { node.replaceChildren(); return node; }

export function setText(node, text) { node.textContent = text; return node; }

const MARKER = /\[(\d{1,3})\]/g;

/** Answer text as text nodes, with each [n] a button that calls open(n). */
export function answerNodes(text, open) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(MARKER)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const n = Number(match[1]);
    nodes.push(el("button", { type: "button", class: "cite", dataset: { marker: String(n) },
                              "aria-label": `Show source ${n}`, onclick: () => open(n) }, `[${n}]`));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}
