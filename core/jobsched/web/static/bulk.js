// jobsched dashboard, Jobs page: select jobs and act on them all at once.
//
// A checkbox per row, one for every row of the page, and, once the page's
// rows are all chosen while more jobs match, "select all N matching this
// filter" (the server takes the newest BULK_CAP of them: the cap is shown).
// An action asks first, naming the action and the count, in a <dialog>; it
// then POSTs {"ids": [...]} or {"filter": {...}} to /api/jobs/bulk/ACTION
// (with the CSRF token of <meta name="csrf-token">) and says what the server
// answered. The selection is kept while the live part (#region) is fetched
// again, and dropped when the filter changes.
(function () {
  "use strict";

  var bar = document.getElementById("bulk");
  var dialog = document.getElementById("bulk-confirm");
  if (!bar || !dialog) { return; }

  var cap = Number(bar.dataset.cap);
  var chosen = new Set();   // ids picked one by one (or a page at a time)
  var everything = false;   // "all matching this filter" is selected
  var filterKey = null;     // the filter the selection was made under
  var pending = null;       // the action the dialog asks about

  var VERBS = { retry: "Retry", requeue: "Requeue", cancel: "Cancel", purge: "Purge" };
  var DONE = { retry: "Retried", requeue: "Requeued", cancel: "Cancelled", purge: "Purged" };
  var EXPLAIN = {
    retry: "Failed, timed-out and cancelled jobs among them run again, now. " +
      "The others are left as they are.",
    requeue: "Failed, timed-out and cancelled jobs among them run again, now. " +
      "The others are left as they are.",
    cancel: "Waiting jobs among them are cancelled (with the jobs that depend on them); " +
      "running ones are asked to stop. Finished ones are left as they are.",
    purge: "Finished jobs among them are deleted with their history, for good. " +
      "Unfinished ones are kept."
  };
  var SKIPPED = {
    retry: "not failed, timed out or cancelled",
    requeue: "not failed, timed out or cancelled",
    cancel: "finished already",
    purge: "not finished"
  };

  function n(count) { return Number(count).toLocaleString("en-US"); }
  function jobs(count) { return n(count) + (count === 1 ? " job" : " jobs"); }
  function region() { return document.getElementById("region"); }
  function matched() { return document.getElementById("jobs-matched"); }
  function boxes() { return Array.prototype.slice.call(document.querySelectorAll("input[data-bulk-job]")); }
  function pageBox() { return document.querySelector("input[data-bulk-page]"); }
  function el(name) { return bar.querySelector("[data-bulk-" + name + "]"); }

  function filter() {
    var r = matched();
    var wanted = {};
    ["status", "type", "q"].forEach(function (key) {
      var value = r ? r.getAttribute("data-filter-" + key) : "";
      if (value) { wanted[key] = value; }
    });
    return wanted;
  }

  function total() { var r = matched(); return r ? Number(r.dataset.total || 0) : 0; }
  // How many jobs an action would take now.
  function count() { return everything ? Math.min(total(), cap) : chosen.size; }

  function clear() {
    chosen.clear();
    everything = false;
  }

  // Draw the checkboxes and the bar from the selection (after every swap too).
  function sync() {
    var key = JSON.stringify(filter());
    if (filterKey !== key) { clear(); filterKey = key; }
    var rows = boxes();
    rows.forEach(function (box) { box.checked = everything || chosen.has(box.value); });
    var all = pageBox();
    if (all) {
      var on = rows.filter(function (box) { return box.checked; }).length;
      all.checked = rows.length > 0 && on === rows.length;
      all.indeterminate = on > 0 && on < rows.length;
    }
    var size = count();
    var label = el("count");
    if (everything) {
      label.textContent = total() > cap
        ? "The newest " + jobs(cap) + " of " + n(total()) + " matching this filter are selected (the cap)."
        : "All " + jobs(total()) + " matching this filter are selected.";
    } else {
      label.textContent = size ? jobs(size) + " selected." : "Select jobs to act on them.";
    }
    var more = el("all");
    var pageDone = rows.length > 0 && rows.every(function (box) { return chosen.has(box.value); });
    if (!everything && pageDone && total() > rows.length) {
      more.hidden = false;
      more.textContent = total() > cap
        ? "Select the newest " + jobs(cap) + " of " + n(total()) + " matching (capped at " + n(cap) + ")"
        : "Select all " + jobs(total()) + " matching this filter (capped at " + n(cap) + ")";
    } else {
      more.hidden = true;
    }
    el("clear").hidden = size === 0;
    bar.querySelectorAll("[data-bulk-action]").forEach(function (button) {
      button.disabled = size === 0;
    });
  }

  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.matches("input[data-bulk-job]")) {
      if (everything) {  // unticking one row leaves the rows of this page
        everything = false;
        boxes().forEach(function (b) { chosen.add(b.value); });
      }
      if (box.checked) { chosen.add(box.value); } else { chosen.delete(box.value); }
      sync();
    } else if (box.matches("input[data-bulk-page]")) {
      everything = false;
      boxes().forEach(function (b) {
        if (box.checked) { chosen.add(b.value); } else { chosen.delete(b.value); }
      });
      sync();
    }
  });

  el("all").addEventListener("click", function () { everything = true; sync(); });
  el("clear").addEventListener("click", function () { clear(); sync(); });

  bar.querySelectorAll("[data-bulk-action]").forEach(function (button) {
    button.addEventListener("click", function () {
      pending = button.getAttribute("data-bulk-action");
      var size = count();
      var question = VERBS[pending] + " " + jobs(size) + "?";
      dialog.querySelector("[data-bulk-question]").textContent = question;
      var explain = EXPLAIN[pending];
      if (everything && total() > cap) {
        explain += " Only the newest " + n(cap) + " of the " + n(total()) +
          " matching jobs are taken (the cap).";
      }
      dialog.querySelector("[data-bulk-explain]").textContent = explain;
      var confirm = dialog.querySelector("[data-bulk-confirm]");
      confirm.textContent = VERBS[pending] + " " + jobs(size);
      confirm.classList.toggle("danger", pending === "purge" || pending === "cancel");
      confirm.classList.toggle("primary", !(pending === "purge" || pending === "cancel"));
      dialog.returnValue = "";  // Escape keeps the last value: never a stale "ok"
      dialog.showModal();
    });
  });

  dialog.addEventListener("close", function () {
    if (dialog.returnValue === "ok" && pending) { run(pending); }
    pending = null;
  });

  function say(kind, text, link) {
    var box = el("result");
    box.className = "bulk-result " + kind;
    box.textContent = text;  // text, never HTML
    if (link) {
      var a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      box.append(" ", a);
    }
    box.hidden = false;
  }

  function run(action) {
    var body = everything ? { filter: filter() } : { ids: Array.from(chosen) };
    var meta = document.querySelector('meta[name="csrf-token"]');
    var headers = { "Content-Type": "application/json" };
    if (meta && meta.content) { headers["X-CSRF-Token"] = meta.content; }
    bar.setAttribute("aria-busy", "true");
    fetch(bar.dataset.url + action, {
      method: "POST",
      headers: headers,
      body: JSON.stringify(body),
      credentials: "same-origin"
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        return { response: response, data: data };
      });
    }).then(function (answer) {
      var data = answer.data;
      var status = answer.response.status;
      if (answer.response.ok) {
        var text = DONE[action] + " " + n(data.acted) + " of " + jobs(data.selected) + ".";
        if (data.skipped) {
          text += " " + n(data.skipped) + (data.skipped === 1 ? " was " : " were ") +
            SKIPPED[action] + ": left as " + (data.skipped === 1 ? "it was." : "they were.");
        }
        if (data.capped) {
          text += " Only the newest " + n(data.selected) + " of " + n(data.matched) +
            " matching jobs were taken (the cap).";
        }
        say("ok", text);
        clear();
        sync();
        var r = region();
        if (r && window.htmx) {
          htmx.ajax("GET", window.location.pathname + window.location.search,
                    { target: r, swap: "outerHTML", select: "#region" });
        }
      } else if (status === 401) {
        var login = document.body.dataset.login;
        say("error", "Not allowed: you are not logged in (" + (data.error || status) + ").",
            login ? { href: login, text: "Log in with the dashboard's token" } : null);
      } else {
        say("error", "Not done: " + (data.error || answer.response.statusText || status));
      }
    }).catch(function () {
      say("error", "The dashboard did not answer.");
    }).finally(function () {
      bar.removeAttribute("aria-busy");
    });
  }

  // Whoever swaps #region (live.js's refresh, the filters, an action's
  // answer), the new rows get the selection: an event on the swapped-out
  // element would reach no listener, so watch the panel itself.
  new MutationObserver(sync).observe(bar.parentNode, { childList: true });
  sync();
})();
