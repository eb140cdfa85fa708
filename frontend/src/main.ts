/** Entry point: mounts the page for the current hash route and unmounts the previous one. */

import "./styles.css";
import { mountCompare } from "./pages/compare";
import { mountDetail } from "./pages/detail/page";
import { mountList } from "./pages/list";
import { mountNew } from "./pages/new";
import { mountStudies } from "./pages/studies";
import { mountStudy } from "./pages/study";
import { mountSweep } from "./pages/sweep";
import { mountSweeps } from "./pages/sweeps";
import { apiToken, setApiToken } from "./api/client";
import { parseRoute } from "./router";
import { clear, el } from "./ui/dom";

type Unmount = () => void;

const root = document.getElementById("app") as HTMLElement;
let unmount: Unmount | null = null;

function render(): void {
  unmount?.();
  unmount = null;
  clear(root);
  // A new page starts at its top (the form's submit button left the window scrolled down to it,
  // and the experiment page then opened with its title, status and Stop off screen).
  window.scrollTo(0, 0);
  const route = parseRoute(location.hash);
  for (const a of document.querySelectorAll<HTMLAnchorElement>("header nav a")) {
    a.classList.toggle("active", parseRoute(a.getAttribute("href") ?? "").name === route.name);
  }
  switch (route.name) {
    case "list":
      unmount = mountList(root, route.query);
      break;
    case "new":
      unmount = mountNew(root, route.query);
      break;
    case "detail":
      unmount = mountDetail(root, route.id as number);
      break;
    case "compare":
      unmount = mountCompare(root, route.query);
      break;
    case "sweeps":
      unmount = mountSweeps(root, route.query);
      break;
    case "sweep":
      unmount = mountSweep(root, route.id as number);
      break;
    case "studies":
      unmount = mountStudies(root, route.query);
      break;
    case "study":
      unmount = mountStudy(root, route.id as number);
      break;
    default:
      document.title = "Not found · Rollout";
      root.appendChild(el("section", { class: "panel" }, el("h1", {}, "Page not found"), el("a", { href: "#/" }, "Back to experiments")));
  }
}

/** The service wants an API token: ask once, keep it in this browser, reload the page. */
function askForToken(): void {
  if (document.getElementById("token-box")) return;
  const input = el("input", { type: "password", name: "api-token", placeholder: "API token", autocomplete: "off" });
  const box = el(
    "form",
    { id: "token-box", class: "panel token-box" },
    el("strong", {}, apiToken() ? "The saved API token was not accepted." : "This service requires an API token."),
    " ",
    input,
    " ",
    el("button", { type: "submit", class: "btn" }, "Save"),
  );
  box.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setApiToken(input.value.trim() || null);
    location.reload();
  });
  document.body.insertBefore(box, root);
}

window.addEventListener("rollout:unauthorized", askForToken);
window.addEventListener("hashchange", render);
render();
