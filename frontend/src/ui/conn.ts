/** The header's connection indicator: "live" while every open stream is connected, else "offline". */

const streams = new Map<object, boolean>();

function render(): void {
  const node = document.getElementById("conn");
  if (!node) return;
  if (streams.size === 0) {
    node.textContent = "";
    node.className = "conn";
    return;
  }
  const online = [...streams.values()].every(Boolean);
  node.textContent = online ? "● live" : "○ offline";
  node.className = `conn ${online ? "online" : "offline"}`;
  node.setAttribute("data-state", online ? "online" : "offline");
}

export function trackStream(key: object, online: boolean): void {
  streams.set(key, online);
  render();
}

export function untrackStream(key: object): void {
  streams.delete(key);
  render();
}
