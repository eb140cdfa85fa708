/** The live log tail: bounded, and it follows new lines only while scrolled to the bottom. */

import { el } from "../../ui/dom";

export class LogView {
  readonly root = el("pre", { class: "log", "aria-live": "polite" });
  private readonly lines: string[] = [];

  constructor(readonly maxLines = 1000) {}

  /** `replace`: the recent lines a (re)connected stream starts with. */
  add(lines: string[], replace: boolean): void {
    if (replace) this.lines.length = 0;
    this.lines.push(...lines);
    if (this.lines.length > this.maxLines) this.lines.splice(0, this.lines.length - this.maxLines);
    const pre = this.root;
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = this.lines.join("\n");
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
}
