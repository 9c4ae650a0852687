// The approvals inbox's one script. Every page works without it; with it:
// - times read in the viewer's own zone, with "3 min ago" and "6d 23h left" kept current;
// - the list of waiting calls keeps itself current (new calls appear, decided ones go) and
//   the tab's title counts them;
// - the tool filter applies on change; bulk approve/deny asks once, in a dialog;
// - keys: a approve, d deny, e edit, n the next waiting call, / the tool filter;
// - a sign-in link's token (after "#") is posted, as the form would.
(function () {
  "use strict";
  var LIVE_EVERY_MS = 3000;
  var TIMES_EVERY_MS = 30000;

  function span(seconds) {
    seconds = Math.abs(seconds);
    if (seconds < 45) return null;
    var minutes = Math.round(seconds / 60);
    if (minutes < 60) return Math.max(minutes, 1) + " min";
    var hours = seconds / 3600;
    if (hours < 24) return Math.round(hours) + " h";
    return Math.round(hours / 24) + " d";
  }

  function ago(date) {
    var seconds = (Date.now() - date.getTime()) / 1000;
    var s = span(seconds);
    if (s === null) return "just now";
    return seconds < 0 ? "in " + s : s + " ago";
  }

  function left(date) {
    var seconds = (date.getTime() - Date.now()) / 1000;
    if (seconds <= 0) return "expired";
    var days = Math.floor(seconds / 86400), hours = Math.floor((seconds % 86400) / 3600);
    var minutes = Math.floor((seconds % 3600) / 60);
    if (days) return days + "d " + hours + "h";
    if (hours) return hours + "h " + minutes + "m";
    return Math.max(minutes, 1) + " min";
  }

  var local = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  var full = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

  function showTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) return;
      var text = local.format(date);
      if (el.dataset.style === "ago") text += " (" + ago(date) + ")";
      el.textContent = text;
      el.title = full.format(date);
    });
    root.querySelectorAll("[data-left]").forEach(function (el) {
      var when = el.getAttribute("data-left");
      if (!when) return;
      var date = new Date(when), text = left(date);
      el.textContent = text;
      el.parentElement.classList.toggle("expired", text === "expired");
    });
  }

  function setCount(count) {
    document.title = document.title.replace(/^\(\d+\) /, "");
    if (count) document.title = "(" + count + ") " + document.title;
    var link = document.querySelector("header.bar a[href='/']");
    if (!link) return;
    var badge = link.querySelector("[data-count]");
    if (count && !badge) {
      badge = document.createElement("span");
      badge.className = "count";
      badge.setAttribute("data-count", "");
      link.appendChild(document.createTextNode(" "));
      link.appendChild(badge);
    }
    if (badge) {
      badge.textContent = String(count);
      badge.hidden = !count;
    }
  }

  function liveList(form) {
    var url = form.getAttribute("data-live");
    var table = document.getElementById("waiting");
    var empty = document.getElementById("waiting-empty");
    var bulk = form.querySelector("[data-bulk]");
    var body = table.querySelector("tbody");
    var busy = false;
    function keys() {
      return Array.prototype.map.call(body.querySelectorAll("tr[data-key]"), function (tr) { return tr.dataset.key; });
    }
    function refresh() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (got) {
          if (!got) return;
          setCount(got.count);
          var before = keys();
          if (before.join("\n") === got.keys.join("\n")) return;
          var checked = {};
          body.querySelectorAll("input[name=call]:checked").forEach(function (c) { checked[c.value] = true; });
          body.innerHTML = got.rows;
          body.querySelectorAll("tr[data-key]").forEach(function (tr) {
            if (before.indexOf(tr.dataset.key) < 0) tr.classList.add("fresh");
            var box = tr.querySelector("input[name=call]");
            if (box && checked[box.value]) box.checked = true;
          });
          var none = got.keys.length === 0;
          table.hidden = none;
          empty.hidden = !none;
          if (bulk) bulk.hidden = none;
          showTimes(body);
        })
        .catch(function () {})
        .then(function () { busy = false; });
    }
    setInterval(refresh, LIVE_EVERY_MS);
    document.addEventListener("visibilitychange", refresh);
  }

  function bulkConfirm(form) {
    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      var action = button && button.value;
      var picked = form.querySelectorAll("input[name=call]:checked").length;
      if (!action) return;
      if (!picked) {
        event.preventDefault();
        window.alert("Select the calls to " + action + " first (the boxes at the left).");
        return;
      }
      var reason = form.querySelector("input[name=comment]");
      if (action === "deny" && reason && !reason.value.trim()) {
        event.preventDefault();
        reason.focus();
        window.alert("Say why they are denied: the code of each run sees the reason.");
        return;
      }
      var who = document.querySelector("header.bar .who");
      var question = (action === "approve" ? "Approve " : "Deny ") + picked + " call" + (picked === 1 ? "" : "s") +
        (who ? " as " + who.dataset.identity : "") + "? Each is decided on its own.";
      if (!window.confirm(question)) {
        event.preventDefault();
        return;
      }
      var yes = document.createElement("input");
      yes.type = "hidden";
      yes.name = "confirm";
      yes.value = "yes";
      form.appendChild(yes);
    });
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function focus(el) {
    if (!el) return;
    el.scrollIntoView({ block: "center" });
    el.focus();
  }

  function keys(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    var page = document.body.dataset.page;
    if (key === "n") {
      var next = document.querySelector("a[rel=next]");
      if (!next && page === "list") {
        var links = document.querySelectorAll("#waiting td.main a");
        next = links[links.length - 1];  // the list is newest first: the oldest waits longest
      }
      if (next) { event.preventDefault(); window.location.href = next.href; }
    } else if (page === "call" && key === "a") {
      event.preventDefault(); focus(document.querySelector("#approve button"));
    } else if (page === "call" && key === "d") {
      event.preventDefault(); focus(document.querySelector("#deny input[name=comment]"));
    } else if (page === "call" && key === "e") {
      event.preventDefault(); focus(document.querySelector("#edit textarea"));
    } else if (page === "list" && key === "/") {
      event.preventDefault(); focus(document.querySelector("form[data-autosubmit] select"));
    }
  }

  // A printed sign-in link carries its token after "#" (never sent to a server): post it.
  function signInFromLink() {
    var match = /^#token=([A-Za-z0-9_-]+)$/.exec(window.location.hash);
    var form = document.querySelector("form[action='/login']");
    if (!match || !form) return;
    history.replaceState(null, "", window.location.pathname + window.location.search);
    form.querySelector("input[name=token]").value = match[1];
    form.submit();
  }

  document.addEventListener("DOMContentLoaded", function () {
    signInFromLink();
    showTimes(document);
    setInterval(function () { showTimes(document); }, TIMES_EVERY_MS);
    document.querySelectorAll("form[data-autosubmit] select").forEach(function (select) {
      select.addEventListener("change", function () { select.form.submit(); });
    });
    var bulk = document.getElementById("bulk");
    if (bulk) {
      bulkConfirm(bulk);
      if (bulk.hasAttribute("data-live")) liveList(bulk);
    }
    document.addEventListener("keydown", keys);
  });
})();
