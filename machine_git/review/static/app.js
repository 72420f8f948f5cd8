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
    if (!(target instanceof HTMLElement)) return false;
    if (target instanceof HTMLInputElement && ["radio", "checkbox"].includes(target.type)) {
      return false; // a tick box takes no letters: keys still act
    }
    return target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName);
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

  // -- the rewrite: sent as the part that changed, never lost ------------------

  // How many UTF-16 units of a and b agree from the start (and from the end,
  // not overlapping it), moved off the middle of a surrogate pair.
  function splice(base, text) {
    let start = 0;
    const most = Math.min(base.length, text.length);
    while (start < most && base.charCodeAt(start) === text.charCodeAt(start)) start++;
    if (start > 0 && /[\uD800-\uDBFF]/.test(base[start - 1])) start--;
    let end = 0;
    while (
      end < most - start &&
      base.charCodeAt(base.length - 1 - end) === text.charCodeAt(text.length - 1 - end)
    )
      end++;
    if (end > 0 && /[\uDC00-\uDFFF]/.test(base[base.length - end])) end--;
    return { start, end, middle: text.slice(start, text.length - end) };
  }

  // Python counts characters as code points: a pair of surrogates is one.
  function codePoints(text) {
    const pairs = text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
    return text.length - (pairs ? pairs.length : 0);
  }

  function rewriteBody(form) {
    const text = document.getElementById("rewrite-text");
    const data = new URLSearchParams();
    for (const [name, value] of new FormData(form)) {
      if (name !== "text") data.append(name, value);
    }
    if (text.dataset.base !== "answer") {
      data.append("text", text.value); // a draft came back: send it whole
      return data;
    }
    const base = text.defaultValue;
    const part = splice(base, text.value);
    data.append("keep_start", String(codePoints(base.slice(0, part.start))));
    data.append("keep_end", String(codePoints(base.slice(base.length - part.end))));
    data.append("base_length", String(codePoints(base)));
    data.append("middle", part.middle);
    return data;
  }

  // The reason a failed save gives, from whichever page or line came back.
  async function reasonOf(answer) {
    const type = answer.headers.get("content-type") || "";
    const text = await answer.text();
    if (!type.startsWith("text/html")) return text.trim() || `HTTP ${answer.status}`;
    // DOMParser's document is inert: nothing in it runs or loads.
    const page = new DOMParser().parseFromString(text, "text/html");
    const line = page.querySelector(".banner[role=alert], .error-line");
    return line ? line.textContent.trim() : `HTTP ${answer.status}`;
  }

  function showSaveError(message) {
    const line = document.getElementById("rewrite-error");
    line.textContent = `Not saved: ${message}. Your text is still here.`;
    line.hidden = false;
    document.getElementById("rewrite-status").textContent = "";
    busy = false;
  }

  async function saveRewrite(form) {
    if (busy) return;
    busy = true;
    document.getElementById("rewrite-error").hidden = true;
    document.getElementById("rewrite-status").textContent = "saving…";
    try {
      const answer = await fetch(form.action, {
        method: "POST",
        body: rewriteBody(form),
        credentials: "same-origin",
      });
      if (answer.ok && answer.redirected) {
        window.location.assign(answer.url);
        return;
      }
      showSaveError(await reasonOf(answer));
    } catch (error) {
      showSaveError("the server did not answer (is machine review still running?)");
    }
  }

  const rewriteForm = document.getElementById("rewrite");
  if (rewriteForm) {
    rewriteForm.addEventListener("submit", (event) => {
      event.preventDefault();
      saveRewrite(rewriteForm);
    });
  }

  // -- notes, selections, the shortcut list -----------------------------------

  function openNote() {
    const box = document.getElementById("note-box");
    if (!box) return false;
    box.hidden = false;
    document.getElementById("note-text").focus();
    return true;
  }

  function closeNote() {
    const box = document.getElementById("note-box");
    if (!box || box.hidden) return false;
    box.hidden = true;
    document.activeElement.blur();
    return true;
  }

  function label(verdict) {
    const note = document.getElementById("note-text");
    const form = document.getElementById(`label-${verdict}`);
    if (form && note) form.querySelector("[data-note]").value = note.value;
    return send(`label-${verdict}`);
  }

  function togglePick() {
    const card = document.getElementById("card");
    if (!card) return false;
    const box = document.querySelector(`input.pick[value="${card.dataset.rowId}"]`);
    if (!box) return false;
    box.checked = !box.checked;
    return true;
  }

  function chooseAll() {
    const all = document.getElementById("bulk-all");
    if (!all) return false;
    all.checked = true;
    return true;
  }

  function bulk(verdict) {
    const button = document.getElementById(`bulk-${verdict}`);
    if (!button || busy) return false;
    busy = true;
    document.getElementById("bulk").requestSubmit(button);
    return true;
  }

  function focusFilter() {
    const field = document.getElementById("queue-text") || document.querySelector("input[name=q]");
    if (!field) return false;
    field.focus();
    field.select();
    return true;
  }

  function toggleKeys() {
    const overlay = document.getElementById("keys-overlay");
    if (!overlay) return false;
    overlay.hidden = !overlay.hidden;
    return true;
  }

  function closeKeys() {
    const overlay = document.getElementById("keys-overlay");
    if (!overlay || overlay.hidden) return false;
    overlay.hidden = true;
    return true;
  }

  // -- the project's own label fields (settings.json labels) -------------------

  function selectedSpan(answer) {
    const selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    const range = selection.getRangeAt(0);
    if (!answer.contains(range.startContainer) || !answer.contains(range.endContainer)) {
      return null;
    }
    const before = document.createRange();
    before.setStart(answer, 0);
    before.setEnd(range.startContainer, range.startOffset);
    const start = codePoints(before.toString());
    return { start, end: start + codePoints(range.toString()) };
  }

  function markSpan(form) {
    const answer = document.getElementById("answer-text");
    const span = answer ? selectedSpan(answer) : null;
    if (!span) {
      document.getElementById("label-status").textContent =
        "Select some text of the final answer first, then press the key again.";
      return true;
    }
    form.querySelector("input[name=start]").value = String(span.start);
    form.querySelector("input[name=end]").value = String(span.end);
    return sendForm(form);
  }

  function sendForm(form) {
    if (busy) return false;
    busy = true;
    form.requestSubmit();
    return true;
  }

  function fieldKey(key) {
    for (const form of document.querySelectorAll("#label-fields form[data-key]")) {
      if (form.dataset.key !== key) continue;
      if (form.dataset.focus) {
        const field = document.getElementById(form.dataset.focus);
        field.focus();
        field.select();
        return true;
      }
      if (form.dataset.span) return markSpan(form);
      return sendForm(form);
    }
    return false;
  }

  for (const form of document.querySelectorAll("#label-fields form[data-span]")) {
    form.addEventListener("submit", (event) => {
      if (!form.querySelector("input[name=start]").value) {
        event.preventDefault();
        busy = false;
        markSpan(form);
      }
    });
  }

  const KEYS = {
    g: () => label("good"),
    b: () => label("bad"),
    r: openEditor,
    N: openNote,
    n: () => follow("n"),
    p: () => follow("p"),
    s: () => follow("s"),
    "]": () => follow("]"),
    "[": () => follow("["),
    "/": focusFilter,
    x: togglePick,
    A: chooseAll,
    G: () => bulk("good"),
    B: () => bulk("bad"),
    u: () => send("undo"),
    U: () => send("redo"),
    t: toggleThinking,
    "?": toggleKeys,
  };
  window.machineReviewKeys = Object.keys(KEYS); // what the overlay's test checks

  document.addEventListener("keydown", (event) => {
    const target = event.target instanceof HTMLElement ? event.target : null;
    const editing = target !== null && target.id === "rewrite-text";
    if (editing && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      if (rewriteForm) saveRewrite(rewriteForm);
      return;
    }
    if (target !== null && target.id === "note-text" && event.key === "Enter") {
      event.preventDefault();
      label("good");
      return;
    }
    if (event.key === "Escape" && (closeKeys() || closeEditor() || closeNote())) {
      event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const action = KEYS[event.key];
    if (action ? action() : fieldKey(event.key)) event.preventDefault();
  });

  for (const [id, action] of [
    ["open-editor", openEditor],
    ["close-editor", closeEditor],
    ["open-note", openNote],
    ["toggle-thinking", toggleThinking],
    ["show-keys", toggleKeys],
  ]) {
    const button = document.getElementById(id);
    if (button) button.addEventListener("click", action);
  }
  const overlay = document.getElementById("keys-overlay");
  if (overlay) {
    overlay.addEventListener("click", (event) => {
      if (event.target === overlay) overlay.hidden = true;
    });
  }
  for (const form of document.querySelectorAll("form[method=post]")) {
    if (form.id === "rewrite") continue;
    form.addEventListener("submit", (event) => {
      if (!event.defaultPrevented) busy = true;
    });
  }

  // -- live: poll the head, refresh what depends on it --------------------------

  // The one place the script sets HTML: a fragment the server rendered and
  // autoescaped, like the page itself.
  async function fill(region, url) {
    const answer = await fetch(url, { cache: "no-store" });
    if (!answer.ok) return;
    region.innerHTML = await answer.text();
  }

  async function refreshLive() {
    for (const region of document.querySelectorAll("[data-live]")) {
      const ticked = new Set(
        [...region.querySelectorAll("input.pick:checked")].map((box) => box.value),
      );
      await fill(region, region.dataset.live);
      for (const box of region.querySelectorAll("input.pick")) {
        if (ticked.has(box.value)) box.checked = true; // ticks survive a refresh
      }
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

  // Parts a page loads after it is shown (a row's history: a walk of history).
  async function loadLater() {
    for (const region of document.querySelectorAll("[data-load]")) {
      try {
        await fill(region, region.dataset.load);
      } catch (error) {
        // the link stays: it opens the same list
      }
    }
  }
  loadLater();
  }

  window.setTimeout(poll, POLL_MS);

  // Parts a page loads after it is shown (a row's history: a walk of history).
  async function loadLater() {
    for (const region of document.querySelectorAll("[data-load]")) {
      try {
        await fill(region, region.dataset.load);
      } catch (error) {
        // the link stays: it opens the same list
      }
    }
  }
  loadLater();

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
