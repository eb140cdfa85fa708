/**
 * The header's connection indicator: "live" while every open stream is connected, "offline"
 * as soon as one has dropped (it reconnects by itself), "connecting" before the first connect.
 */

/** true: connected, false: dropped, null: not connected yet. */
const streams = new Map<object, boolean | null>();

function render(): void {
  const node = document.getElementById("conn");
  if (!node) return;
  const states = [...streams.values()];
  const state = states.length === 0 ? "" : states.includes(false) ? "offline" : states.includes(null) ? "connecting" : "online";
  node.textContent = { "": "", offline: "○ offline", connecting: "◌ connecting…", online: "● live" }[state];
  node.className = `conn ${state}`;
  if (state) node.setAttribute("data-state", state);
  else node.removeAttribute("data-state");
}

export function trackStream(key: object, online: boolean | null): void {
  streams.set(key, online);
  render();
}

export function untrackStream(key: object): void {
  streams.delete(key);
  render();
}
