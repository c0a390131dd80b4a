// jobsched dashboard: live updates, the CSRF header, and what an action answered.
//
// One EventSource on the URL in <body data-events>; every event it sends means
// "something may have changed", so the page's live part (#region) is fetched
// again (htmx asks, so the server answers with that fragment only): 250 ms
// after the last event, one fetch at a time, and once more if events came
// while one was under way, so the last change is always shown.
// A person's own request into #region (a filter of the overview's history)
// comes first: no refresh starts while one is under way, and a refresh that
// began before one does not swap over it (the person's answer, or their
// choice, would be lost); the page is fetched again once theirs is done.
// Every request htmx sends carries the CSRF token of <meta name="csrf-token">.
// Action buttons and forms (hx-post, hx-swap="none", data-done="what
// succeeded") report in #flash: their data-done text, or the error the API
// answered; a form also shows each bad field's line beside the field.
(function () {
  "use strict";

  var refreshing = false;
  var again = false;
  var timer = null;
  var LIVE = "X-Jobsched-Refresh";  // marks the refreshes' own requests
  var asked = 0;       // a person's requests into #region under way
  var askedEver = 0;   // how many of those began
  var liveSince = 0;   // askedEver when the refresh under way began

  function refresh() {
    var region = document.getElementById("region");
    if (!region) { return; }
    if (refreshing || asked > 0) { again = true; return; }
    refreshing = true;
    liveSince = askedEver;
    htmx.ajax("GET", window.location.pathname + window.location.search,
              { target: region, swap: "outerHTML", select: "#region", headers: { [LIVE]: "1" } })
      .finally(function () {
        refreshing = false;
        // How many refreshes the page has had (a test waits for the first).
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
        if (again) { again = false; refresh(); }
      });
  }

  function changed() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  }

  function flash(kind, text, link) {
    var box = document.getElementById("flash");
    if (!box) { return; }
    box.className = "flash " + kind;
    box.textContent = text;  // text, never HTML: messages may quote job fields
    if (link) {
      var a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      box.append(" ", a);
    }
    box.hidden = false;
  }

  function reason(xhr) {
    try {
      var body = JSON.parse(xhr.responseText);
      return body.error || body.detail || body.message || xhr.statusText;
    } catch (e) {
      return xhr.statusText || "the request failed";
    }
  }

  function live(detail) {
    var config = detail.requestConfig;
    return Boolean(config && config.headers && config.headers[LIVE]);
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var target = event.detail.target;
    if (live(event.detail) || !target || target.id !== "region") { return; }
    asked += 1;
    askedEver += 1;
    // Read off the request: its own answer swaps the form that sent it out.
    event.detail.xhr.addEventListener("loadend", function () {
      asked -= 1;
      if (asked === 0 && again) { again = false; refresh(); }
    });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    if (live(event.detail) && askedEver !== liveSince) {
      event.detail.shouldSwap = false;
      again = true;
    }
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta && meta.content) { event.detail.headers["X-CSRF-Token"] = meta.content; }
  });

  // The answer is read from the request itself, not from an event on the
  // button: a live refresh may swap the button out while its request is under
  // way, and an event on a detached button reaches no listener.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var button = event.detail.elt;
    if (!button.hasAttribute("data-done")) { return; }
    var done = button.getAttribute("data-done");
    var xhr = event.detail.xhr;
    xhr.addEventListener("loadend", function () { report(xhr, done, button); });
  });

  // A form's bad fields (a 400's {"errors": {field: line}}), each shown in
  // the form's [data-error-for=field] (as text); cleared on every answer.
  function fieldErrors(form, xhr) {
    if (form.tagName !== "FORM") { return; }
    form.querySelectorAll("[data-error-for]").forEach(function (box) {
      box.textContent = "";
      box.hidden = true;
    });
    var errors = null;
    try { errors = JSON.parse(xhr.responseText).errors; } catch (e) { errors = null; }
    if (!errors || xhr.status !== 400) { return; }
    Object.keys(errors).forEach(function (name) {
      var box = form.querySelector('[data-error-for="' + CSS.escape(name) + '"]');
      if (box) { box.textContent = errors[name]; box.hidden = false; }
    });
  }

  function report(xhr, done, elt) {
    fieldErrors(elt, xhr);
    if (xhr.status >= 200 && xhr.status < 300) {
      flash("ok", done);
      // A form with data-then goes there (the edited schedule's page is gone).
      if (elt.dataset.then) { window.location.assign(elt.dataset.then); return; }
      changed();
    } else if (xhr.status === 401) {
      var login = document.body.dataset.login;
      flash("error", "Not allowed: you are not logged in (" + reason(xhr) + ").",
            login ? { href: login, text: "Log in with the dashboard's token" } : null);
    } else if (xhr.status === 0) {
      flash("error", "The dashboard did not answer.");
    } else {
      flash("error", "Not done: " + reason(xhr));
    }
  }

  var url = document.body.dataset.events;
  if (!url || !window.EventSource) { return; }
  var source = new EventSource(url);
  var dot = document.getElementById("live");
  function state(on, title) {
    if (dot) { dot.dataset.state = on; dot.title = title; }
  }
  source.addEventListener("open", function () { state("on", "live: pages update as jobs change"); });
  source.addEventListener("error", function () { state("off", "reconnecting to live updates…"); });
  source.addEventListener("stats", changed);
  source.addEventListener("message", changed);
})();
