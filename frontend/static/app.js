// Limbic Memory UI: the little that htmx does not do. No inline scripts, no eval (CSP).
(function () {
  "use strict";

  // EventSources opened by htmx's SSE extension, by URL, so the stop button can close one.
  const sources = new Map();
  if (window.htmx && typeof htmx.createEventSource === "function") {
    const create = htmx.createEventSource;
    htmx.createEventSource = function (url) {
      const source = create(url);
      sources.set(url, source);
      return source;
    };
  }

  // --- time: <time datetime> shown in the reader's time zone --------------------------
  const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const dayFormat = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
  const dateFormat = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
  });
  const fullFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      const now = new Date();
      const sameDay = when.toDateString() === now.toDateString();
      const kind = el.dataset.format;
      if (kind === "date") el.textContent = dateFormat.format(when);
      else if (sameDay) el.textContent = timeFormat.format(when);
      else if (kind === "relative") el.textContent = dayFormat.format(when);
      else el.textContent = dayFormat.format(when) + ", " + timeFormat.format(when);
      el.title = fullFormat.format(when);
    });
  }

  // --- the conversation ---------------------------------------------------------------
  function messages() { return document.getElementById("messages"); }

  function scrollToEnd(force) {
    const list = messages();
    if (!list) return;
    const near = list.scrollHeight - list.scrollTop - list.clientHeight < 160;
    if (force || near) list.scrollTop = list.scrollHeight;
  }

  function stopTurn(button) {
    const turn = button.dataset.stop;
    const session = button.dataset.session;
    const stream = document.querySelector('[data-stream="' + CSS.escape(turn) + '"]');
    if (stream) {
      const source = sources.get(stream.getAttribute("sse-connect"));
      if (source) source.close();
      stream.remove();
    }
    button.disabled = true;
    button.textContent = "Stopping…";
    htmx.ajax("GET", "/ui/sessions/" + encodeURIComponent(session) + "/turns/" + encodeURIComponent(turn), {
      target: "#turn-" + turn, swap: "outerHTML",
    });
  }

  // Copy a reply's text (as it was written: markdown, not the rendered page).
  function copyText(button) {
    const text = button.dataset.copy || "";
    const done = function (ok) {
      const label = button.textContent;
      button.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      return;
    }
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
    button.focus();
    done(ok);
  }

  document.addEventListener("click", function (event) {
    const copy = event.target.closest("[data-copy]");
    if (copy) { copyText(copy); return; }
    const stop = event.target.closest("[data-stop]");
    if (stop) { stopTurn(stop); return; }
    const toggle = event.target.closest("[data-drawer]");
    if (toggle) { toggleDrawer(toggle.dataset.drawer); return; }
    const close = event.target.closest("[data-drawer-close]");
    if (close) { toggleDrawer(close.dataset.drawerClose, false); return; }
    const retry = event.target.closest("[data-retry]");
    if (retry) { retryLast(); return; }
  });

  // Enter sends, Shift+Enter is a new line, Esc stops the reply being written.
  document.addEventListener("keydown", function (event) {
    const box = event.target;
    if (box && box.id === "composer-text") {
      if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey &&
          !event.metaKey && !event.isComposing) {
        event.preventDefault();
        if (box.value.trim()) box.form.requestSubmit();
        return;
      }
    }
    if (event.key === "Escape") {
      const stop = document.querySelector("[data-stop]:not([disabled])");
      if (stop && (box === document.body || (box && box.id === "composer-text"))) {
        event.preventDefault();
        stopTurn(stop);
        return;
      }
      const open = document.querySelector(".drawer.open");
      if (open) toggleDrawer(open.id, false);
    }
  });

  // --- drawers (conversation list and memory panel on small screens) --------------------
  function toggleDrawer(id, force) {
    const drawer = document.getElementById(id);
    if (!drawer) return;
    const open = force === undefined ? !drawer.classList.contains("open") : force;
    document.querySelectorAll(".drawer.open").forEach(function (other) {
      if (other !== drawer) other.classList.remove("open");
    });
    drawer.classList.toggle("open", open);
    document.querySelectorAll('[data-drawer="' + id + '"]').forEach(function (b) {
      b.setAttribute("aria-expanded", String(open));
    });
    if (open) {
      const focusable = drawer.querySelector("a, button, input, summary");
      if (focusable) focusable.focus();
    }
  }

  // --- errors: shown inline, with a retry ---------------------------------------------
  let lastFailed = null;

  function flash(node) {
    const box = document.getElementById("flash");
    if (!box) return;
    box.replaceChildren(node);
    box.hidden = false;
  }

  function errorNode(text, canRetry) {
    const wrap = document.createElement("div");
    wrap.className = "error-box";
    const p = document.createElement("p");
    p.textContent = text;  // never innerHTML: the text may come from anywhere
    wrap.appendChild(p);
    const actions = document.createElement("div");
    actions.className = "row";
    if (canRetry) {
      const retry = document.createElement("button");
      retry.type = "button";
      retry.dataset.retry = "1";
      retry.textContent = "Retry";
      actions.appendChild(retry);
    }
    const dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "link";
    dismiss.textContent = "Dismiss";
    dismiss.addEventListener("click", function () { document.getElementById("flash").hidden = true; });
    actions.appendChild(dismiss);
    wrap.appendChild(actions);
    return wrap;
  }

  function retryLast() {
    document.getElementById("flash").hidden = true;
    const elt = lastFailed;
    lastFailed = null;
    if (!elt || !document.body.contains(elt)) return;
    if (elt.tagName === "FORM") elt.requestSubmit();
    else htmx.trigger(elt, "click");
  }

  // Error responses of UI routes are HTML fragments: show them in the flash area.
  document.addEventListener("htmx:beforeSwap", function (event) {
    const xhr = event.detail.xhr;
    if (xhr.status < 400) return;
    event.detail.shouldSwap = false;
    lastFailed = event.detail.requestConfig ? event.detail.requestConfig.elt : null;
    const type = xhr.getResponseHeader("content-type") || "";
    let text = "The request failed (" + xhr.status + ").";
    if (type.indexOf("text/html") === 0) {
      const doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      const found = doc.querySelector(".error-box p");
      if (found) text = found.textContent;
    } else if (type.indexOf("application/json") === 0) {
      try { text = JSON.parse(xhr.responseText).error.message || text; } catch (e) { /* keep */ }
    }
    flash(errorNode(text, xhr.status >= 500 || xhr.status === 403 || xhr.status === 429));
  });

  document.addEventListener("htmx:sendError", function (event) {
    lastFailed = event.detail.elt;
    flash(errorNode("Could not reach the server. Check that it is running.", true));
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "composer" && event.detail.successful) {
      form.reset();
      const box = document.getElementById("composer-text");
      if (box) box.focus();
      const note = document.getElementById("flash");
      if (note) note.hidden = true;
    }
    // A rename or delete from the ⋯ menu: close the menu.
    if (form && form.closest && form.closest("details.session-actions")) {
      const details = form.closest("details");
      if (details) details.open = false;
    }
  });

  // Switching a reply's version swaps its bubble: keep the focus on the button pressed.
  let versionFocus = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail.elt;
    const form = elt && elt.closest ? elt.closest(".versions form") : null;
    const article = form ? form.closest("[data-message]") : null;
    if (!form || !article) { versionFocus = null; return; }
    const next = form.querySelector(".version-next");
    versionFocus = { id: article.dataset.message, cls: next ? "version-next" : "version-prev" };
  });
  document.addEventListener("htmx:afterSettle", function () {
    const wanted = versionFocus;
    versionFocus = null;
    if (!wanted) return;
    const article = document.querySelector('[data-message="' + CSS.escape(wanted.id) + '"]');
    if (!article) return;
    const same = article.querySelector(".versions ." + wanted.cls);
    const other = article.querySelector(".versions button:not([disabled])");
    const target = same && !same.disabled ? same : other;
    if (target) target.focus();
  });

  // The SSE stream failed to open or broke: say so in the reply's bubble.
  document.addEventListener("htmx:sseError", function (event) {
    const stream = event.target.closest ? event.target.closest("[data-stream]") : null;
    if (!stream) return;
    const bubble = document.getElementById("turn-" + stream.dataset.stream);
    if (bubble && !bubble.querySelector(".msg-error")) {
      const p = document.createElement("p");
      p.className = "msg-error";
      p.textContent = "The connection was interrupted; reconnecting…";
      bubble.appendChild(p);
    }
  });

  // New content: local times, range outputs, keep the newest message in view.
  document.addEventListener("htmx:load", function (event) {
    localTimes(event.detail.elt.parentNode || document);
    scrollToEnd(false);
  });
  document.addEventListener("htmx:sseMessage", function () { scrollToEnd(false); });

  document.addEventListener("input", function (event) {
    const el = event.target;
    if (el.dataset && el.dataset.output) {
      const out = document.getElementById(el.dataset.output);
      if (out) out.textContent = Number(el.value).toFixed(2);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    // A link to one message (the memories page's "from:"): shown, not the conversation's end.
    const linked = location.hash.indexOf("#msg-") === 0 ? document.getElementById(location.hash.slice(1)) : null;
    if (linked) {
      linked.classList.add("linked");
      linked.scrollIntoView({ block: "center" });
    } else {
      scrollToEnd(true);
    }
  });
})();
