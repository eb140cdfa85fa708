/**
 * Tables wider than their box scroll sideways, but a scrollbar is easy to miss (overlay
 * scrollbars, or one at the bottom of a long table): the wrapper says which sides hold more
 * (`data-more-left`, `data-more-right`) and the stylesheet shades those edges.
 */
export function watchOverflow(wrap: HTMLElement): () => void {
  const update = (): void => {
    const more = wrap.scrollWidth - wrap.clientWidth;
    wrap.toggleAttribute("data-more-left", more > 1 && wrap.scrollLeft > 1);
    wrap.toggleAttribute("data-more-right", more > 1 && wrap.scrollLeft < more - 1);
  };
  wrap.addEventListener("scroll", update, { passive: true });
  const observer = new ResizeObserver(update);
  observer.observe(wrap);
  const table = wrap.firstElementChild;
  if (table) observer.observe(table);
  update();
  return () => {
    observer.disconnect();
    wrap.removeEventListener("scroll", update);
  };
}
