// A source on the page: when the answer read the matched chunk inside a wider passage (its neighbouring chunks),
// the passage is shown with that chunk marked. Spans come from the server in characters (code points).

/** [start, end] of the matched chunk in source.text: a stored citation's span, or a live reference's widening
 *  record (its spans count from the passage, which ends the reference's text after its metadata header). */
export function matchedSpan(source, length) {
  if (Array.isArray(source.span) && source.span.length === 2) return source.span;
  const widened = (source.metadata || {}).convrag_widened;
  const best = widened && Array.isArray(widened.matched) && widened.matched[0];
  if (!best || typeof widened.length !== "number") return null;
  const offset = length - widened.length;
  return offset >= 0 ? [best[1] + offset, best[2] + offset] : null;
}

/** Fill box with source.text, the matched chunk in a <mark class="matched">; returns the mark, or null. */
export function showPassageText(box, source) {
  const chars = Array.from(source.text || "");
  const span = matchedSpan(source, chars.length);
  if (!span || span[0] < 0 || span[1] > chars.length || span[0] >= span[1]) {
    box.textContent = chars.join("");
    return null;
  }
  const mark = document.createElement("mark");
  mark.className = "matched";
  mark.textContent = chars.slice(span[0], span[1]).join("");
  box.replaceChildren(document.createTextNode(chars.slice(0, span[0]).join("")), mark,
                      document.createTextNode(chars.slice(span[1]).join("")));
  return mark;
}
