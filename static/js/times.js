/* Times in the reader's own zone, with the zone named: each <time data-local="date|time"> the
   server wrote in UTC ("2026-11-24 09:11:05 UTC") is rewritten from its datetime attribute;
   an element with id "zone" is told the zone's name. */
(function () {
  "use strict";

  var FORMATS = {
    date: { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
            second: "2-digit", hourCycle: "h23", timeZoneName: "short" },
    time: { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" },
  };

  document.querySelectorAll("time[data-local][datetime]").forEach(function (time) {
    var at = new Date(time.getAttribute("datetime"));
    var format = FORMATS[time.dataset.local];
    if (isNaN(at) || !format) return;
    time.title = time.getAttribute("datetime");
    time.textContent = new Intl.DateTimeFormat(undefined, format).format(at);
  });
  var zone = document.getElementById("zone");
  if (zone) zone.textContent = Intl.DateTimeFormat().resolvedOptions().timeZone;
})();
