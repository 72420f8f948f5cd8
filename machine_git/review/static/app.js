// machine review: keyboard, live updates and charts. Loaded as a file (the
// Content-Security-Policy forbids inline script); the pages work without it,
// by their buttons and links.
(function () {
  "use strict";

  const body = document.body;
  const POLL_MS = 2000;
  let busy = false; // a form was sent: ignore keys until the next page

  // -- keyboard -------------------------------------------------------------

  function typing(target) {
    return (
      target instanceof HTMLElement &&
      (target.isContentEditable ||
        ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
    );
  }

  function send(id) {
    const form = document.getElementById(id);
    if (!form || busy) return false;
    busy = true;
    form.requestSubmit();
    return true;
  }

  function follow(key) {
    const link = document.querySelector(`a[data-key="${key}"]`);
    if (!link || busy) return false;
    busy = true;
    window.location.assign(link.href);
    return true;
  }

  function openEditor() {
    const editor = document.getElementById("rewrite");
    if (!editor) return false;
    editor.hidden = false;
    const text = document.getElementById("rewrite-text");
    text.focus();
    text.setSelectionRange(text.value.length, text.value.length);
    return true;
  }

  function closeEditor() {
    const editor = document.getElementById("rewrite");
    if (!editor || editor.hidden) return false;
    editor.hidden = true;
    document.activeElement.blur();
    return true;
  }

  function toggleThinking() {
    body.classList.toggle("show-thinking");
    return true;
  }

  const KEYS = {
    g: () => send("label-good"),
    b: () => send("label-bad"),
    r: openEditor,
    n: () => follow("n"),
    p: () => follow("p"),
    s: () => follow("s"),
    u: () => send("undo"),
    t: toggleThinking,
  };

  document.addEventListener("keydown", (event) => {
    const editing = event.target instanceof HTMLElement && event.target.id === "rewrite-text";
    if (editing && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send("rewrite");
      return;
    }
    if (event.key === "Escape" && closeEditor()) {
      event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const action = KEYS[event.key];
    if (action && action()) event.preventDefault();
  });

  for (const [id, action] of [
    ["open-editor", openEditor],
    ["close-editor", closeEditor],
    ["toggle-thinking", toggleThinking],
  ]) {
    const button = document.getElementById(id);
    if (button) button.addEventListener("click", action);
  }
  for (const form of document.querySelectorAll("form[method=post]")) {
    form.addEventListener("submit", () => {
      busy = true;
    });
  }

  // -- live: poll the head, refresh what depends on it --------------------------

  async function refreshLive() {
    for (const region of document.querySelectorAll("[data-live]")) {
      const answer = await fetch(region.dataset.live, { cache: "no-store" });
      // Server-rendered and autoescaped, like the page itself.
      if (answer.ok) region.innerHTML = await answer.text();
    }
  }

  function showCounts(counts) {
    const badge = document.getElementById("queue-count");
    if (badge) badge.textContent = String(counts.observed || 0);
    const line = document.getElementById("counts");
    if (!line) return;
    line.replaceChildren(
      ...Object.entries(counts).map(([kind, n]) => {
        const span = document.createElement("span");
        span.textContent = `${kind} ${n}`;
        return span;
      }),
    );
  }

  async function poll() {
    const row = body.dataset.row;
    const url = "/api/head" + (row ? `?row=${encodeURIComponent(row)}` : "");
    try {
      const answer = await fetch(url, { cache: "no-store" });
      if (answer.ok) {
        const state = await answer.json();
        showCounts(state.counts);
        if (row && body.dataset.blob && state.row_blob !== body.dataset.blob) {
          document.getElementById("stale").hidden = false;
        }
        if (state.head !== body.dataset.head) {
          body.dataset.head = state.head;
          const short = document.getElementById("head-short");
          if (short) short.textContent = state.head.slice(0, 12);
          if (body.dataset.reload === "on-change" && !busy) {
            window.location.reload();
            return;
          }
          await refreshLive();
        }
      }
    } catch (error) {
      // the server stopped or restarted: keep trying quietly
    }
    window.setTimeout(poll, POLL_MS);
  }

  window.setTimeout(poll, POLL_MS);

  // -- charts (uPlot, shipped in static/vendor) ------------------------------------

  const COLORS = ["#2957c7", "#1f7a3f", "#b3261e", "#7a5a00", "#5b3aa6", "#0f7c8c"];

  // Axis and legend numbers: short, and readable for learning rates too.
  function number(v) {
    if (v == null) return "–";
    if (v === 0) return "0";
    const size = Math.abs(v);
    if (size >= 1e5 || size < 1e-3) return v.toExponential(1);
    return String(Number(v.toPrecision(4)));
  }

  function drawChart(holder) {
    const data = JSON.parse(document.getElementById(holder.dataset.chart).textContent);
    const names = data.xnames.length ? data.xnames : null;
    const options = {
      title: data.title,
      width: Math.max(320, holder.clientWidth - 4),
      height: 230,
      scales: { x: { time: false } },
      series: [
        {
          label: data.xlabel,
          value: (u, v) => (v == null ? "–" : names ? names[v] : v),
        },
        ...data.series.map((s, i) => ({
          label: s.label,
          stroke: s.color || COLORS[i % COLORS.length],
          value: (u, v) => number(v),
          width: 2,
          points: { show: names !== null || data.x.length < 40 },
        })),
      ],
      axes: [
        names
          ? { label: data.xlabel, incrs: [1], values: (u, splits) => splits.map((v) => names[v] ?? "") }
          : { label: data.xlabel },
        { size: 64, values: (u, splits) => splits.map(number) },
      ],
    };
    new window.uPlot(options, [data.x, ...data.series.map((s) => s.values)], holder);
    holder.dataset.drawn = "true";
  }

  if (window.uPlot) {
    for (const holder of document.querySelectorAll("[data-chart]")) drawChart(holder);
  }
})();
