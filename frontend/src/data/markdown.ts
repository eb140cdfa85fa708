/**
 * A small, safe markdown subset for an experiment's notes, rendered as DOM nodes (never HTML
 * text, so nothing in a note can run): `#`-`###` headings, paragraphs, `-`/`*`/`1.` lists,
 * fenced code, and inline `code`, **bold**, *italic* and [links](https://...) (http, https
 * and relative links only).
 */

type Node_ = Node;

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\([^)\s]+\))/g;

export function inline(text: string): Node_[] {
  const out: Node_[] = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(document.createTextNode(text.slice(last, at)));
    const token = m[0];
    if (m[1]) out.push(tag("code", token.slice(1, -1)));
    else if (m[2]) out.push(tag("strong", token.slice(2, -2)));
    else if (m[3]) out.push(tag("em", token.slice(1, -1)));
    else {
      const [, label, href] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(token) as RegExpExecArray;
      if (/^(https?:\/\/|#|\/)/i.test(href)) {
        const a = tag("a", label) as HTMLAnchorElement;
        a.href = href;
        a.rel = "noopener noreferrer";
        if (/^https?:/i.test(href)) a.target = "_blank";
        out.push(a);
      } else out.push(document.createTextNode(token));
    }
    last = at + token.length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

function tag(name: string, text: string): HTMLElement {
  const node = document.createElement(name);
  node.textContent = text;
  return node;
}

function withInline(name: string, text: string): HTMLElement {
  const node = document.createElement(name);
  node.append(...inline(text));
  return node;
}

export function renderMarkdown(source: string): DocumentFragment {
  const frag = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let para: string[] = [];
  let list: HTMLElement | null = null;
  const endPara = () => {
    if (para.length) frag.append(withInline("p", para.join(" ")));
    para = [];
  };
  const endList = () => {
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      endPara();
      endList();
      const code: string[] = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      const pre = document.createElement("pre");
      pre.append(tag("code", code.join("\n")));
      frag.append(pre);
      continue;
    }
    const heading = /^(#{1,3})\s+(.*)$/.exec(line);
    const item = /^\s*(?:([-*])|(\d+)\.)\s+(.*)$/.exec(line);
    if (heading) {
      endPara();
      endList();
      frag.append(withInline(`h${heading[1].length + 2}`, heading[2])); // h3-h5 inside a panel
    } else if (item) {
      endPara();
      const kind = item[1] ? "ul" : "ol";
      if (!list || list.tagName.toLowerCase() !== kind) {
        list = document.createElement(kind);
        frag.append(list);
      }
      list.append(withInline("li", item[3]));
    } else if (!line.trim()) {
      endPara();
      endList();
    } else {
      endList();
      para.push(line.trim());
    }
  }
  endPara();
  return frag;
}
