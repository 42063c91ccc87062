// Live updates: one EventSource per page. When the store changes, htmx fragments that listen
// for "st-refresh" fetch themselves again and charts redraw (at most once per 2 s each).
(function () {
  "use strict";
  const live = document.getElementById("live");
  const banner = document.getElementById("banner");
  let lastMark = null;
  let busy = false;

  function say(text, kind) {
    if (!text) { banner.hidden = true; banner.textContent = ""; return; }
    banner.textContent = text;              // text, never HTML
    banner.className = "banner " + (kind || "");
    banner.hidden = false;
  }

  function connect() {
    const source = new EventSource("/events");
    source.addEventListener("open", function () {
      live.textContent = "live";
      live.className = "live on";
      say(null);
    });
    source.addEventListener("change", function (event) {
      // The first mark too: the page was rendered before the stream opened, and a change in
      // between (a job that ended just after its page was read) would never show otherwise.
      if (event.data !== lastMark) {
        document.body.dispatchEvent(new CustomEvent("st-refresh"));
      }
      lastMark = event.data;
    });
    source.addEventListener("store-error", function (event) {
      live.textContent = "store unreadable";
      live.className = "live off";
      say("The store cannot be read: " + event.data + " (retrying)", "error");
    });
    source.addEventListener("busy", function (event) {
      live.textContent = "waiting";
      live.className = "live off";
      say("Live updates wait: " + event.data, "warn");
      busy = true;
    });
    source.addEventListener("error", function () {
      if (busy) { busy = false; return; }   // turned away: it asks again by itself

      live.textContent = "reconnecting…";
      live.className = "live off";
      say("Connection to the console lost; reconnecting…", "warn");
      // EventSource retries by itself while the page lives; a closed one is opened again.
      if (source.readyState === EventSource.CLOSED) { setTimeout(connect, 2000); }
    });
  }

  // Forms that change something ask first (no inline handlers: the page's policy forbids them).
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (window.ScaletuneCharts) { window.ScaletuneCharts.start(document); }
    connect();
  });
})();
