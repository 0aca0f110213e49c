// sagents console: live updates over Server-Sent Events. Text is only ever set with
// textContent (never parsed as HTML), and control characters are shown as escapes.
"use strict";

(function () {
  const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  function printable(text) {
    return String(text).replace(UNPRINTABLE, function (c) {
      const code = c.charCodeAt(0);
      return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0")
        : "\\u" + code.toString(16).padStart(4, "0");
    });
  }

  function num(value) {
    return value === null || value === undefined ? "" : String(+value.toFixed(3));
  }

  function setText(el, text) {
    if (el) { el.textContent = printable(text); }
  }

  const body = document.body;
  const base = body.dataset.base || "/console";
  const page = body.dataset.page;
  let source = null;  // the page's event stream (see connect)
  const FINAL = new Set(["ok", "error", "timeout", "cancelled", "rejected", "output_limit", "killed", "sandbox_error"]);

  function cell(row, cls, text) {
    const td = document.createElement("td");
    if (cls) { td.className = cls; }
    setText(td, text);
    row.appendChild(td);
    return td;
  }

  function runRow(event) {
    const table = document.querySelector("#runs tbody");
    if (!table) { return; }
    let row = table.querySelector('tr[data-script-id="' + CSS.escape(event.script_id) + '"]');
    if (!row) {
      const empty = table.querySelector("tr.empty");
      if (empty) { empty.remove(); }
      row = document.createElement("tr");
      row.dataset.scriptId = event.script_id;
      const first = document.createElement("td");
      const link = document.createElement("a");
      link.href = base + "/runs/" + encodeURIComponent(event.script_id);
      setText(link, event.script_id);
      first.appendChild(link);
      row.appendChild(first);
      const started = (event.ts || 0) - (event.elapsed_s || 0);  // seconds, as the server's column
      cell(row, "started", started > 0 ? new Date(started * 1000).toISOString().slice(0, 19).replace("T", " ") : "");
      cell(row, "", "run_script");
      cell(row, "", "");
      cell(row, "status", "");
      cell(row, "calls", "");
      cell(row, "failures", "");
      cell(row, "elapsed", "");
      cell(row, "progress", "");
      cell(row, "description", event.description || "");
      table.insertBefore(row, table.firstChild);
    }
    const status = row.querySelector(".status");
    setText(status, event.status);
    status.className = "status status-" + event.status;
    setText(row.querySelector(".calls"), event.calls);
    setText(row.querySelector(".failures"), event.failures);
    setText(row.querySelector(".elapsed"), num(event.elapsed_s) + " s");
    const progressCell = row.querySelector(".progress");
    if (event.total) {
      let bar = progressCell.querySelector("progress");
      if (!bar) {
        progressCell.textContent = "";
        bar = document.createElement("progress");
        progressCell.appendChild(bar);
        const count = document.createElement("span");
        count.className = "count";
        progressCell.appendChild(document.createTextNode(" "));
        progressCell.appendChild(count);
      }
      bar.max = event.total;
      bar.value = event.done || 0;
      setText(progressCell.querySelector(".count"), num(event.done || 0) + "/" + num(event.total));
    }
  }

  function runPage(event) {
    if (event.type === "snapshot") {
      const streams = event.streams || {};
      for (const name of ["stdout", "stderr", "info"]) {
        setText(document.getElementById("pane-" + name), streams[name] || "");
      }
      if (event.progress && event.progress.type) { runProgress(event.progress); }
    } else if (event.type === "tool_progress") {
      const pane = document.getElementById("pane-" + event.stream);
      if (pane && event.text) {
        pane.appendChild(document.createTextNode(printable(event.text)));
        pane.scrollTop = pane.scrollHeight;
      }
    } else if (event.type === "script.progress") {
      runProgress(event);
    }
  }

  function runProgress(event) {
    const status = document.getElementById("status");
    setText(status, event.status);
    status.className = "status status-" + event.status;
    setText(document.getElementById("calls"), event.calls);
    setText(document.getElementById("failures"), event.failures);
    setText(document.getElementById("elapsed"), num(event.elapsed_s) + " s");
    if (event.total) {
      document.getElementById("progress").classList.remove("hidden");
      const bar = document.getElementById("progress-bar");
      bar.max = event.total;
      bar.value = event.done || 0;
      setText(document.getElementById("progress-count"), num(event.done || 0) + "/" + num(event.total));
    }
    setText(document.getElementById("progress-message"), event.message || "");
    if (FINAL.has(event.status) && body.dataset.live === "1") {
      body.dataset.live = "0";  // the stream stays open: the navigation's count stays live
      // The records are complete once the run has ended: show them (calls, output, exit code).
      window.setTimeout(refresh, 500);
    }
  }

  // A page brings itself up to date by fetching itself and swapping in its <main>, never by
  // reloading: a reload is a navigation, which loses what the reader was looking at and races
  // any navigation of their own (a click, a link). The fetched HTML is parsed inert
  // (DOMParser runs no script, and the CSP forbids inline handlers); it is the page the server
  // renders, with every model-written text escaped. One fetch at a time; a request that comes
  // during one runs once after it.
  let refreshing = false;
  let again = false;

  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    again = false;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok || response.redirected) { throw new Error("status " + response.status); }
        return response.text();
      })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        const main = document.querySelector("main");
        if (fresh && main && !fresh.isEqualNode(main)) {  // unchanged: keep what is shown
          main.replaceWith(document.importNode(fresh, true));
        }
      })
      .catch(function () { window.location.reload(); })  // logged out, or the gateway went away
      .finally(function () {
        refreshing = false;
        if (again) { refresh(); }
      });
  }

  // The navigation's count of approvals waiting, kept live on every page.
  function showPending(count) {
    const link = document.querySelector('nav a[href$="/approvals"]');
    if (!link) { return; }
    let badge = document.getElementById("nav-pending");
    if (count > 0 && !badge) {
      badge = document.createElement("span");
      badge.className = "count";
      badge.id = "nav-pending";
      badge.title = "approvals waiting";
      link.append(" ", badge);
    }
    if (count > 0) {
      badge.textContent = String(count);
    } else if (badge) {
      badge.remove();
    }
  }

  function connect(query) {
    if (!window.EventSource) { return; }
    source = new EventSource(base + "/events" + query);
    source.onmessage = function (message) {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.type === "approvals.state") { showPending((event.ids || []).length); }
      if (page === "runs" && event.type === "script.progress") {
        runRow(event);
      } else if (page === "run") {
        runPage(event);
      } else if (page === "approvals" && event.type === "approvals.changed") {
        refresh();
      } else if (page === "approvals" && event.type === "approvals.state") {
        const shown = document.getElementById("approvals").dataset.pending || "";
        if (shown !== (event.ids || []).join(",")) { refresh(); }
      } else if (page === "background" && (event.type === "background.done"
                 || (event.type === "script.progress" && FINAL.has(event.status)))) {
        window.setTimeout(refresh, 300);
      }
    };
  }

  // Every page listens: the lists for their rows, a run's page for its run (nothing more once
  // it has ended), and all of them for the navigation's count of approvals waiting.
  if (document.querySelector("nav")) {  // not on the login page: nothing to listen to there
    const query = page === "run" ? "?run=" + encodeURIComponent(body.dataset.run) : "";
    connect(query);
    // The stream ends when the page is left and starts again when the browser brings the page
    // back from its back/forward cache. Not on "beforeunload": with a handler for it, Chromium
    // asks the page before every navigation away, and a navigation started while a form's
    // answer was loading (an approval's Allow or Deny) then waited forever, never sent.
    window.addEventListener("pagehide", function () { if (source) { source.close(); } });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted) { connect(query); }
    });
  }
})();
