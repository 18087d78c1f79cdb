// The task table of report.html: filters, search and sorting, all in the page (no network).
// Text search loads the run's search index (report_files/search.js) the first time something is typed.
(function () {
  "use strict";
  var table = document.getElementById("task-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var box = document.getElementById("q");
  var shown = document.getElementById("shown");
  var none = document.getElementById("no-rows");
  var index = null;       // stem -> lower-case prompts and answers, once loaded
  var indexState = "";    // "", "loading", "loaded", "missing"
  var ids = rows.map(function (row) { return row.cells[0].textContent.toLowerCase(); });

  function loadIndex() {
    if (indexState) { return; }
    indexState = "loading";
    var script = document.createElement("script");
    script.src = table.getAttribute("data-search");
    script.onload = function () {
      var raw = window.vtbSearchIndex || {};
      index = {};
      Object.keys(raw).forEach(function (stem) { index[stem] = String(raw[stem]).toLowerCase(); });
      indexState = "loaded";
      apply();
    };
    script.onerror = function () { indexState = "missing"; apply(); };
    document.body.appendChild(script);
  }

  function apply() {
    var wanted = selects.map(function (s) { return [s.getAttribute("data-filter"), s.value]; });
    var query = box.value.trim().toLowerCase();
    if (query) { loadIndex(); }
    var count = 0;
    rows.forEach(function (row, i) {
      var ok = wanted.every(function (w) { return !w[1] || row.getAttribute("data-" + w[0]) === w[1]; });
      if (ok && query) {
        var text = index ? index[row.getAttribute("data-stem")] || "" : "";
        ok = ids[i].indexOf(query) !== -1 || text.indexOf(query) !== -1;
      }
      row.hidden = !ok;
      if (ok) { count += 1; }
    });
    var note = query && indexState === "loading" ? " (searching ids; loading the text index…)" :
      query && indexState === "missing" ? " (text index " + table.getAttribute("data-search") + " missing: ids only)" : "";
    shown.textContent = count + " of " + rows.length + " tasks" + note;
    none.hidden = count !== 0;
  }

  function sortBy(column, numeric, descending) {
    function key(row) {
      var cell = row.cells[column];
      if (!numeric) { return cell.textContent.toLowerCase(); }
      var v = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent;
      return v === "" ? null : parseFloat(v);
    }
    var keyed = rows.map(function (row, i) { return [key(row), i, row]; });
    keyed.sort(function (a, b) {
      if (a[0] === b[0]) { return a[1] - b[1]; }
      if (a[0] === null) { return 1; }     // unknown values last, either way
      if (b[0] === null) { return -1; }
      var c = a[0] < b[0] ? -1 : 1;
      return descending ? -c : c;
    });
    keyed.forEach(function (k) { body.appendChild(k[2]); });
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
    th.title = "sort";
    th.addEventListener("click", function () {
      var descending = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      sortBy(column, th.getAttribute("data-sort") === "num", descending);
    });
  });
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  box.addEventListener("input", apply);
  apply();
}());
