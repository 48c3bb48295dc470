// The live refresh of the itemops web view. A page of a run that is still moving marks
// its <main> with data-live, the ETag of its JSON form and the interval. Every interval
// this asks the JSON form with If-None-Match: a 304 means nothing changed and nothing is
// redrawn; any other answer fetches the page again and puts its <main> in place of the
// old one. It stops once the JSON form says the run is no longer live, or the run is
// gone. Without this script, the page is the same and a reload updates it.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.fetch || !window.DOMParser) {
    return;
  }
  var tag = main.getAttribute("data-etag") || "";
  var every = parseInt(main.getAttribute("data-refresh-ms"), 10) || 5000;

  function jsonURL() {
    var u = new URL(window.location.href);
    u.searchParams.set("format", "json");
    return u.toString();
  }

  function say(text) {
    var s = document.getElementById("live-status");
    if (s) {
      s.textContent = text;
    }
  }

  // redraw replaces <main> with the page's fresh one, keeping the focus on the element
  // of the same id, so that a keyboard user does not lose their place.
  function redraw() {
    return fetch(window.location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("page answered " + res.status);
        }
        return res.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").querySelector("main");
        if (!fresh) {
          return;
        }
        var focused = document.activeElement && document.activeElement.id;
        fresh = document.adoptNode(fresh);
        main.replaceWith(fresh);
        main = fresh;
        if (focused) {
          var again = document.getElementById(focused);
          if (again) {
            again.focus();
          }
        }
      });
  }

  function tick() {
    var headers = {};
    if (tag) {
      headers["If-None-Match"] = tag;
    }
    fetch(jsonURL(), { cache: "no-store", credentials: "same-origin", headers: headers })
      .then(function (res) {
        if (res.status === 304) {
          setTimeout(tick, every);
          return;
        }
        if (res.status === 404) {
          say("The run is gone from the store.");
          return;
        }
        if (!res.ok) {
          throw new Error("JSON form answered " + res.status);
        }
        tag = res.headers.get("ETag") || "";
        return res.json().then(function (doc) {
          return redraw().then(function () {
            if (doc.live) {
              setTimeout(tick, every);
            } else {
              say("The run has ended.");
            }
          });
        });
      })
      .catch(function () {
        // A server that restarts or a network that drops is asked again later.
        setTimeout(tick, every);
      });
  }

  setTimeout(tick, every);
})();
